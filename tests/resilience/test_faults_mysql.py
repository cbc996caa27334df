"""MariaDB going away under `query_mysql`: stopped before a query, stopped during one, restarted between runs.

These tests stop the local server themselves and always restart it in `finally` (and wait for the port);
the suite's conftest checks once more at the end of the session. A lost database is one typed ERROR
observation for that call; the run still reaches its Draft and the audit is closed.
"""

from __future__ import annotations

import asyncio
import secrets
from pathlib import Path
from typing import Any

import pytest

from agent.contracts import ExecutionResult
from console.wiring import RunEnvironment, open_run_environment
from tests.support.audit_reader import AuditReader
from tests.support.mysql import MysqlTestEnv, running_with_marker, wait_until
from tests.support.resilience import (
    QUERY,
    assert_audit_consistent,
    mariadb_stopped,
    one_call_then_draft,
    run_cli,
    start_mariadb,
    stop_mariadb,
    tool_call,
    write_config,
    write_scenario,
)
from tools.definitions import ToolName
from tools.mysql.adapter import MysqlAdapter

pytestmark = [pytest.mark.mysql, pytest.mark.usefixtures("mariadb_left_running")]

COUNT_SQL = "SELECT status, COUNT(*) AS n FROM orders GROUP BY status"


def _slow_join(marker: str) -> str:
    return (
        f"SELECT COUNT(*) AS {marker} FROM numbers a JOIN numbers b ON a.n <> b.n JOIN numbers c ON c.n < a.n"
    )


def _files(tmp_path: Path, env: MysqlTestEnv, sql: str) -> tuple[Path, Path]:
    config = write_config(
        tmp_path / "config.toml", {"mysql": {"dsn": env.dsn(env.shop), "statement_timeout_ms": 30_000}}
    )
    scenario = write_scenario(
        tmp_path, one_call_then_draft(tool_call("call-1", ToolName.QUERY_MYSQL, {"sql": sql}))
    )
    return config, scenario


def _adapter_pool(env: RunEnvironment) -> dict[str, int]:
    adapter = env.boundary._adapters[ToolName.QUERY_MYSQL]
    assert isinstance(adapter, MysqlAdapter)
    return adapter.pool_stats()


def test_mariadb_stopped_before_the_query(
    mysql_env: MysqlTestEnv, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config, scenario = _files(tmp_path, mysql_env, COUNT_SQL)
    audit = tmp_path / "audit.db"
    with mariadb_stopped():
        run = run_cli(
            capsys, "run", "--scenario", scenario, "--config", config, "--json", "--audit-db", audit
        )
    result = run.result
    assert (run.code, result["outcome"], result["stop_reason"]) == (0, "DRAFT", "COMPLETED")
    assert_audit_consistent(audit, [result["run_id"]])
    (invocation,) = AuditReader(audit).invocations(result["run_id"])
    assert (invocation["status"], invocation["error_code"]) == ("ERROR", "UNAVAILABLE")


async def test_mariadb_stopped_during_the_query(mysql_env: MysqlTestEnv, tmp_path: Path) -> None:
    marker = f"dc_gone_{secrets.token_hex(4)}"
    config, scenario = _files(tmp_path, mysql_env, _slow_join(marker))
    audit = tmp_path / "audit.db"
    env = open_run_environment(config=config, scenario=str(scenario), audit_db=audit)
    events: list[Any] = []
    task = asyncio.create_task(env.use_case(sinks=[events.append]).execute(QUERY))
    try:

        async def running() -> bool:
            return bool(await running_with_marker(mysql_env, marker))

        assert await wait_until(running, timeout_s=10)
        await asyncio.to_thread(stop_mariadb)
        async with asyncio.timeout(30):
            result: ExecutionResult = await task
    finally:
        if not task.done():
            task.cancel()
        await asyncio.to_thread(start_mariadb)
        await env.aclose()
    assert (result.outcome.value, result.stop_reason.value) == ("DRAFT", "COMPLETED")
    assert_audit_consistent(audit, [result.run_id])
    (invocation,) = AuditReader(audit).invocations(result.run_id)
    assert (invocation["status"], invocation["error_code"]) == ("ERROR", "UNAVAILABLE")
    assert [e["type"] for e in events][-1] == "run_finished"


async def _three_runs_around_a_restart(
    mysql_env: MysqlTestEnv, tmp_path: Path
) -> tuple[list[ExecutionResult], list[dict[str, int]], Path]:
    """Run, restart MariaDB, run, run: all on one RunEnvironment, as the console keeps one per session."""
    config, scenario = _files(tmp_path, mysql_env, COUNT_SQL)
    audit = tmp_path / "audit.db"
    env = open_run_environment(config=config, scenario=str(scenario), audit_db=audit)
    results: list[ExecutionResult] = []
    pools: list[dict[str, int]] = []
    try:
        results.append(await env.use_case().execute(QUERY))
        pools.append(_adapter_pool(env))
        try:
            await asyncio.to_thread(stop_mariadb)
        finally:
            await asyncio.to_thread(start_mariadb)
        for _ in range(2):
            results.append(await env.use_case().execute(QUERY))
            pools.append(_adapter_pool(env))
    finally:
        await env.aclose()
    assert_audit_consistent(audit, [r.run_id for r in results])
    return results, pools, audit


def _statuses(audit: Path, results: list[ExecutionResult]) -> list[tuple[str, str | None]]:
    return [
        (row["status"], row["error_code"])
        for result in results
        for row in AuditReader(audit).invocations(result.run_id)
    ]


async def test_mariadb_restarted_between_runs_the_pool_recovers(
    mysql_env: MysqlTestEnv, tmp_path: Path
) -> None:
    results, pools, audit = await _three_runs_around_a_restart(mysql_env, tmp_path)
    assert [r.outcome.value for r in results] == ["DRAFT"] * 3
    statuses = _statuses(audit, results)
    assert statuses[0] == ("FOUND", None)
    assert statuses[1] == ("FOUND", None)  # the idle connection the server closed is not handed out
    assert statuses[2] == ("FOUND", None)
    for pool in pools:
        # The dead connection was dropped, not kept.
        assert pool["in_use"] == 0, pool
        assert pool["size"] <= 1, pool


async def test_the_first_run_after_a_mariadb_restart_finds_its_rows(
    mysql_env: MysqlTestEnv, tmp_path: Path
) -> None:
    results, _, audit = await _three_runs_around_a_restart(mysql_env, tmp_path)
    assert _statuses(audit, results)[1] == ("FOUND", None)


def test_mariadb_restart_helpers_leave_it_running(mysql_env: MysqlTestEnv) -> None:
    """The helpers' promise, checked on its own: after `mariadb_stopped` the server answers again."""
    with mariadb_stopped():
        pass
    assert mysql_env.admin("SELECT 1") == [(1,)]
