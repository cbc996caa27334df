"""Driving the console in tests: an app pinned for determinism, waiting for it, reading what it shows.

Every source of variation is pinned (session and run IDs, clock, timings, cursor blink), each test
gets its own audit file, and what a test asserts on is the text an operator would read.
"""

from __future__ import annotations

import io
import itertools
import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import pytest
from rich.console import Console
from textual.pilot import Pilot
from textual.widgets import OptionList, Static

from console.app import DiagnoseApp
from console.host import ConsoleOptions
from console.screens.audit import PagedTable
from console.widgets.result import ResultView
from tests.support import waiting
from tests.support.engine import RecordingAdapter
from tests.support.recorded import fill_audit

SIZE = (120, 40)
FIXED_NOW = datetime(2026, 11, 30, 3, 0, 0, tzinfo=UTC)
# Built-in scenarios whose recorded runs fill the audit in audit-screen tests and snapshots.
AUDIT_SCENARIOS = (
    "evidence-backed-diagnosis",
    "model-call-budget-exhausted",
    "oversized-query-rejected",
    "stop-required-ignored",
    "tool-error-no-retry",
)


def pinned_ids(prefix: str = "run") -> Callable[[], str]:
    counter = itertools.count(1)
    return lambda: f"{prefix}-{next(counter):04d}"


def pinned_options(tmp_path: Path) -> ConsoleOptions:
    """Every source of variation pinned: IDs, clock, timings, cursor blink, export folder."""
    return ConsoleOptions(
        session_id="session-test",
        run_id_factory=pinned_ids(),
        clock=lambda: FIXED_NOW,
        show_timings=False,
        cursor_blink=False,
        export_dir=tmp_path,
    )


def make_app(tmp_path: Path, scenario: str | None = None, **overrides: Any) -> DiagnoseApp:
    """The console as snapshots and pilots need it, on its own audit file; `overrides` are
    DiagnoseApp's arguments (config, scenario_dir, env_factory, options)."""
    arguments: dict[str, Any] = {"audit_db": tmp_path / "audit.db", "options": pinned_options(tmp_path)}
    arguments.update(overrides)
    return DiagnoseApp(scenario=scenario, **arguments)


def slow_environment(tmp_path: Path, adapter: RecordingAdapter) -> Any:
    """A RunEnvironment whose evidence tools answer through a slow test adapter."""

    def factory(scenario: str | None) -> Any:
        from agent.scenarios import resolve_scenario
        from agent.settings import load_settings
        from audit.factory import open_audit_store
        from audit.location import SqliteLocation
        from console.wiring import RunEnvironment
        from tools.boundary import ToolBoundary
        from tools.redaction import NOOP

        chosen = resolve_scenario(scenario or "evidence-backed-diagnosis")
        settings = load_settings(None, overrides=chosen.settings)
        boundary = ToolBoundary({"lookup_knowledge": adapter, "query_logs": adapter})
        return RunEnvironment(
            settings, chosen, boundary, open_audit_store(SqliteLocation(tmp_path / "audit.db")), NOOP
        )

    return factory


def slow_app(tmp_path: Path, delay_s: float = 30.0) -> DiagnoseApp:
    """The console on a run whose every tool call takes `delay_s`: long enough to act during a run."""
    adapter = RecordingAdapter(delay_s=delay_s)
    return make_app(tmp_path, "evidence-backed-diagnosis", env_factory=slow_environment(tmp_path, adapter))


async def a_slow_run(pilot: Pilot[Any]) -> None:
    """ctrl+r, then wait until the first tool call is running (on a `slow_app`, it stays running)."""
    await engine_ready(pilot)
    await pilot.press("ctrl+r")
    investigate = cast(DiagnoseApp, pilot.app).investigate
    await wait_until(lambda: "call-1" in investigate.state.calls, pilot, what="the first call")


def audit_app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, recorded_runs: Any) -> DiagnoseApp:
    """An app on a filled audit, named relatively (the screen shows the file as it was given)."""
    fill_audit(tmp_path / "audit.db", recorded_runs, runs=6)
    monkeypatch.chdir(tmp_path)
    return make_app(tmp_path, audit_db=Path("audit.db"))


async def audit_loaded(pilot: Pilot[Any]) -> None:
    """Open the audit screen (f3) and wait until every list shows its first page."""
    await engine_ready(pilot)
    await pilot.press("f3")
    tables = list(pilot.app.screen.query(PagedTable))
    await wait_until(lambda: all(t.row_count and not t.loading_page for t in tables), pilot, what="pages")
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


async def engine_ready(pilot: Pilot[Any]) -> None:
    """Wait until the environment is open (the engine loads in a worker after the first frame)."""
    await settled(pilot)
    status = cast(DiagnoseApp, pilot.app).engine_status
    assert status.state == "ready", status


