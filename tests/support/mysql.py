"""The local MariaDB for integration tests: reachability, throwaway databases, server-side probes.

Each test module gets its own `dc_test_<hex>_shop` and `dc_test_<hex>_ops` databases rather than
`shop` / `ops`, which a developer's server may really hold and which concurrent runs would share.
Statements written for `shop` / `ops` (the SQL corpus) are rewritten to those names by `rewrite`, a
word-boundary substitution, so the guard still sees two allowed schemas and a default database.
Everything a module creates (databases, users) is dropped at teardown.

Setup uses blocking PyMySQL on purpose: it runs outside the tests' event loops. Async tests probe the
server through `asyncio.to_thread` so the adapter under test keeps running meanwhile.
"""

from __future__ import annotations

import asyncio
import os
import re
import secrets
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pymysql
import pytest

from tools.adapter import ToolRequest
from tools.definitions import ToolName
from tools.input_models import QueryMysqlInput
from tools.mysql.adapter import MysqlAdapter, bundled_demo_sql_path, split_sql_script

MYSQL_HOST = "127.0.0.1"
MYSQL_PORT = 3306
ROOT_USER = "root"
REQUIRE_ENV = "DIAGNOSE_TEST_REQUIRE_MYSQL"
CANARY_ROWS = ((1, "do-not-touch"), (2, "still-here"))


def root_connection(database: str | None = None, read_timeout: float = 30) -> pymysql.connections.Connection:
    return pymysql.connect(
        host=MYSQL_HOST,
        port=MYSQL_PORT,
        user=ROOT_USER,
        password="",
        database=database,
        connect_timeout=3,
        read_timeout=read_timeout,
        autocommit=True,
        charset="utf8mb4",
    )


def require_server() -> str:
    """The server's version, or skip (fail when the environment demands MariaDB, as CI does)."""
    try:
        with root_connection() as conn, conn.cursor() as cur:
            cur.execute("SELECT VERSION()")
            row = cur.fetchone()
            assert row is not None
            (version,) = row
    except (pymysql.err.MySQLError, OSError) as exc:
        reason = f"MariaDB not reachable on {MYSQL_HOST}:{MYSQL_PORT}: {exc}"
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    return str(version)


def closed_port() -> int:
    """A local port nobody listens on (bound and released): a server that is down."""
    with socket.socket() as sock:
        sock.bind((MYSQL_HOST, 0))
        return int(sock.getsockname()[1])


@dataclass
class MysqlTestEnv:
    prefix: str
    shop: str
    ops: str
    extra_databases: list[str] = field(default_factory=list)
    users: list[str] = field(default_factory=list)

    def dsn(self, database: str | None = None, *, user: str = ROOT_USER, port: int = MYSQL_PORT) -> str:
        path = "" if database is None else f"/{database}"
        return f"mysql://{user}@{MYSQL_HOST}:{port}{path}"

    def rewrite(self, sql: str) -> str:
        """Corpus statements name `shop` and `ops`; this module's databases are prefixed."""
        return re.sub(r"\b(shop|ops)\b", lambda m: f"{self.prefix}_{m.group(1)}", sql)

    def adapter(self, *, password: str | None = None, **options: Any) -> MysqlAdapter:
        options.setdefault("allowed_schemas", [self.shop, self.ops])
        return MysqlAdapter(options.pop("dsn", self.dsn(self.shop)), password=password, **options)

    def admin(self, sql: str, args: Sequence[Any] | None = None) -> list[tuple[Any, ...]]:
        with root_connection() as conn, conn.cursor() as cur:
            cur.execute(sql, args)
            return list(cur.fetchall())

    async def admin_async(self, sql: str, args: Sequence[Any] | None = None) -> list[tuple[Any, ...]]:
        return await asyncio.to_thread(self.admin, sql, args)

    def create_user(self, password: str, grants: Sequence[str]) -> str:
        user = f"{self.prefix}_u{len(self.users)}"
        self.users.append(user)
        self.admin("CREATE USER %s@'%%' IDENTIFIED BY %s", (user, password))
        for grant in grants:
            self.admin(grant.format(user=f"'{user}'@'%'"))
        return user

    def fingerprint(self) -> dict[str, Any]:
        """What any write, DDL, routine or global change reaching the server would alter."""
        schemas = (self.shop, self.ops)
        catalog = {
            "tables": ("tables", "table_schema", "table_name"),
            "routines": ("routines", "routine_schema", "routine_name"),
            "triggers": ("triggers", "trigger_schema", "trigger_name"),
            "events": ("events", "event_schema", "event_name"),
        }
        found: dict[str, Any] = {
            key: self.admin(
                f"SELECT {schema}, {name} FROM information_schema.{view} "
                f"WHERE {schema} IN (%s, %s) ORDER BY 1, 2",
                schemas,
            )
            for key, (view, schema, name) in catalog.items()
        }
        found["canary"] = [
            self.admin(f"SELECT id, secret FROM `{schema}`.canary ORDER BY id") for schema in schemas
        ]
        found["checksums"] = self.admin(f"CHECKSUM TABLE {self._all_tables()}")
        found["globals"] = self.admin(
            "SELECT @@global.read_only, @@global.general_log, @@global.max_connections, "
            "@@global.local_infile, @@global.sql_mode"
        )
        return found

    def _all_tables(self) -> str:
        rows = self.admin(
            "SELECT table_schema, table_name FROM information_schema.tables "
            "WHERE table_schema IN (%s, %s) AND table_type = 'BASE TABLE' ORDER BY 1, 2",
            (self.shop, self.ops),
        )
        return ", ".join(f"`{schema}`.`{table}`" for schema, table in rows)

    def server_files(self) -> set[str]:
        """Files in this module's database directories: where a relative INTO OUTFILE would land."""
        ((datadir,),) = self.admin("SELECT @@datadir")
        found: set[str] = set()
        for schema in (self.shop, self.ops):
            folder = Path(datadir) / schema
            if folder.is_dir():
                found.update(str(path) for path in folder.iterdir())
        return found


