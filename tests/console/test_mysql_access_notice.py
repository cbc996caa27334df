"""At start the console says which MySQL diagnostic views its account can read (docs/query-mysql.md,
"The monitoring account"): a missing grant is a message the operator sees, not a silent EMPTY in the
middle of an incident. The question runs after the engine is ready, beside the console, and is logged too."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from tests.support.console import SIZE, engine_ready, make_app, wait_until
from tests.support.mysql import MysqlTestEnv, closed_port
from tests.support.resilience import write_config

TITLE = "MySQL diagnostics"


async def notices(tmp_path: Path, dsn: str) -> list[tuple[str, str, str]]:
    config = write_config(tmp_path / "diagnose.toml", {"mysql": {"dsn": dsn}})
    app = make_app(tmp_path, "unknown-tool", config=config)
    async with app.run_test(size=SIZE) as pilot:
        await engine_ready(pilot)

        def said() -> list[tuple[str, str, str]]:
            return [(n.title, str(n.severity), n.message) for n in app._notifications if n.title == TITLE]

        # The question runs in its own worker after the engine is ready.
        await wait_until(lambda: bool(said()), pilot, what="the MySQL diagnostics notice")
        return said()


@pytest.mark.mysql
async def test_the_console_names_the_grants_a_business_account_lacks(
    tmp_path: Path, mysql_env: MysqlTestEnv, caplog: pytest.LogCaptureFixture
) -> None:
    user = mysql_env.create_user("", [f"GRANT SELECT ON `{mysql_env.shop}`.* TO {{user}}"])
    with caplog.at_level(logging.INFO):
        said = await notices(tmp_path, mysql_env.dsn(mysql_env.shop, user=user))
    line = (
        "MySQL diagnostics: cannot read other sessions and InnoDB transactions and locks (needs PROCESS), "
        "performance_schema (needs SELECT on performance_schema.*), sys (needs SELECT, EXECUTE on sys.* "
        "(with PROCESS)), replication status (needs SLAVE MONITOR), binary log status (needs BINLOG "
        "MONITOR), the slow query log (needs SELECT on mysql.slow_log)"
    )
    assert said == [(TITLE, "warning", line)]
    assert line in caplog.messages


async def test_a_server_that_cannot_be_reached_is_said_once_and_the_console_runs_on(tmp_path: Path) -> None:
    said = await notices(tmp_path, f"mysql://nobody@127.0.0.1:{closed_port()}/shop")
    assert said == [(TITLE, "warning", "MySQL diagnostics: the server could not be asked (UNAVAILABLE)")]


async def test_without_mysql_configured_nothing_is_said(tmp_path: Path) -> None:
    app = make_app(tmp_path, "unknown-tool")
    async with app.run_test(size=SIZE) as pilot:
        await engine_ready(pilot)
        await pilot.pause(0.2)
        assert [n for n in app._notifications if n.title == TITLE] == []
