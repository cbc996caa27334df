"""The console's audit screen and replay on a team audit (MariaDB), with the same rows as the file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from audit.copy import copy_audit
from audit.store import AuditStore
from console.app import DiagnoseApp
from console.screens.audit import PagedTable
from tests.console.test_audit_layout import open_audit
from tests.support.audit_backends import AuditTarget
from tests.support.console import make_app, painted_text
from tests.support.recorded import fill_audit


async def test_the_audit_screen_lists_and_replays_the_team_audits_runs(
    tmp_path: Path, recorded_runs: dict[str, Any], mariadb_audit: AuditTarget
) -> None:
    laptop = tmp_path / "laptop.db"
    fill_audit(laptop, recorded_runs, runs=4)
    with AuditStore(laptop) as source, mariadb_audit.open() as team:
        copy_audit(source, team)
        expected = [run["run_id"] for run in source.list_runs()]
    config = tmp_path / "team.toml"
    config.write_text(f'[audit]\nurl = "{mariadb_audit.url}"\n', encoding="utf-8")

    app: DiagnoseApp = make_app(tmp_path, audit_db=None, config=config)
    async with app.run_test(size=(140, 36)) as pilot:
        await open_audit(pilot)
        assert f"audit {mariadb_audit.url}" in painted_text(app)
        table = app.screen.query_one("#runs", PagedTable)
        assert [record["run_id"] for record in table.records] == expected
        await pilot.press("enter")  # the highlighted run's timeline, replayed from the server's rows
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()
        assert type(app.screen).__name__ == "ReplayScreen"
        assert f"run {expected[0]}" in painted_text(app)
