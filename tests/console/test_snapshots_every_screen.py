"""Every screen and dialog at 80×24 and 100×30, pinned like the other snapshots (issue 22, item 11).

`test_snapshots.py` has the finished run, the audit runs list and help at these sizes; this module
adds the rest: the idle console, the scenario picker moved far down its list, the audit invocations
and a replay, the export dialog, a long follow-up preview and the quit question during a run.

Regenerate after an intended change with
`pytest tests/console/test_snapshots_every_screen.py --snapshot-update` and look at the SVGs.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from console.screens.replay import ReplayScreen
from console.widgets.run_view import RunView
from tests.support.console import (
    a_slow_run,
    audit_app,
    audit_loaded,
    engine_ready,
    long_draft_scenario,
    make_app,
    run_to_end,
    slow_app,
    wait_until,
)

SnapCompare = Callable[..., bool]
SIZES = [(80, 24), (100, 30)]
at_sizes = pytest.mark.parametrize("size", SIZES, ids=lambda size: f"{size[0]}x{size[1]}")


@at_sizes
def test_idle(snap_compare: SnapCompare, tmp_path: Path, size: tuple[int, int]) -> None:
    assert snap_compare(make_app(tmp_path), terminal_size=size, run_before=engine_ready)


@at_sizes
def test_scenario_picker_far_down(snap_compare: SnapCompare, tmp_path: Path, size: tuple[int, int]) -> None:
    async def run_before(pilot: Pilot[Any]) -> None:
        await engine_ready(pilot)
        await pilot.press("f4")
        await pilot.pause()
        for _ in range(12):
            await pilot.press("down")
        await pilot.pause()

    assert snap_compare(make_app(tmp_path), terminal_size=size, run_before=run_before)


@at_sizes
def test_audit_invocations(
    snap_compare: SnapCompare,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    recorded_runs: Any,
    size: tuple[int, int],
) -> None:
    async def run_before(pilot: Pilot[Any]) -> None:
        await audit_loaded(pilot)
        await pilot.press("ctrl+o")
        await pilot.pause()

    app = audit_app(tmp_path, monkeypatch, recorded_runs)
    assert snap_compare(app, terminal_size=size, run_before=run_before)


@at_sizes
def test_audit_replay(
    snap_compare: SnapCompare,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    recorded_runs: Any,
    size: tuple[int, int],
) -> None:
    async def run_before(pilot: Pilot[Any]) -> None:
        await audit_loaded(pilot)
        await pilot.press("enter")
        await wait_until(lambda: isinstance(pilot.app.screen, ReplayScreen), pilot, what="the replay")
        view = pilot.app.screen.query_one(RunView)
        await wait_until(lambda: view.state.result is not None, pilot, what="the replayed run")
        await pilot.pause()

    app = audit_app(tmp_path, monkeypatch, recorded_runs)
    assert snap_compare(app, terminal_size=size, run_before=run_before)


@at_sizes
def test_export_dialog(snap_compare: SnapCompare, tmp_path: Path, size: tuple[int, int]) -> None:
    async def run_before(pilot: Pilot[Any]) -> None:
        await run_to_end(pilot)
        await pilot.press("ctrl+s")
        await pilot.pause()

    # The dialog shows its folder: a fixed one, so the picture is the same on every machine.
    app = make_app(Path("/srv/incidents"), "evidence-backed-diagnosis", audit_db=tmp_path / "audit.db")
    assert snap_compare(app, terminal_size=size, run_before=run_before)


@at_sizes
def test_follow_up_with_a_long_draft(
    snap_compare: SnapCompare, tmp_path: Path, size: tuple[int, int]
) -> None:
    async def run_before(pilot: Pilot[Any]) -> None:
        await run_to_end(pilot)
        await pilot.press("ctrl+f")
        await pilot.pause()

    scenario = long_draft_scenario(tmp_path)
    app = make_app(tmp_path, str(scenario))
    assert snap_compare(app, terminal_size=size, run_before=run_before)


@at_sizes
def test_confirm_quit_during_a_run(snap_compare: SnapCompare, tmp_path: Path, size: tuple[int, int]) -> None:
    async def run_before(pilot: Pilot[Any]) -> None:
        await a_slow_run(pilot)
        await pilot.press("ctrl+q")
        await pilot.pause()

    app = slow_app(tmp_path, delay_s=60.0)
    assert snap_compare(app, terminal_size=size, run_before=run_before)
