"""The audit screen at any width: its file named, columns sized to the window, clipped cells readable
whole, and an empty audit explained (issue 12, items 2 and 13)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from console.app import DiagnoseApp
from console.screens.audit import PagedTable
from tests.support.console import engine_ready, make_app, painted_text, wait_until
from tests.support.recorded import fill_audit


async def open_audit(pilot: Any) -> None:
    await engine_ready(pilot)
    await pilot.press("f3")
    await wait_until(
        lambda: all(not t.loading_page and t.generation for t in pilot.app.screen.query(PagedTable)),
        pilot,
        what="the audit tables' first pages",
    )
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


async def test_an_empty_audit_names_its_file_and_says_what_fills_it(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await open_audit(pilot)
        screen = painted_text(app)
        assert f"audit file {tmp_path / 'audit.db'}" in screen
        assert "no runs in this audit file yet: every run (ctrl+r) is recorded here" in screen


async def test_columns_fit_the_window_and_the_highlighted_row_is_shown_whole(
    tmp_path: Path, recorded_runs: dict[str, Any]
) -> None:
    fill_audit(tmp_path / "audit.db", recorded_runs, runs=5)
    app: DiagnoseApp = make_app(tmp_path)
    async with app.run_test(size=(120, 30)) as pilot:
        await open_audit(pilot)
        table = app.screen.query_one("#runs", PagedTable)
        assert table.flexible is not None
        narrow = table.columns[table.flexible].width
        await pilot.resize_terminal(200, 30)
        await pilot.pause()
        assert table.columns[table.flexible].width >= narrow + 70  # the query column takes the room

        record = table.records[table.cursor_row]
        query = record["query"]
        assert len(query) > narrow
        line = " ".join(painted_text(app).split())
        assert " ".join(f"query {query}".split()) in line  # the clipped query, whole, under the table
        assert f"stop reason {record['stop_reason']}" in line
