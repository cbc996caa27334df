"""query_mysql against a configured MySQL / MariaDB: one guarded, read-only statement per call.

The SQL guard decides what may run; everything here assumes it can be wrong. Connections cannot send two
statements (aiomysql always sets the multi-statements flag, so connections are opened here with it
cleared) nor read client files (local infile off). Every statement runs with a server-side time limit in
a read-only session and a `START TRANSACTION READ ONLY` that is always rolled back. aiomysql has no read
timeout and leaves a cancelled query running on the server, so every await is bounded and a cancelled or
timed-out statement is killed from a second, short-lived connection (KILL QUERY, then KILL CONNECTION),
which then checks the process list: if our server thread is still there (a row's evaluation cannot be
interrupted), the invocation says so (`TIMEOUT` / `QUERY_STILL_RUNNING`, in the audit) and the log too.
The connection of a killed statement is never reused.

Only a bounded prefix of each value ever crosses the wire. A SELECT runs twice: first with LIMIT 0
(`columns_sql`: the server plans it but reads no row) to learn its result columns, then wrapped as
`WITH r(c0, c1, ...) AS (<statement>) SELECT ... FROM r` over its first `max_columns + 1` columns, each
in the form its type needs (decided once per column from the probe): a number or a time comes as it is
(its type bounds it); text as `IF(OCTET_LENGTH(c) > B, LEFT(c, n), c)`; anything else (binary data) as
the pair `IF(OCTET_LENGTH(c) > B, NULL, c), IF(OCTET_LENGTH(c) > B, LEFT(c, n), NULL)`. A value of at
most B bytes comes whole and keeps its type (a number stays a number), a longer one comes as its first
n characters. So one call holds at most (max_rows + 1) x (max_columns + 1) x B bytes of
values (101 x 31 x 804 B = 2.5 MB by default) whatever the data; without it, 100 rows of 3 MB cells
cost 300 MB before the projection cut them. SHOW, DESCRIBE and EXPLAIN return metadata and server
state of bounded size and are fetched as they are. The model only ever sees a bounded projection or a
stable error code, never server text.

Diagnostic reads (`tools.mysql.diagnostic_surface`) are checked against the connected server first (a
view it lacks is `BACKEND_ERROR` naming its equivalent) and their results pass one more step before the
projection: other sessions' SQL becomes a digest, server messages lose their quoted values, secret-looking
variables are hidden and the InnoDB status becomes (section, line) rows.
"""

from __future__ import annotations

import asyncio
import importlib.resources
import json
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import aiomysql
from pymysql.constants import CLIENT, FIELD_TYPE
from pymysql.err import InterfaceError, MySQLError

from tools.adapter import AdapterResult, ToolError, ToolRequest
from tools.input_models import QueryMysqlInput
from tools.mysql.access_probe import DiagnosticAccess, probe_access
from tools.mysql.diagnostic_surface import Flavor, variable_is_secret
from tools.mysql.guard import (
    BUILT_STRING_BYTES,
    SYSTEM_SCHEMAS,
    GuardedStatement,
    PolicyReason,
    SqlPolicyError,
    guard_sql,
    spelled_for,
)
from tools.mysql.innodb_status import COLUMNS as INNODB_STATUS_COLUMNS
from tools.mysql.innodb_status import status_lines
from tools.mysql.json_members import hide_secret_members, may_hold_members
from tools.mysql.statement_digest import WITHHELD, digest_or_withheld, mask_quoted
from tools.redaction import NOOP, REDACTED, Redactor
from tools.vocabulary import ErrorCode, EvidenceStatus

log = logging.getLogger(__name__)

DEFAULT_PORT = 3306
# Plain identifiers only: a schema name reaches the server as a protocol argument or inside backticks.
_SCHEMA_NAME = re.compile(r"[A-Za-z0-9_$]{1,64}")
# How long past the server-side time limit the client waits before killing the query itself.
_CLIENT_MARGIN_S = 1.0
# A pooled connection idle longer than this may have been cut by the server or a proxy: open a new one.
_IDLE_RECYCLE_S = 120.0
_FIXTURE_TIMEOUT_S = 60.0
# After KILL CONNECTION, how long the process list is watched for our thread to disappear.
_KILL_VERIFY_S = 2.0
# Characters fetched past a cell's display cut, so the redaction before the cut sees a credential that
# straddles it whole (a URL with its user and password is rarely longer).
_REDACTION_CONTEXT_CHARS = 256
_KILL_POLL_S = 0.05
_RESULT_CTE = "diagnose_result"
# How much of another session's SQL crosses the wire to be digested: trx_query itself stops at 1024
# characters, and a digest tokenizes its text twice, so this cap bounds the work a page of rows costs.
_STATEMENT_WIRE_BYTES = 4096
# GROUP_CONCAT cuts what it builds here, as the guard has CONCAT do inside a query.
_SESSION_CAPS = f"SET SESSION group_concat_max_len = {BUILT_STRING_BYTES}"

