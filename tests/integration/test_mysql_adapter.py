"""query_mysql against the real local MariaDB: connection hardening, read-only execution, time limits,
cancellation that leaves nothing running, error mapping without server text, and the demo fixture."""

from __future__ import annotations

import asyncio
import dataclasses
import re
import secrets
from typing import Any

import pytest
from pymysql.constants import CLIENT
from pymysql.err import MySQLError

from tests.support.mysql import (
    MYSQL_HOST,
    MysqlTestEnv,
    closed_port,
    mysql_request,
    running_with_marker,
    thread_exists,
    wait_until,
)
from tools.adapter import ToolError
from tools.mysql.adapter import (
    MysqlAdapter,
    bundled_demo_sql_path,
    load_demo_fixture,
    open_connection,
    parse_dsn,
    split_sql_script,
)
from tools.mysql.guard import guard_sql

pytestmark = pytest.mark.mysql


def slow_join(marker: str) -> str:
    """Minutes of work on generated rows, using only allowed functions (SLEEP is rejected by the guard)."""
    return (
        f"SELECT COUNT(*) AS {marker} FROM numbers a JOIN numbers b ON a.n <> b.n JOIN numbers c ON c.n < a.n"
    )


def new_marker() -> str:
    return f"dc_slow_{secrets.token_hex(4)}"


def smuggle(monkeypatch: pytest.MonkeyPatch, sql: str) -> None:
    """Stand-in for a guard bug: whatever is asked, the adapter executes `sql`."""

    def broken_guard(_: str, **kwargs: Any) -> Any:
        return dataclasses.replace(guard_sql("SELECT 1", **kwargs), sql=sql, columns_sql=None)

    monkeypatch.setattr("tools.mysql.adapter.guard_sql", broken_guard)


def test_parse_dsn_keeps_the_password_out_of_sight() -> None:
    target = parse_dsn("mysql://diag%40ro:s3cret@db.internal:3307/shop")
    assert (target.user, target.host, target.port, target.database) == (
        "diag@ro",
        "db.internal",
        3307,
        "shop",
    )
    assert target.password == "s3cret"
    assert "s3cret" not in repr(target)
    assert parse_dsn("mysql://diag@db.internal").port == 3306
    assert parse_dsn("mysql://diag@db.internal").database is None
    shape = "DSN must look like mysql://user@host:3306/database"
    for bad, reason in (
        ("postgres://u@h/db", shape),
        ("mysql://h/db", shape),
        ("mysql://u:pw@h/db?ssl=0", "DSN must not carry query parameters or a fragment"),
        ("mysql://u@h/db;drop", "DSN database must be a plain identifier"),
        ("nonsense", shape),
    ):
        with pytest.raises(ValueError, match=re.escape(reason)) as err:
            parse_dsn(bad)
        assert "pw" not in str(err.value)


async def test_connections_cannot_send_two_statements_or_read_client_files(mysql_env: MysqlTestEnv) -> None:
    conn = await open_connection(parse_dsn(mysql_env.dsn()), None, 3.0)
    try:
        assert conn.client_flag & CLIENT.MULTI_STATEMENTS == 0
        assert conn.client_flag & CLIENT.LOCAL_FILES == 0
        async with conn.cursor() as cur:
            with pytest.raises(MySQLError) as err:
                await cur.execute("SELECT 1; SELECT 2")
            assert err.value.args[0] == 1064  # the server parsed one statement and choked on the second
            await cur.execute("SELECT 3")
            assert await cur.fetchall() == ((3,),)
            await cur.execute(f"CREATE TABLE `{mysql_env.shop}`.infile_probe (line TEXT)")
            try:
                with pytest.raises(MySQLError) as err:
                    await cur.execute(
                        f"LOAD DATA LOCAL INFILE '/etc/hostname' INTO TABLE `{mysql_env.shop}`.infile_probe"
                    )
                assert err.value.args[0] in (4166, 1148)  # local infile disabled (MariaDB; MySQL says 1148)
                await cur.execute(f"SELECT COUNT(*) FROM `{mysql_env.shop}`.infile_probe")
                assert await cur.fetchall() == ((0,),)
            finally:
                await cur.execute(f"DROP TABLE `{mysql_env.shop}`.infile_probe")
    finally:
        conn.close()


