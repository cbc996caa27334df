"""The console's audit screen and replay on a team audit (MariaDB), with the same rows as the file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from audit.copy import copy_audit
from audit.factory import open_audit_store
from audit.location import MysqlLocation, SqliteLocation
from console.app import DiagnoseApp
from console.screens.audit import PagedTable
from tests.console.test_audit_layout import open_audit
from tests.support.audit_backends import AuditTarget, audit_account
from tests.support.audit_reader import AuditReader
from tests.support.console import make_app, painted_text, run_to_end
from tests.support.recorded import fill_audit

PASSWORD = "Console-Audit-Pw-9d2b"
# The built-in whose run ends with no evidence (conclusion null), copied with the password in its query.
BUILTIN = Path(__file__).resolve().parents[2] / "agent" / "data" / "scenarios" / "tool-finds-no-evidence.yaml"


async def test_the_audit_screen_lists_and_replays_the_team_audits_runs(
    tmp_path: Path, recorded_runs: dict[str, Any], mariadb_audit: AuditTarget
) -> None:
    laptop = tmp_path / "laptop.db"
    fill_audit(laptop, recorded_runs, runs=4)
    with open_audit_store(SqliteLocation(laptop)) as source, mariadb_audit.open() as team:
        copy_audit(source, team)
        expected = [run["run_id"] for run in AuditReader(source).runs()]
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


async def test_a_run_in_the_console_is_recorded_on_the_server_and_listed_on_the_audit_screen(
    tmp_path: Path, mariadb_audit: AuditTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ctrl+r with the audit on MariaDB, then f3: the run is there, and its replay is its timeline. The
    audit password, pasted into the scenario's query, shows on neither screen."""
    mariadb_audit.open().close()  # the schema in place; the console then uses its own account
    with audit_account(mariadb_audit, PASSWORD) as user:
        monkeypatch.setenv("TEAM_AUDIT_PASSWORD", PASSWORD)
        assert isinstance(mariadb_audit.location, MysqlLocation)
        where = mariadb_audit.location
        url = f"mysql://{user}@{where.host}:{where.port}/{where.database}"
        config = tmp_path / "team.toml"
        config.write_text(f'[audit]\nurl = "{url}"\npassword_env = "TEAM_AUDIT_PASSWORD"\n', encoding="utf-8")
        scenario = tmp_path / "pasted.yaml"
        scenario.write_text(
            BUILTIN.read_text(encoding="utf-8").replace("请排查 account-service", f"值班备注 {PASSWORD}"),
            encoding="utf-8",
        )
        app: DiagnoseApp = make_app(tmp_path, str(scenario), audit_db=None, config=config)
        async with app.run_test(size=(140, 36)) as pilot:
            await run_to_end(pilot)
            await open_audit(pilot)
            audit_screen = painted_text(app)
            table = app.screen.query_one("#runs", PagedTable)
            assert [(r["run_id"], r["outcome"]) for r in table.records] == [("run-0001", "DRAFT")]
            await pilot.press("enter")
            await pilot.app.workers.wait_for_complete()
            await pilot.pause()
            assert type(app.screen).__name__ == "ReplayScreen"
            replay = painted_text(app)
    assert f"audit {url}" in audit_screen
    assert "run run-0001" in replay
    assert "call-1" in replay
    assert "call-2" in replay
    assert "值班备注 [REDACTED]" in replay
    for screen in (audit_screen, replay):
        assert PASSWORD not in screen