_TIMEOUT_ERRNOS = frozenset({1317, 1969, 3024})  # interrupted, MariaDB / MySQL statement time limit
_ACCESS_DENIED_ERRNOS = frozenset({1044, 1045, 1142, 1143, 1227, 1370})
_READ_ONLY_ERRNOS = frozenset({1792})
_UNAVAILABLE_ERRNOS = frozenset({1040, 1053, 1203})  # too many connections, shutdown, user connection cap
# Stable hints that let the model fix its own query without seeing the server's text.
_UNKNOWN_TABLE_ERRNOS = frozenset({1109, 1146})  # unknown information_schema table, unknown table
_BACKEND_REASONS = {
    1049: "UNKNOWN_DATABASE",
    1054: "UNKNOWN_COLUMN",
    1064: "SYNTAX_ERROR",
    1146: "UNKNOWN_TABLE",
}


@dataclass(frozen=True)
class MysqlTarget:
    host: str
    port: int
    user: str
    database: str | None
    password: str | None = field(default=None, repr=False)


def parse_dsn(dsn: str) -> MysqlTarget:
    """`mysql://user@host:port/database`; a password in the DSN works but belongs in an env var.

    Error messages never repeat the DSN, which may carry that password.
    """
    shape = "DSN must look like mysql://user@host:3306/database"
    try:
        parts = urlsplit(dsn)
        port = parts.port or DEFAULT_PORT
    except ValueError:
        raise ValueError(shape) from None
    if parts.scheme not in ("mysql", "mariadb") or not parts.hostname or not parts.username:
        raise ValueError(shape)
    if parts.query or parts.fragment:
        raise ValueError("DSN must not carry query parameters or a fragment")
    database = unquote(parts.path.lstrip("/")) or None
    if database is not None and not _SCHEMA_NAME.fullmatch(database):
        raise ValueError("DSN database must be a plain identifier")
    password = unquote(parts.password) if parts.password is not None else None
    return MysqlTarget(parts.hostname, port, unquote(parts.username), database, password)


class _QuietCursor(aiomysql.Cursor):  # type: ignore[misc]  # aiomysql ships no types
    """aiomysql answers every server warning with an extra SHOW WARNINGS and a Python warning carrying the
    server's text (and data); neither belongs in the console's output."""

    async def _show_warnings(self, conn: Any) -> None:
        return None


async def open_connection(target: MysqlTarget, password: str | None, timeout_s: float) -> Any:
    """Open one connection that can send only one statement per query and never reads client files.

    aiomysql ORs CLIENT.MULTI_STATEMENTS into the flags in `Connection.__init__` whatever the caller
    passes, and its Pool builds connections itself, so the flag is cleared between construction and
    the handshake here. A test asserts the server then rejects `SELECT 1; SELECT 2`.
    """
    conn = aiomysql.Connection(
        host=target.host,
        port=target.port,
        user=target.user,
        password=password if password is not None else (target.password or ""),
        db=None,
        charset="utf8mb4",
        autocommit=True,
        local_infile=False,
        connect_timeout=timeout_s,
        program_name="diagnosis-console",
        cursorclass=_QuietCursor,
    )
    conn.client_flag &= ~CLIENT.MULTI_STATEMENTS
    conn.client_flag &= ~CLIENT.LOCAL_FILES
    try:
        async with asyncio.timeout(timeout_s):
            await conn._connect()
    except BaseException:
        conn.close()
        raise
    return conn


def _peer_closed(conn: Any) -> bool:
    """The server hung up on an idle connection (restart, wait_timeout): its stream already saw EOF."""
    reader = getattr(conn, "_reader", None)
    return reader is None or reader.at_eof()


class _ConnectionPool:
    """At most `maxsize` connections opened by `open_connection`; a connection goes back only if clean."""

    def __init__(self, open_new: Callable[[], Any], maxsize: int) -> None:
        self._open_new = open_new
        self._maxsize = maxsize
        self._slots = asyncio.Semaphore(maxsize)
        self._free: list[Any] = []
        self._in_use: set[Any] = set()
        self.opened = 0

    async def acquire(self) -> Any:
        await self._slots.acquire()
        try:
            conn = self._take_free()
            if conn is None:
                conn = await self._open_new()
                self.opened += 1
        except BaseException:
            self._slots.release()
            raise
        self._in_use.add(conn)
        return conn

    def _take_free(self) -> Any:
        now = asyncio.get_running_loop().time()
        while self._free:
            conn = self._free.pop()
            if not conn.closed and not _peer_closed(conn) and now - conn.last_usage < _IDLE_RECYCLE_S:
                return conn
            conn.close()
        return None

    def release(self, conn: Any, *, reusable: bool) -> None:
        """Closing (not returning) is the only safe end for a connection whose state is unknown."""
        self._in_use.discard(conn)
        if reusable and not conn.closed:
            self._free.append(conn)
        else:
            conn.close()
        self._slots.release()

    async def close(self, timeout_s: float) -> None:
        """Idle connections say goodbye (COM_QUIT) so the server does not count them as aborted."""
        free, self._free = self._free, []
        for conn in free:
            try:
                async with asyncio.timeout(timeout_s):
                    await conn.ensure_closed()
            except (MySQLError, OSError, TimeoutError):
                conn.close()
        for conn in self._in_use:
            conn.close()
        self._in_use.clear()

    def stats(self) -> dict[str, int]:
        return {
            "size": len(self._free) + len(self._in_use),
            "free": len(self._free),
            "in_use": len(self._in_use),
            "max": self._maxsize,
            "opened": self.opened,
        }