@pytest.mark.parametrize(
    "write",
    [
        "UPDATE canary SET secret = 'pwned'",
        "DELETE FROM canary",
        "INSERT INTO canary (id, secret) VALUES (99, 'pwned')",
        "DROP TABLE canary",
        "CREATE TABLE pwned (i INT)",
        "TRUNCATE TABLE canary",
    ],
)
async def test_a_write_past_a_broken_guard_is_refused_by_the_server(
    mysql_env: MysqlTestEnv, monkeypatch: pytest.MonkeyPatch, write: str
) -> None:
    before = mysql_env.fingerprint()
    smuggle(monkeypatch, write)
    adapter = mysql_env.adapter()
    try:
        with pytest.raises(ToolError) as err:
            await adapter.execute(mysql_request("SELECT 1"))
        assert (err.value.code, err.value.reason) == ("POLICY_REJECTED", "READ_ONLY")
        assert mysql_env.fingerprint() == before
        monkeypatch.undo()
        # The refusal was a server error on an intact connection: rolled back and reused.
        result = await adapter.execute(mysql_request("SELECT COUNT(*) AS n FROM canary"))
        assert result.data["rows"] == [[2]]
        assert adapter.pool_stats() == {"size": 1, "free": 1, "in_use": 0, "max": 4, "opened": 1}
    finally:
        await adapter.aclose()


async def test_a_heavy_join_is_stopped_by_the_statement_time_limit(mysql_env: MysqlTestEnv) -> None:
    marker = new_marker()
    adapter = mysql_env.adapter(statement_timeout_ms=500)
    try:
        with pytest.raises(ToolError) as err:
            await adapter.execute(mysql_request(slow_join(marker)))
        assert (err.value.code, err.value.reason) == ("TIMEOUT", None)
        assert await running_with_marker(mysql_env, marker) == []
        # The server ended the statement itself (the client's backstop kills and drops the connection):
        # the connection is intact and goes back to the pool.
        assert adapter.pool_stats() == {"size": 1, "free": 1, "in_use": 0, "max": 4, "opened": 1}
    finally:
        await adapter.aclose()