def create_env() -> MysqlTestEnv:
    prefix = f"dc_test_{secrets.token_hex(4)}"
    env = MysqlTestEnv(prefix=prefix, shop=f"{prefix}_shop", ops=f"{prefix}_ops")
    statements = split_sql_script(bundled_demo_sql_path().read_text(encoding="utf-8"))
    try:
        with root_connection() as conn, conn.cursor() as cur:
            for schema in (env.shop, env.ops):
                cur.execute(f"CREATE DATABASE `{schema}` CHARACTER SET utf8mb4")
                cur.execute(
                    f"CREATE TABLE `{schema}`.canary (id INT PRIMARY KEY, secret VARCHAR(64) NOT NULL)"
                )
                cur.executemany(f"INSERT INTO `{schema}`.canary (id, secret) VALUES (%s, %s)", CANARY_ROWS)
            conn.select_db(env.shop)
            for statement in statements:
                cur.execute(statement)
            cur.execute("CREATE TABLE numbers (n INT PRIMARY KEY)")
            # Recursive CTEs stop at 1000 iterations (max_recursive_iterations): double up from there.
            cur.execute(
                "INSERT INTO numbers (n) WITH RECURSIVE s (n) AS "
                "(SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < 1000) SELECT n FROM s"
            )
            cur.execute("INSERT INTO numbers (n) SELECT n + 1000 FROM numbers")
            cur.execute("CREATE TABLE artifacts (id INT PRIMARY KEY, digest VARBINARY(16), note TEXT)")
            cur.execute("INSERT INTO artifacts VALUES (1, UNHEX(MD5('x')), REPEAT('x', 5000))")
            # The corpus speaks of orders.total / note / customer_id and of ops.payments / ops.deploys.
            cur.execute(
                "ALTER TABLE orders ADD COLUMN total DECIMAL(12,2) AS (amount) VIRTUAL, "
                "ADD COLUMN note VARCHAR(200) NULL, ADD COLUMN customer_id BIGINT NULL"
            )
            cur.execute("UPDATE orders SET note = 'a;b', customer_id = id % 37 WHERE id % 10 = 0")
            cur.execute(f"CREATE TABLE `{env.ops}`.payments LIKE payments")
            cur.execute(f"INSERT INTO `{env.ops}`.payments SELECT * FROM payments")
            cur.execute(f"CREATE TABLE `{env.ops}`.deploys LIKE deploys")
            cur.execute(f"ALTER TABLE `{env.ops}`.deploys ADD COLUMN payload JSON NULL")
            cur.execute(
                f"INSERT INTO `{env.ops}`.deploys SELECT d.*, "
                "JSON_OBJECT('error', IF(d.status = 'ROLLED_BACK', 'lock wait timeout', NULL)) FROM deploys d"
            )
    except BaseException:
        drop_env(env)
        raise
    return env


def drop_env(env: MysqlTestEnv) -> None:
    with root_connection() as conn, conn.cursor() as cur:
        for schema in (env.shop, env.ops, *env.extra_databases):
            cur.execute(f"DROP DATABASE IF EXISTS `{schema}`")
        for user in env.users:
            cur.execute("DROP USER IF EXISTS %s@'%%'", (user,))


def mysql_request(sql: str, database: str | None = None) -> ToolRequest:
    """A query_mysql request; statements beyond the tool's input bounds skip validation so the guard
    itself is exercised (the boundary would answer INVALID_INPUT before the adapter)."""
    try:
        params = QueryMysqlInput(sql=sql, database=database)
    except ValueError:
        params = QueryMysqlInput.model_construct(sql=sql, database=database)
    return ToolRequest(
        run_id="run-1", session_id="s-1", tool_call_id="call-1", tool=ToolName.QUERY_MYSQL, input=params
    )


async def wait_until(check: Callable[[], Any], timeout_s: float = 2.0, interval_s: float = 0.05) -> bool:
    """Poll an async check until it is true or the time is up; returns the last answer."""
    deadline = time.monotonic() + timeout_s
    while True:
        if await check():
            return True
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(interval_s)


async def running_with_marker(env: MysqlTestEnv, marker: str) -> list[tuple[Any, ...]]:
    """Statements on the server whose text carries `marker` (the probe's own text spells it apart)."""
    return await env.admin_async(
        "SELECT id, command, state, info FROM information_schema.processlist "
        "WHERE id <> CONNECTION_ID() AND command = 'Query' AND info LIKE CONCAT('%%', %s, %s, '%%')",
        (marker[:4], marker[4:]),
    )


async def thread_exists(env: MysqlTestEnv, thread_id: int) -> bool:
    rows = await env.admin_async("SELECT 1 FROM information_schema.processlist WHERE id = %s", (thread_id,))
    return bool(rows)