@dataclass(frozen=True)
class _Rows:
    columns: list[str]
    rows: list[tuple[Any, ...]]


@dataclass(frozen=True)
class _Cut:
    """A value longer than the wire cap: only its prefix was fetched."""

    prefix: str | bytes


class _QueryStillRunning(Exception):
    """KILL QUERY and KILL CONNECTION were sent, yet our server thread is still in the process list."""


class MysqlAdapter:
    """Answers query_mysql: guard first (no connection for a rejected statement), then one bounded run."""

    def __init__(
        self,
        dsn: str,
        *,
        password: str | None,
        allowed_schemas: Sequence[str],
        statement_timeout_ms: int = 5000,
        max_rows: int = 100,
        max_columns: int = 30,
        cell_chars: int = 200,
        max_result_bytes: int = 64_000,
        pool_size: int = 4,
        connect_timeout_s: float = 5.0,
        kill_verify_s: float = _KILL_VERIFY_S,
        redactor: Redactor = NOOP,
    ) -> None:
        self._target = parse_dsn(dsn)
        self._redactor = redactor  # cells are redacted before they are cut (`Redactor.prefix`)
        self._password = password
        # With no list configured, the DSN's database is the one schema the model may read.
        if not allowed_schemas and self._target.database is not None:
            allowed_schemas = (self._target.database,)
        self._allowed_schemas = tuple(allowed_schemas)
        # The guard matches schema names case-insensitively and executes the configured spelling; so does
        # the default database, which a case-sensitive server would otherwise resolve differently.
        self._schema_spelling = {name.lower(): name for name in allowed_schemas}
        self._statement_timeout_ms = statement_timeout_ms
        self._max_rows = max_rows
        self._max_columns = max_columns
        self._cell_chars = cell_chars
        # A longer value is fetched as a prefix of this many characters: what is shown, and enough
        # beyond it that a credential across the display cut is seen whole by the redaction before
        # the cut. A value of up to 4 bytes a character of it is fetched whole (utf8mb4).
        self._wire_prefix_chars = cell_chars + 1 + _REDACTION_CONTEXT_CHARS
        self._wire_cell_bytes = 4 * self._wire_prefix_chars
        self._max_result_bytes = max_result_bytes
        self._pool_size = pool_size
        self._connect_timeout_s = connect_timeout_s
        self._kill_verify_s = kill_verify_s
        self._pool: _ConnectionPool | None = None
        self._kills: set[asyncio.Task[bool]] = set()

    def pool_stats(self) -> dict[str, int]:
        """For tests and operators: connections held, idle, checked out, the cap, and ever opened."""
        if self._pool is None:
            return {"size": 0, "free": 0, "in_use": 0, "max": self._pool_size, "opened": 0}
        return self._pool.stats()

    async def aclose(self) -> None:
        if self._pool is not None:
            pool, self._pool = self._pool, None
            await pool.close(_CLIENT_MARGIN_S)
        if self._kills:
            await asyncio.wait(self._kills, timeout=self._connect_timeout_s + _CLIENT_MARGIN_S)

    async def execute(self, request: ToolRequest) -> AdapterResult:
        params = request.input
        if not isinstance(params, QueryMysqlInput):
            raise ToolError(ErrorCode.INVALID_INPUT)
        database = params.database or self._target.database
        try:
            guarded = guard_sql(
                params.sql, database=database, allowed_schemas=self._allowed_schemas, max_rows=self._max_rows
            )
        except SqlPolicyError as exc:
            raise ToolError(ErrorCode.POLICY_REJECTED, exc.reason) from None
        schema = None
        if database is not None:
            schema = self._schema_spelling.get(database.lower())
            if schema is None:  # the guard rejects this first; kept so no other name is ever selected
                raise ToolError(ErrorCode.POLICY_REJECTED, PolicyReason.SCHEMA_NOT_ALLOWED)
        result = await self._run(guarded, schema)
        return self._project(result, guarded)

    async def diagnostic_access(self) -> DiagnosticAccess:
        """Which diagnostic views the account can read (`tools.mysql.access_probe`), asked once at start;
        `ToolError` UNAVAILABLE when the server cannot be reached or does not answer in time."""
        pool = self._pool_or_create()
        conn = await self._checkout(pool)
        try:
            async with (
                asyncio.timeout(self._statement_timeout_ms / 1000 + _CLIENT_MARGIN_S),
                conn.cursor() as cur,
            ):
                await cur.execute(self._time_limit_sql(conn))
                await cur.execute("SET SESSION TRANSACTION READ ONLY")
                access = await probe_access(cur, conn.get_server_info())
        except TimeoutError:
            pool.release(conn, reusable=False)
            raise ToolError(ErrorCode.UNAVAILABLE) from None
        except (MySQLError, OSError) as exc:
            pool.release(conn, reusable=False)
            raise _tool_error(exc) from None
        except BaseException:
            pool.release(conn, reusable=False)
            raise
        pool.release(conn, reusable=True)
        return access

    async def _checkout(self, pool: _ConnectionPool) -> Any:
        """A connection within the connect timeout, or UNAVAILABLE / the error's stable code."""
        try:
            async with asyncio.timeout(self._connect_timeout_s):
                return await pool.acquire()
        except TimeoutError:
            raise ToolError(ErrorCode.UNAVAILABLE) from None
        except (MySQLError, OSError) as exc:
            raise _tool_error(exc) from None

    def _pool_or_create(self) -> _ConnectionPool:
        if self._pool is None:
            self._pool = _ConnectionPool(
                lambda: open_connection(self._target, self._password, self._connect_timeout_s),
                self._pool_size,
            )
        return self._pool

    async def _run(self, guarded: GuardedStatement, database: str | None) -> _Rows:
        pool = self._pool_or_create()
        conn = await self._checkout(pool)
        thread_id = conn.thread_id()
        if (missing := _missing_view(guarded, conn.get_server_info())) is not None:
            pool.release(conn, reusable=True)
            raise ToolError(ErrorCode.BACKEND_ERROR, missing)
        try:
            async with asyncio.timeout(self._statement_timeout_ms / 1000 + _CLIENT_MARGIN_S):
                result = await self._statement(conn, guarded, database)
        except (TimeoutError, asyncio.CancelledError) as exc:
            # The statement may still be running on the server: drop the connection, then kill it.
            pool.release(conn, reusable=False)
            gone = await asyncio.shield(self._kill_in_background(thread_id))
            if isinstance(exc, TimeoutError):
                raise ToolError(ErrorCode.TIMEOUT, None if gone else "QUERY_STILL_RUNNING") from None
            raise
        except MySQLError as exc:
            pool.release(conn, reusable=await self._rolled_back(conn, exc))
            if (absent := _absent_view(guarded, exc)) is not None:
                raise ToolError(ErrorCode.BACKEND_ERROR, absent) from None
            raise _tool_error(exc) from None
        except BaseException:
            pool.release(conn, reusable=False)
            raise
        pool.release(conn, reusable=True)
        return result

    def _time_limit_sql(self, conn: Any) -> str:
        """MariaDB and MySQL spell the per-statement time limit differently; the handshake says which."""
        if "mariadb" in conn.get_server_info().lower():
            return f"SET SESSION max_statement_time = {self._statement_timeout_ms / 1000:.3f}"
        return f"SET SESSION MAX_EXECUTION_TIME = {int(self._statement_timeout_ms)}"

    async def _statement(self, conn: Any, guarded: GuardedStatement, database: str | None) -> _Rows:
        """Session settings on every checkout, so nothing a previous run left behind can matter.

        `SET SESSION TRANSACTION READ ONLY` is what stops DDL: DDL implicitly commits the explicit
        read-only transaction and would otherwise run outside it.
        """
        async with conn.cursor() as cur:
            await cur.execute(self._time_limit_sql(conn))
            await cur.execute(_SESSION_CAPS)
            await cur.execute("SET SESSION TRANSACTION READ ONLY")
            if database is not None:
                await conn.select_db(database)
            await cur.execute("START TRANSACTION READ ONLY")
            if guarded.columns_sql is None:  # SHOW / DESCRIBE / EXPLAIN: metadata and server state
                await cur.execute(spelled_for(guarded.sql, conn.get_server_info()))
                columns = [str(column[0]) for column in cur.description or ()]
                rows = list(await cur.fetchmany(self._max_rows + 1)) if columns else []
            else:
                await cur.execute(guarded.columns_sql)
                columns = [str(column[0]) for column in cur.description or ()]
                kinds = _column_kinds(cur, self._max_columns + 1)
                statements = {index for index, name in enumerate(columns) if _digested(guarded, index, name)}
                await cur.execute(self._capped_sql(guarded.sql, len(columns), kinds, statements))
                fetched = await cur.fetchmany(self._max_rows + 1)
                rows = [_uncapped(row, kinds) for row in fetched] if _PAIR in kinds else list(fetched)
            await cur.execute("ROLLBACK")
        return _Rows(columns, rows)

    def _capped_sql(self, sql: str, width: int, kinds: Sequence[int], statements: set[int]) -> str:
        """The statement wrapped so each of its first `max_columns + 1` values crosses the wire capped.

        How, per column (`_column_kinds`): a number or a time is bounded by its type and comes as it is;
        a text value longer than the cap comes as its first characters, in the same field (the
        projection then cuts it and says so); any other value comes as a (whole or NULL, prefix or NULL)
        pair, so a long one keeps its type and is known to be cut. Another session's SQL, shown only as a
        digest, crosses with a wider cap: a statement cut inside a string literal cannot be digested.
        """
        names = [f"`c{index}`" for index in range(width)]
        values = []
        for index, (name, kind) in enumerate(zip(names, kinds, strict=False)):
            wide = index in statements
            limit = _STATEMENT_WIRE_BYTES if wide else self._wire_cell_bytes
            prefix = _STATEMENT_WIRE_BYTES // 4 if wide else self._wire_prefix_chars
            if kind == _PLAIN:
                values.append(name)
            elif kind == _TEXT:
                values.append(f"IF(OCTET_LENGTH({name}) > {limit}, LEFT({name}, {prefix}), {name})")
            else:
                values.append(
                    f"IF(OCTET_LENGTH({name}) > {limit}, NULL, {name}), "
                    f"IF(OCTET_LENGTH({name}) > {limit}, LEFT({name}, {prefix}), NULL)"
                )
        selected = ", ".join(values)
        return f"WITH `{_RESULT_CTE}` ({', '.join(names)}) AS ({sql}) SELECT {selected} FROM `{_RESULT_CTE}`"  # noqa: S608 - the guarded statement, regenerated and verified, in a CTE of `cN` names

    async def _rolled_back(self, conn: Any, exc: MySQLError) -> bool:
        """After a server-side error the connection is intact: roll back and keep it; otherwise drop it."""
        errno = _errno(exc)
        if errno is None or errno >= 2000:
            return False
        try:
            async with asyncio.timeout(_CLIENT_MARGIN_S):
                await conn.rollback()
        except (MySQLError, OSError, TimeoutError):
            return False
        return True

    def _kill_in_background(self, thread_id: int) -> asyncio.Task[bool]:
        """A task of its own, so a second cancellation of the caller cannot stop the kill."""
        task = asyncio.get_running_loop().create_task(self._kill_query(thread_id))
        self._kills.add(task)
        task.add_done_callback(self._kills.discard)
        return task

    async def _kill_query(self, thread_id: int) -> bool:
        """KILL QUERY, then KILL CONNECTION, then watch the process list; True once our thread is gone.

        KILL QUERY stops the statement between rows; KILL CONNECTION also ends the session, so nothing
        of ours lingers. Neither interrupts one row's evaluation, which is why the guard admits only
        functions whose cost is linear; if the thread still outlives the check, the caller reports it.
        """
        thread = int(thread_id)
        try:
            conn = await open_connection(self._target, self._password, self._connect_timeout_s)
        except (MySQLError, OSError, TimeoutError) as exc:
            log.warning("cannot kill MySQL thread %d (%s %s)", thread, type(exc).__name__, _errno(exc))
            return False
        try:
            async with asyncio.timeout(_CLIENT_MARGIN_S + self._kill_verify_s), conn.cursor() as cur:
                for kill in (f"KILL QUERY {thread}", f"KILL CONNECTION {thread}"):
                    try:
                        await cur.execute(kill)
                    except MySQLError as exc:
                        if _errno(exc) != 1094:  # 1094: no such thread (it already ended)
                            raise
                loop = asyncio.get_running_loop()
                deadline = loop.time() + self._kill_verify_s
                while True:
                    await cur.execute(
                        "SELECT COUNT(*) FROM information_schema.processlist WHERE id = %s", (thread,)
                    )
                    row = await cur.fetchone()
                    if not row or not row[0]:
                        return True
                    if loop.time() >= deadline:
                        raise _QueryStillRunning
                    await asyncio.sleep(_KILL_POLL_S)
        except (MySQLError, OSError, TimeoutError, _QueryStillRunning) as exc:
            log.warning(
                "MySQL thread %d still runs after KILL QUERY and KILL CONNECTION (%s %s)",
                thread,
                type(exc).__name__,
                _errno(exc),
            )
            return False
        finally:
            conn.close()

    def _project(self, result: _Rows, guarded: GuardedStatement) -> AdapterResult:
        """Whitelisted shape only: names, capped rows and columns, cut cells, and whether anything was cut.

        A column that selects a secret under another name is hidden here; one named like a secret is
        hidden by the redaction step (both are `[REDACTED]`)."""
        result = _other_sessions_hidden(result, guarded)
        secret = {
            index
            for index, name in enumerate(result.columns)
            if index in guarded.secret_columns or name.lower() in guarded.secret_names
        }
        truncated = len(result.columns) > self._max_columns or len(result.rows) > self._max_rows
        columns: list[str] = []
        for name in result.columns[: self._max_columns]:
            cut, was_cut = self._cut(name)
            columns.append(cut)
            truncated = truncated or was_cut
        rows, cells_cut = self._project_rows(
            result.rows[: self._max_rows], min(len(result.columns), self._max_columns), secret
        )
        truncated = truncated or cells_cut
        data: dict[str, Any] = {
            "columns": columns,
            "rows": rows,
            "row_count": len(rows),
            "truncated": truncated,
        }
        size = len(json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))
        if size > self._max_result_bytes:
            raise ToolError(ErrorCode.RESULT_TOO_LARGE, "NARROW_THE_QUERY")
        return AdapterResult(EvidenceStatus.FOUND if rows else EvidenceStatus.EMPTY, data)

    def _project_rows(
        self, raw_rows: Sequence[tuple[Any, ...]], width: int, secret: set[int]
    ) -> tuple[list[list[Any]], bool]:
        """Rows of JSON-safe cells, converted column by column: the type dispatch happens once per column.

        A column whose values are all numbers (or NULL) is taken as it is, a text column is only checked
        for length, and only a column of mixed or unusual types goes cell by cell through `_cell`.
        """
        if not raw_rows:
            return [], False
        if any(len(raw) < width for raw in raw_rows):  # never from a server; kept exact all the same
            width = min(len(raw) for raw in raw_rows)
        converted: list[Sequence[Any]] = []
        truncated = False
        for index, values in enumerate(zip(*(raw[:width] for raw in raw_rows), strict=True)):
            if index in secret:
                converted.append([None if value is None else REDACTED for value in values])
                continue
            column, cut = self._column(_json_members_hidden(values))
            converted.append(column)
            truncated = truncated or cut
        if not converted:
            return [[] for _ in raw_rows], truncated
        return [list(row) for row in zip(*converted, strict=True)], truncated

    def _column(self, values: tuple[Any, ...]) -> tuple[Sequence[Any], bool]:
        kinds = set(map(type, values))
        kinds.discard(type(None))
        if kinds <= _AS_IS:
            return values, False
        if kinds == {str}:
            limit = self._cell_chars
            if all(value is None or len(value) <= limit for value in values):
                return values, False
        elif kinds <= _ISO_TYPES:
            return [None if value is None else value.isoformat() for value in values], False
        cells = [self._cell(value) for value in values]
        return [cell for cell, _ in cells], any(cut for _, cut in cells)

    def _cut(self, text: str) -> tuple[str, bool]:
        if len(text) > self._cell_chars:
            return self._redactor.prefix(text, self._cell_chars), True
        return text, False

    def _cell(self, value: Any) -> tuple[Any, bool]:
        """JSON-safe cells: numbers stay numbers where that loses nothing, binary data is never shown."""
        if isinstance(value, _Cut):
            if isinstance(value.prefix, bytes | bytearray):
                return f"<more than {self._wire_cell_bytes} bytes>", True
            return self._redactor.prefix(value.prefix, self._cell_chars), True
        if value is None or isinstance(value, bool | int | float):
            return value, False
        if isinstance(value, Decimal):
            # At most 15 significant digits survive the trip through a float exactly (DBL_DIG), so the
            # round-trip check is needed only for longer values.
            if value.is_finite() and len(value.as_tuple().digits) <= _DBL_DIG:
                return float(value) if value != value.to_integral_value() else int(value), False
            if value.is_finite() and Decimal(repr(float(value))) == value:
                return float(value) if value != value.to_integral_value() else int(value), False
            return self._cut(str(value))
        if isinstance(value, bytes | bytearray | memoryview):
            return f"<{len(value)} bytes>", False
        if isinstance(value, datetime | date | time):
            return value.isoformat(), False
        if isinstance(value, timedelta):
            return str(value), False
        if isinstance(value, set | frozenset):
            return self._cut(",".join(sorted(str(item) for item in value)))
        return self._cut(str(value))