async def test_session_settings_are_applied_on_every_checkout(
    mysql_env: MysqlTestEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Even if a statement lifted the time limit, the next checkout of that connection restores it."""
    adapter = mysql_env.adapter(statement_timeout_ms=500, pool_size=1)
    try:
        smuggle(monkeypatch, "SET SESSION max_statement_time = 0")
        assert (await adapter.execute(mysql_request("SELECT 1"))).status == "EMPTY"
        monkeypatch.undo()
        with pytest.raises(ToolError) as err:
            await adapter.execute(mysql_request(slow_join(new_marker())))
        assert err.value.code == "TIMEOUT"
        # The server limit, not the client's backstop (which would have killed and dropped the connection).
        assert adapter.pool_stats() == {"size": 1, "free": 1, "in_use": 0, "max": 1, "opened": 1}
    finally:
        await adapter.aclose()


async def test_without_a_server_limit_the_client_kills_the_query(
    mysql_env: MysqlTestEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The backstop for statements the server limit does not cover (MySQL applies it to SELECT only)."""
    marker = new_marker()
    adapter = mysql_env.adapter(statement_timeout_ms=300)
    monkeypatch.setattr(adapter, "_time_limit_sql", lambda conn: "SET SESSION max_statement_time = 0")
    try:
        with pytest.raises(ToolError) as err:
            await adapter.execute(mysql_request(slow_join(marker)))
        assert err.value.code == "TIMEOUT"  # with the server limit off, only the client can have stopped it

        async def nothing_running() -> bool:
            return await running_with_marker(mysql_env, marker) == []

        assert await wait_until(nothing_running)
        assert adapter.pool_stats() == {"size": 0, "free": 0, "in_use": 0, "max": 4, "opened": 1}
    finally:
        await adapter.aclose()


async def test_a_cancelled_run_leaves_no_query_running_and_the_pool_at_baseline(
    mysql_env: MysqlTestEnv,
) -> None:
    marker = new_marker()
    adapter = mysql_env.adapter(statement_timeout_ms=30_000)
    try:
        assert (await adapter.execute(mysql_request("SELECT 1 AS warm"))).status == "FOUND"
        baseline = adapter.pool_stats()
        assert baseline == {"size": 1, "free": 1, "in_use": 0, "max": 4, "opened": 1}

        task = asyncio.create_task(adapter.execute(mysql_request(slow_join(marker))))
        running: list[tuple[Any, ...]] = []

        async def started() -> bool:
            running[:] = await running_with_marker(mysql_env, marker)
            return bool(running)

        assert await wait_until(started)
        thread_id = running[0][0]
        await asyncio.sleep(0.3)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

        async def gone() -> bool:
            return await running_with_marker(mysql_env, marker) == [] and not await thread_exists(
                mysql_env, thread_id
            )

        assert await wait_until(gone), "the cancelled query or its connection is still on the server"
        assert adapter.pool_stats() == {"size": 0, "free": 0, "in_use": 0, "max": 4, "opened": 1}

        # The next run needs a new connection: the cancelled one was never handed back.
        assert (await adapter.execute(mysql_request("SELECT 1 AS again"))).status == "FOUND"
        assert adapter.pool_stats() == {**baseline, "opened": 2}
        assert not await thread_exists(mysql_env, thread_id)
    finally:
        await adapter.aclose()


async def test_a_server_that_is_down_is_unavailable(mysql_env: MysqlTestEnv) -> None:
    adapter = MysqlAdapter(
        mysql_env.dsn(mysql_env.shop, port=closed_port()),
        password=None,
        allowed_schemas=[mysql_env.shop],
        connect_timeout_s=2.0,
    )
    try:
        with pytest.raises(ToolError) as err:
            await adapter.execute(mysql_request("SELECT order_no FROM orders"))
        assert (err.value.code, err.value.reason) == ("UNAVAILABLE", None)
        assert adapter.pool_stats()["size"] == 0
    finally:
        await adapter.aclose()


async def test_access_denied_is_a_policy_rejection_without_server_text(mysql_env: MysqlTestEnv) -> None:
    password = secrets.token_hex(8)
    user = mysql_env.create_user(password, [f"GRANT SELECT ON `{mysql_env.shop}`.* TO {{user}}"])
    dsn = mysql_env.dsn(mysql_env.shop, user=user)
    adapter = MysqlAdapter(dsn, password=password, allowed_schemas=[mysql_env.shop, mysql_env.ops])
    wrong = MysqlAdapter(dsn, password="not-" + password, allowed_schemas=[mysql_env.shop])
    try:
        found = await adapter.execute(mysql_request("SELECT COUNT(*) AS n FROM canary"))
        assert found.data["rows"] == [[2]]
        for denied, sql in ((adapter, f"SELECT id FROM {mysql_env.ops}.canary"), (wrong, "SELECT 1")):
            with pytest.raises(ToolError) as err:
                await denied.execute(mysql_request(sql))
            assert (err.value.code, err.value.reason) == ("POLICY_REJECTED", "ACCESS_DENIED")
            text = f"{err.value} {err.value.args}".lower()
            server_words = ("command denied", "denied for", user.lower(), MYSQL_HOST)
            assert all(word not in text for word in server_words)
        # A server error leaves the connection intact: it is rolled back and kept.
        assert adapter.pool_stats()["free"] == 1
    finally:
        await adapter.aclose()
        await wrong.aclose()


async def test_without_allowed_schemas_only_the_dsn_database_is_readable(mysql_env: MysqlTestEnv) -> None:
    adapter = MysqlAdapter(mysql_env.dsn(mysql_env.shop), password=None, allowed_schemas=[])
    try:
        own = await adapter.execute(mysql_request("SELECT COUNT(*) AS n FROM canary"))
        assert own.data["rows"] == [[2]]
        with pytest.raises(ToolError) as err:
            await adapter.execute(mysql_request(f"SELECT secret FROM {mysql_env.ops}.canary"))
        assert (err.value.code, err.value.reason) == ("POLICY_REJECTED", "SCHEMA_NOT_ALLOWED")
    finally:
        await adapter.aclose()


async def test_unknown_table_is_a_backend_error_with_a_stable_hint(mysql_env: MysqlTestEnv) -> None:
    adapter = mysql_env.adapter()
    try:
        with pytest.raises(ToolError) as err:
            await adapter.execute(mysql_request("SELECT id FROM no_such_table"))
        assert (err.value.code, err.value.reason) == ("BACKEND_ERROR", "UNKNOWN_TABLE")
        assert "no_such_table" not in str(err.value)
    finally:
        await adapter.aclose()


async def test_the_demo_fixture_loads_and_answers_the_demo_question(mysql_env: MysqlTestEnv) -> None:
    demo = f"{mysql_env.prefix}_demo"
    mysql_env.extra_databases.append(demo)
    statements = split_sql_script(bundled_demo_sql_path().read_text(encoding="utf-8"))
    assert await load_demo_fixture(mysql_env.dsn(), None, demo) == len(statements)
    assert await load_demo_fixture(mysql_env.dsn(), None, demo) == len(statements)  # reloading replaces

    adapter = MysqlAdapter(mysql_env.dsn(demo), password=None, allowed_schemas=[demo])
    try:
        stuck = await adapter.execute(
            mysql_request(
                "SELECT o.order_no, o.status, p.last_error_code FROM orders o "
                "JOIN payments p ON p.order_id = o.id "
                "WHERE o.enterprise_id = 'ent-20931' AND o.status = 'PAYING' ORDER BY o.created_at"
            )
        )
        assert stuck.status == "FOUND"
        assert stuck.data["row_count"] == 22
        assert not stuck.data["truncated"]
        assert stuck.data["rows"][0][:2] == ["ord_930052524", "PAYING"]
        assert {row[2] for row in stuck.data["rows"]} <= {"LOCK_WAIT_TIMEOUT", "POOL_TIMEOUT"}

        by_enterprise = await adapter.execute(
            mysql_request(
                "SELECT enterprise_id, COUNT(*) AS paying_orders FROM orders WHERE status = 'PAYING' "
                "GROUP BY enterprise_id ORDER BY paying_orders DESC LIMIT 10"
            )
        )
        assert by_enterprise.data["rows"][0] == ["ent-20931", 22]

        deploy = await adapter.execute(
            mysql_request(
                "SELECT version, kind, status, started_at FROM deploys "
                "WHERE service = 'payment-service' AND started_at >= '2026-11-30' ORDER BY started_at"
            )
        )
        assert deploy.data["rows"] == [
            ["v2.14.0", "DEPLOY", "ROLLED_BACK", "2026-11-30T02:05:00"],
            ["v2.13.4", "ROLLBACK", "SUCCEEDED", "2026-11-30T02:52:00"],
        ]
    finally:
        await adapter.aclose()


@pytest.mark.parametrize(
    "database", ["mysql", "INFORMATION_SCHEMA", "sys", "performance_schema", "bad-name", ""]
)
async def test_the_demo_fixture_refuses_system_schemas_and_odd_names(database: str) -> None:
    with pytest.raises(ValueError, match="the demo fixture needs a plain, non-system database name"):
        await load_demo_fixture(f"mysql://root@{MYSQL_HOST}:{closed_port()}/x", None, database)