async def settled(pilot: Pilot[Any], timeout_s: float = 30.0) -> None:
    """Wait for the engine (re)load to end, whatever its result (it starts after the first refresh)."""
    await pilot.pause()
    app = cast(DiagnoseApp, pilot.app)

    def loaded() -> bool:
        return app.engine_status.state != "loading"

    await waiting.wait_until(loaded, "the engine to load", timeout_s=timeout_s, pause=pilot.pause)
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


async def run_to_end(pilot: Pilot[Any], *keys: str, timeout_s: float = 60.0) -> None:
    """Press ctrl+r (after optional keys) and wait until that run has ended and its last batch is drawn.

    It waits on the screen's own count of ended runs, not on "the app looks idle": on a loaded machine
    an idle heuristic can return before the submit has even started the worker."""
    await engine_ready(pilot)
    for key in keys:
        await pilot.press(key)
    screen = cast(DiagnoseApp, pilot.app).investigate
    ended = screen.runs_ended
    await pilot.press("ctrl+r")
    await wait_until(lambda: screen.runs_ended > ended, pilot, timeout_s, "the run to end")
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


async def wait_until(
    condition: Callable[[], bool], pilot: Pilot[Any], timeout_s: float = 30.0, what: str = "a condition"
) -> None:
    """Poll `condition` between pauses until it holds; fail loudly (not hang) after `timeout_s`."""
    await waiting.wait_until(condition, what, timeout_s=timeout_s, pause=pilot.pause)
    await pilot.pause()


def plain(renderable: Any, width: int = 110) -> str:
    """What a renderable shows, as plain text (for asserting on widget content)."""
    console = Console(width=width, file=io.StringIO(), record=True, color_system=None)
    console.print(renderable)
    return console.export_text()


def timeline_labels(app: DiagnoseApp) -> list[str]:
    """Every timeline row's text, depth-first, as the operator reads it."""
    tree = app.investigate.run_view.timeline
    labels: list[str] = []

    def walk(node: Any) -> None:
        for child in node.children:
            labels.append(" ".join(str(child.label.plain).split()))
            walk(child)

    walk(tree.root)
    return labels


def has_row(labels: list[str], *parts: str) -> bool:
    return any(all(part in label for part in parts) for label in labels)


def result_text(app: DiagnoseApp) -> str:
    """Everything the result panel shows, as one line of plain text."""
    view = app.investigate.query_one(ResultView)
    parts = [
        plain(view.query_one(f"#{name}", Static).content) for name in ("result-banner", "result-summary")
    ]
    options = view.query_one(OptionList)
    parts += [plain(options.get_option_at_index(i).prompt) for i in range(options.option_count)]
    parts.append(plain(view.query_one("#result-sections", Static).content))
    return " ".join(" ".join(parts).split())


def painted_text(app: DiagnoseApp) -> str:
    """Every line the compositor paints for the current screen, as plain text (what the terminal shows)."""
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


def fail_reloads(app: DiagnoseApp, message: str) -> None:
    """The engine opens at start-up, and every later (re)open fails with `message`: a scenario picked
    later whose audit or sources went away. (A failed start-up blocks the console instead.)"""
    opened: list[str | None] = []

    def factory(scenario: str | None) -> Any:
        opened.append(scenario)
        if len(opened) > 1:
            from console.errors import SetupError

            raise SetupError(message)
        return app._open_environment(scenario)

    app.env_factory = factory


LAST_MISSING = "the last missing item: the IdP's own logs for 02:00-03:00 UTC"


def long_draft_scenario(folder: Path) -> Path:
    """A scenario whose one round is a long no-conclusion Draft: its carried turn (the follow-up
    preview) is many lines at 80 columns, and its last words are `LAST_MISSING`."""
    draft = {
        "conclusion": None,
        "analysis": [
            {
                "kind": "NEGATIVE_OBSERVATION",
                "statement": "No evidence was gathered: the query names no time window the tools can search.",
                "scope": "the query as given",
                "evidence": "NO_EVIDENCE",
            }
        ],
        "action_plan": ["Ask the reporter for the exact time window and a trace ID."],
        "recommendations": [],
        "limitations": {
            # As many entries of as many characters as a Draft may hold (agent.draft.rules at the
            # default 16 KiB: four entries of at most 100 characters a list).
            "checked_scope": [
                f"scope item {i}: nothing was searched for this part of the query, as no window was named"
                for i in range(4)
            ],
            "missing_info": [
                f"missing item {i}: a detail the reporter did not give, needed to bound any tool call"
                for i in range(3)
            ]
            + [LAST_MISSING],
        },
    }
    scenario = {
        "name": "long-draft",
        "title": "A long no-conclusion Draft",
        "description": "Its carried turn needs many lines.",
        "query": "SSO logins fail for ent-40215, please investigate.",
        "rounds": [{"text": json.dumps(draft, ensure_ascii=False)}],
    }
    path = folder / "long-draft.json"
    path.write_text(json.dumps(scenario, ensure_ascii=False), encoding="utf-8")
    return path