def _missing_view(guarded: GuardedStatement, server_version: str) -> str | None:
    """The stable reason for a diagnostic view this server does not have, naming the one it has instead."""
    flavor = Flavor.of(server_version)
    missing = [(view.servers, view.equivalent) for view in guarded.views]
    for servers, equivalent in [(guarded.servers, guarded.equivalent), *missing]:
        if flavor not in servers:
            where = f"NOT_ON_{flavor.upper()}"
            return f"{where}:{equivalent}" if equivalent else where
    return None


def _absent_view(guarded: GuardedStatement, exc: MySQLError) -> str | None:
    """A diagnostic view this server's flavor should have but does not (a plugin not loaded, an older
    version): the stable reason names what answers the same question, when the allow-list knows it."""
    if _errno(exc) not in _UNKNOWN_TABLE_ERRNOS:
        return None
    equivalents = sorted({view.equivalent for view in guarded.views if view.equivalent})
    return f"NOT_ON_THIS_SERVER:{','.join(equivalents)}" if equivalents else None


def _digested(guarded: GuardedStatement, index: int, name: str) -> bool:
    return index in guarded.digest_columns or name.lower() in guarded.digest_names


def _other_sessions_hidden(result: _Rows, guarded: GuardedStatement) -> _Rows:
    """Other sessions' SQL as digests, server messages with their quoted values masked, secret-looking
    variables' values hidden, the InnoDB status as lines (`tools.mysql.diagnostic_surface`)."""
    if guarded.innodb_status:
        text = next((row[-1] for row in result.rows if row and isinstance(row[-1], str)), "")
        return _Rows(list(INNODB_STATUS_COLUMNS), [tuple(row) for row in status_lines(text)])
    statements = [index for index, name in enumerate(result.columns) if _digested(guarded, index, name)]
    messages = [
        index
        for index, name in enumerate(result.columns)
        if index in guarded.message_columns or name.lower() in guarded.message_names
    ]
    variables = guarded.variable_rows and len(result.columns) >= 2
    if not (statements or messages or variables):
        return result
    rows = []
    for row in result.rows:
        cells = list(row)
        for index in statements:
            cells[index] = digest_or_withheld(_statement_text(cells[index]))
        for index in messages:
            cells[index] = _masked(cells[index])
        if (
            variables
            and isinstance(cells[0], str)
            and variable_is_secret(cells[0])
            and cells[1] not in (None, "")
        ):
            cells[1] = REDACTED
        rows.append(tuple(cells))
    return _Rows(result.columns, rows)


