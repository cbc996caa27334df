"""Screenshots of the console, pinned: terminal size, ids, session, clock, hidden timings, no cursor blink.

Regenerate after an intended change with `pytest tests/console/test_snapshots.py --snapshot-update` and
review the SVGs. (Snapshot tests are sync: snap_compare runs the app in its own event loop.)
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pytest
from textual.pilot import Pilot

from console.app import DiagnoseApp
from tests.support.console import (
    SIZE,
    audit_app,
    audit_loaded,
    engine_ready,
    make_app,
    run_to_end,
    wait_until,
)

SnapCompare = Callable[..., bool]

SLOW_SCENARIO = """\
name: slow-second-round
title: The model takes its time in round 2
description: Used to photograph a run in progress.
query: "payment-service 2026-11-30 02:00-03:00 UTC 支付超时，请诊断。"
rounds:
  - tool_calls:
      - {id: call-1, name: lookup_knowledge,
         arguments: {previous_observation: null, input: {query: "payment-service 支付超时", top_k: 2}}}
    usage: {prompt_tokens: 812, completion_tokens: 64}
  - text: '{"conclusion": null}'
    usage: {prompt_tokens: 1400, completion_tokens: 210}
    delay_ms: 600000
"""


def finished(*keys: str) -> Callable[[Pilot[Any]], Any]:
    async def run_before(pilot: Pilot[Any]) -> None:
        await run_to_end(pilot)
        for key in keys:
            await pilot.press(key)
            await pilot.pause()

    return run_before


def test_idle_screen(snap_compare: SnapCompare, tmp_path: Path) -> None:
    assert snap_compare(make_app(tmp_path), terminal_size=SIZE, run_before=engine_ready)


def test_run_in_progress(snap_compare: SnapCompare, tmp_path: Path) -> None:
    scenario = tmp_path / "slow.yaml"
    scenario.write_text(SLOW_SCENARIO, encoding="utf-8")

    async def run_before(pilot: Pilot[Any]) -> None:
        await engine_ready(pilot)
        await pilot.press("ctrl+r")
        screen = cast(DiagnoseApp, pilot.app).investigate
        await wait_until(lambda: screen.state.round_in_flight == 2, pilot, what="model round 2")
        await pilot.pause(0.1)

    assert snap_compare(make_app(tmp_path, str(scenario)), terminal_size=SIZE, run_before=run_before)


def test_evidence_backed_draft(snap_compare: SnapCompare, tmp_path: Path) -> None:
    async def run_before(pilot: Pilot[Any]) -> None:
        await run_to_end(pilot)
        view = cast(DiagnoseApp, pilot.app).investigate.run_view
        view.timeline.jump_to("call-2")
        view.show_detail(("call", "call-2"))
        await pilot.pause()

    assert snap_compare(
        make_app(tmp_path, "evidence-backed-diagnosis"), terminal_size=SIZE, run_before=run_before
    )


def test_no_evidence_stop(snap_compare: SnapCompare, tmp_path: Path) -> None:
    assert snap_compare(
        make_app(tmp_path, "tool-finds-no-evidence"), terminal_size=SIZE, run_before=finished()
    )


def test_controlled_stop(snap_compare: SnapCompare, tmp_path: Path) -> None:
    assert snap_compare(
        make_app(tmp_path, "stop-required-ignored"), terminal_size=SIZE, run_before=finished()
    )


def test_budget_exhausted(snap_compare: SnapCompare, tmp_path: Path) -> None:
    app = make_app(tmp_path, "model-call-budget-exhausted")
    assert snap_compare(app, terminal_size=SIZE, run_before=finished())


def test_audit_screen(
    snap_compare: SnapCompare, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, recorded_runs: Any
) -> None:
    app = audit_app(tmp_path, monkeypatch, recorded_runs)
    assert snap_compare(app, terminal_size=SIZE, run_before=audit_loaded)


def test_scenario_picker(snap_compare: SnapCompare, tmp_path: Path) -> None:
    async def run_before(pilot: Pilot[Any]) -> None:
        await engine_ready(pilot)
        await pilot.press("f4")

    assert snap_compare(make_app(tmp_path), terminal_size=SIZE, run_before=run_before)


def test_help_screen(snap_compare: SnapCompare, tmp_path: Path) -> None:
    async def run_before(pilot: Pilot[Any]) -> None:
        await engine_ready(pilot)
        await pilot.press("f1")

    assert snap_compare(make_app(tmp_path), terminal_size=SIZE, run_before=run_before)


# ------------------------------------------------------------------ every size from 80×24 up (issue 12)
SIZES = [(80, 24), (100, 30), (160, 45)]


@pytest.mark.parametrize("size", SIZES, ids=lambda size: f"{size[0]}x{size[1]}")
def test_finished_run_at_size(snap_compare: SnapCompare, tmp_path: Path, size: tuple[int, int]) -> None:
    """Narrow sizes show the Result tab (a finished run brings it forward); wide ones every panel."""
    app = make_app(tmp_path, "evidence-backed-diagnosis")
    assert snap_compare(app, terminal_size=size, run_before=finished())


@pytest.mark.parametrize("size", SIZES, ids=lambda size: f"{size[0]}x{size[1]}")
def test_audit_screen_at_size(
    snap_compare: SnapCompare,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    recorded_runs: Any,
    size: tuple[int, int],
) -> None:
    app = audit_app(tmp_path, monkeypatch, recorded_runs)
    assert snap_compare(app, terminal_size=size, run_before=audit_loaded)


@pytest.mark.parametrize("size", SIZES, ids=lambda size: f"{size[0]}x{size[1]}")
def test_help_screen_at_size(snap_compare: SnapCompare, tmp_path: Path, size: tuple[int, int]) -> None:
    async def run_before(pilot: Pilot[Any]) -> None:
        await engine_ready(pilot)
        await pilot.press("f1")

    assert snap_compare(make_app(tmp_path), terminal_size=size, run_before=run_before)
