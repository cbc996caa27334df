"""The audit screen: keyset pages loaded as the cursor nears the end, filters, search, and replays
drawn by the same widgets (and the same reducer) as a live run."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from textual.widgets import Input, Select

from audit.browse import AuditBrowser
from audit.factory import open_audit_store
from audit.location import SqliteLocation
from audit.replay import timeline_events
from console.run_state import RunState
from console.screens.audit import PAGE_SIZE, AuditScreen, PagedTable
from console.screens.replay import ReplayScreen
from console.widgets.run_view import RunView
from console.widgets.status_bar import StatusBar
from tests.support.console import SIZE, engine_ready, make_app
from tests.support.recorded import T0, fill_audit, pinned


async def until(pilot: Any, predicate: Any, timeout_s: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    await pilot.pause()
    while not predicate():
        assert loop.time() < deadline, "timed out"
        await pilot.pause(0.02)
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


def loaded(table: PagedTable[Any]) -> bool:
    return table.row_count > 0 and not table.loading_page


async def test_runs_are_keyset_paged_as_the_cursor_nears_the_end(tmp_path: Path, recorded_runs: Any) -> None:
    fill_audit(tmp_path / "audit.db", recorded_runs, runs=60)
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await engine_ready(pilot)
        await pilot.press("f3")
        screen = app.screen
        assert isinstance(screen, AuditScreen)
        runs = screen.query_one("#runs", PagedTable)
        await until(pilot, lambda: loaded(runs))
        # Never everything at once.
        assert runs.row_count == PAGE_SIZE
        assert runs.next_cursor is not None
        assert runs.keys[0] == "run-0060"  # newest first

        runs.move_cursor(row=PAGE_SIZE - 5)
        await until(pilot, lambda: runs.row_count == 60)
        assert runs.next_cursor is None
        assert len(set(runs.keys)) == 60


async def test_invocation_filters_and_text_search(tmp_path: Path, recorded_runs: Any) -> None:
    fill_audit(tmp_path / "audit.db", recorded_runs, runs=10)
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await engine_ready(pilot)
        await pilot.press("f3")
        screen = app.screen
        await pilot.press("ctrl+o")
        table = screen.query_one("#invocations", PagedTable)
        await until(pilot, lambda: loaded(table))
        with open_audit_store(SqliteLocation(tmp_path / "audit.db")) as store:
            total = AuditBrowser(store).count_invocations()
        assert table.row_count == total

        screen.query_one("#inv-tool", Select).value = "query_mysql"
        await until(pilot, lambda: loaded(table) and table.row_count < total)
        assert {str(table.get_row_at(i)[3]) for i in range(table.row_count)} == {"query_mysql"}
        assert {str(table.get_row_at(i)[5]) for i in range(table.row_count)} == {"UNAVAILABLE"}

        screen.query_one("#inv-tool", Select).clear()
        await until(pilot, lambda: loaded(table) and table.row_count == total)
        screen.query_one("#inv-text", Input).value = "HikariPool-1"
        await until(pilot, lambda: loaded(table) and table.row_count < total)
        assert table.row_count > 0


async def test_enter_replays_a_run_in_the_run_widgets(tmp_path: Path, recorded_runs: Any) -> None:
    fill_audit(tmp_path / "audit.db", recorded_runs, runs=1)  # evidence-backed-diagnosis
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await engine_ready(pilot)
        await pilot.press("f3")
        runs = app.screen.query_one("#runs", PagedTable)
        await until(pilot, lambda: loaded(runs))
        runs.focus()
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, ReplayScreen))
        view = app.screen.query_one(RunView)
        await until(pilot, lambda: view.state.result is not None)
        state = view.state
        assert state.outcome == "DRAFT"
        assert list(state.calls) == ["call-1", "call-2", "call-3"]
        # The audit (v4) recorded which model ran and within which limits: the replay says so.
        status = app.screen.query_one(StatusBar)
        assert status.model == state.model == "scripted: evidence-backed-diagnosis"
        assert "limits: 8 model calls, 64000 tokens, 300 s" in status.activity
        assert state.budget is not None
        assert state.budget["model_calls"] == {"used": 4, "limit": 8}
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, AuditScreen)


def test_a_replayed_run_matches_the_live_run_except_what_the_audit_does_not_keep(
    tmp_path: Path, recorded_runs: Any
) -> None:
    for name in sorted(recorded_runs):
        path = tmp_path / f"{name}.db"
        fill_audit(path, {name: recorded_runs[name]}, runs=1)
        live = RunState()
        live.apply_all(pinned(recorded_runs[name], "run-0001", "session-audit", T0))
        with open_audit_store(SqliteLocation(path)) as store:
            timeline = AuditBrowser(store).timeline("run-0001")
        assert timeline is not None
        replay = RunState()
        replay.apply_all(timeline_events(timeline))

        assert replay.result == live.result, name
        assert replay.model == live.model, name  # None only for a run rejected before it started
        for gauge in ("model_calls", "tokens", "run_bytes") if live.model is not None else ():
            assert replay.budget is not None
            assert live.budget is not None
            assert replay.budget[gauge]["limit"] == live.budget[gauge]["limit"] is not None, name
        assert [e.kind for e in replay.entries] == [e.kind for e in live.entries], name
        assert replay.rounds.keys() == live.rounds.keys(), name
        for number, row in live.rounds.items():
            assert (replay.rounds[number].tool_call_ids, replay.rounds[number].has_text) == (
                row.tool_call_ids,
                row.has_text,
            ), name
        for tool_call_id, call in live.calls.items():
            again = replay.calls[tool_call_id]
            assert (again.status, again.error_code, again.evaluation, again.input, again.projection) == (
                call.status,
                call.error_code,
                call.evaluation,
                call.input,
                call.projection,
            ), (name, tool_call_id)
            assert again.controls == [c for c in call.controls if c != "INVALID_INPUT"], (name, tool_call_id)
            assert not again.has_observation  # the audit keeps the projection, not the observation
        assert replay.protocol is None  # counters are not audited: the panel says so