def _statement_text(value: Any) -> Any:
    """Statement text as a string where it arrived as bytes (MySQL 8 keeps `slow_log.sql_text` in a
    BLOB) or as the prefix of a long value; bytes that are not UTF-8 stay bytes and are withheld."""
    if isinstance(value, _Cut):
        value = value.prefix
    if isinstance(value, bytes | bytearray):
        for cut in range(4):  # a prefix may end inside a character: drop at most its first bytes
            try:
                return bytes(value[: len(value) - cut]).decode("utf-8")
            except UnicodeDecodeError:
                continue
    return value


def _masked(value: Any) -> Any:
    if value is None:
        return None
    return mask_quoted(value) if isinstance(value, str) else WITHHELD


def _json_members_hidden(values: tuple[Any, ...]) -> tuple[Any, ...]:
    """A column's text values with the secret-named members of any JSON in them hidden, before they are
    cut to `cell_chars`: the guard cannot see which keys a document holds (see `tools.mysql.json_members`)."""
    if not any(may_hold_members(text) for text in map(_text_of, values)):
        return values  # most columns: a type test and a substring test per cell
    return tuple(_members_hidden(value) for value in values)


def _text_of(value: Any) -> str:
    if type(value) is str:
        return value
    if type(value) is _Cut and isinstance(value.prefix, str):
        return value.prefix
    return ""


def _members_hidden(value: Any) -> Any:
    if type(value) is str:
        return hide_secret_members(value)
    if type(value) is _Cut and isinstance(value.prefix, str):
        return _Cut(hide_secret_members(value.prefix))
    return value


# Cell types a projection keeps as they are (JSON numbers and booleans) or writes as ISO 8601 text.
_AS_IS = frozenset({int, float, bool})
_ISO_TYPES = frozenset({datetime, date, time})
_DBL_DIG = 15


# How a result column crosses the wire (see `MysqlAdapter._capped_sql`).
_PLAIN, _TEXT, _PAIR = 0, 1, 2
# Numbers, times and bits: their longest value is a few dozen bytes whatever the data.
_BOUNDED_TYPES = frozenset(
    {
        FIELD_TYPE.DECIMAL,
        FIELD_TYPE.NEWDECIMAL,
        FIELD_TYPE.TINY,
        FIELD_TYPE.SHORT,
        FIELD_TYPE.LONG,
        FIELD_TYPE.INT24,
        FIELD_TYPE.LONGLONG,
        FIELD_TYPE.FLOAT,
        FIELD_TYPE.DOUBLE,
        FIELD_TYPE.NULL,
        FIELD_TYPE.BIT,
        FIELD_TYPE.YEAR,
        FIELD_TYPE.DATE,
        FIELD_TYPE.NEWDATE,
        FIELD_TYPE.TIME,
        FIELD_TYPE.DATETIME,
        FIELD_TYPE.TIMESTAMP,
    }
)
_TEXT_TYPES = frozenset(
    {
        FIELD_TYPE.VARCHAR,
        FIELD_TYPE.VAR_STRING,
        FIELD_TYPE.STRING,
        FIELD_TYPE.TINY_BLOB,
        FIELD_TYPE.BLOB,
        FIELD_TYPE.MEDIUM_BLOB,
        FIELD_TYPE.LONG_BLOB,
        FIELD_TYPE.JSON,
        FIELD_TYPE.ENUM,
        FIELD_TYPE.SET,
    }
)
_BINARY_CHARSET = 63


def _column_kinds(cursor: Any, width: int) -> list[int]:
    """Each result column's wire form, decided once per column from the LIMIT 0 probe's metadata.

    Text needs its character set (binary strings share text's type codes); where the driver does not
    expose it, the column is sent as a pair, which is right for every type.
    """
    fields = getattr(getattr(cursor, "_result", None), "fields", None) or []
    kinds = []
    for index, column in enumerate((cursor.description or ())[:width]):
        charset = getattr(fields[index], "charsetnr", None) if index < len(fields) else None
        if column[1] in _BOUNDED_TYPES:
            kinds.append(_PLAIN)
        elif column[1] in _TEXT_TYPES and isinstance(charset, int) and charset != _BINARY_CHARSET:
            kinds.append(_TEXT)
        else:
            kinds.append(_PAIR)
    return kinds


def _uncapped(row: tuple[Any, ...], kinds: Sequence[int]) -> tuple[Any, ...]:
    """One value per column again: a (whole or NULL, prefix or NULL) pair becomes the whole or a `_Cut`."""
    values: list[Any] = []
    position = 0
    for kind in kinds:
        if kind == _PAIR:
            whole, prefix = row[position], row[position + 1]
            values.append(_Cut(prefix) if prefix is not None else whole)
            position += 2
        else:
            values.append(row[position])
            position += 1
    return tuple(values)


def _errno(exc: BaseException) -> int | None:
    if isinstance(exc, MySQLError) and exc.args and isinstance(exc.args[0], int):
        return exc.args[0]
    return None


def _tool_error(exc: BaseException) -> ToolError:
    """Stable codes by errno; the server's message is logged by number only and never passed on."""
    errno = _errno(exc)
    log.warning("query_mysql failed: %s errno=%s", type(exc).__name__, errno)
    if errno in _TIMEOUT_ERRNOS:
        return ToolError(ErrorCode.TIMEOUT)
    if errno in _ACCESS_DENIED_ERRNOS:
        return ToolError(ErrorCode.POLICY_REJECTED, "ACCESS_DENIED")
    if errno in _READ_ONLY_ERRNOS:
        return ToolError(ErrorCode.POLICY_REJECTED, "READ_ONLY")
    if (
        errno in _UNAVAILABLE_ERRNOS
        or (errno is not None and errno >= 2000)
        or isinstance(exc, InterfaceError | OSError)
    ):
        return ToolError(ErrorCode.UNAVAILABLE)
    return ToolError(ErrorCode.BACKEND_ERROR, _BACKEND_REASONS.get(errno) if errno is not None else None)


def bundled_demo_sql_path() -> Path:
    """The demo business database of the 2026-11-30 payment incident, shipped with the package."""
    return Path(str(importlib.resources.files("tools") / "data" / "mysql" / "demo.sql"))


def split_sql_script(text: str) -> list[str]:
    """Split a script on `;` outside quotes and comments: the connection runs one statement per query."""
    statements: list[str] = []
    current: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch in "'\"`":
            end = i + 1
            while end < n and text[end] != ch:
                end += 2 if text[end] == "\\" and ch != "`" else 1
            current.append(text[i : end + 1])
            i = end + 1
        elif ch == "#" or (text.startswith("--", i) and (i + 2 == n or text[i + 2].isspace())):
            newline = text.find("\n", i)
            i = n if newline == -1 else newline + 1
            current.append("\n")
        elif text.startswith("/*", i):
            close = text.find("*/", i + 2)
            i = n if close == -1 else close + 2
            current.append(" ")
        elif ch == ";":
            statements.append("".join(current).strip())
            current = []
            i += 1
        else:
            current.append(ch)
            i += 1
    statements.append("".join(current).strip())
    return [statement for statement in statements if statement]


async def load_demo_fixture(dsn: str, password: str | None, database: str) -> int:
    """Create `database` if missing and (re)load the demo tables into it; returns the statement count.

    The only write path in the package, for demos and tests: it refuses system schemas and anything
    that is not a plain identifier, and is never reachable from a model's tool call.
    """
    if not _SCHEMA_NAME.fullmatch(database) or database.lower() in SYSTEM_SCHEMAS:
        raise ValueError("the demo fixture needs a plain, non-system database name")
    statements = split_sql_script(bundled_demo_sql_path().read_text(encoding="utf-8"))
    target = parse_dsn(dsn)
    async with asyncio.timeout(_FIXTURE_TIMEOUT_S):
        conn = await open_connection(target, password, _FIXTURE_TIMEOUT_S)
        try:
            async with conn.cursor() as cur:
                await cur.execute(f"CREATE DATABASE IF NOT EXISTS `{database}` CHARACTER SET utf8mb4")
                await conn.select_db(database)
                for statement in statements:
                    await cur.execute(statement)
        finally:
            conn.close()
    return len(statements)
