"""A team audit on MariaDB/MySQL: the same rows as the SQLite file, written by many processes on many
hosts (docs/contracts.md, "Audit").

Synchronous PyMySQL, like the sink's synchronous calls. The guarantees are the file's:

- **Durable before the tool runs.** `write()` is one transaction committed before it returns, queued
  writes (`defer`) first, so a STARTED invocation is on the server before its tool runs.
- **Retried, never duplicated.** A deadlock or lock wait timeout (the server rolled the transaction
  back) and a lost connection are retried with jittered, bounded backoff: the transaction is replayed
  statement by statement on a fresh connection, and each replayed statement must change as many rows
  as the first time. Every transaction also inserts a random token; when the connection drops during
  COMMIT, the token on the server says whether the commit happened, so a committed transaction is
  never applied twice.
- **A cut flow is noticed in time.** Every socket read is bounded by a third of the retry deadline, so
  a COMMIT sent into a flow cut without a reset is given up with time left to retry it; the retry
  first KILLs the old connection by its thread id (its orphaned transaction would keep its row locks
  until the server noticed) and waits until the server let it go, so the token's answer is final.
  Only on the server that held it: a thread id means nothing on another server, where it may be
  another client's session. Behind a fail-over address or a proxy the reconnect may reach another
  server, so each connection notes which server it reached (`@@server_uuid` where the server has
  one, else `@@server_id` with `@@hostname` and `@@port`) and when that server started; no KILL
  unless both match.
- **Typed failure.** When the server stays away past the retry deadline, the write raises
  `AuditStoreError`, which stops the run exactly as a broken SQLite file does.
- **Leases, not pids** (`audit.leases`): recovery closes only runs whose writer stopped renewing, and
  waits for no other connection's row locks (SKIP LOCKED); a writer that comes back after recovery
  closed its run finds its lease gone at its next commit and stops.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

import pymysql
import pymysql.cursors
from pymysql.constants import CLIENT

from agent.vocabulary import InvocationStatus
from audit.common import AuditStoreError, audit_timestamp
from audit.leases import KEEP_SQL, RELEASE_SQL, TAKE_SQL, AuditLeaseLost, Heartbeat
from audit.location import MysqlLocation
from audit.mysql_dialect import to_mysql
from audit.mysql_schema import (
    MIGRATION_LOCK_TIMEOUT_S,
    MIGRATIONS,
    VERSION_TABLE,
    foreign_objects,
    migration_lock_name,
)
from audit.mysql_text_search import TrigramWordsSearch
from audit.port import TextSearch
from audit.retry import retry_with_backoff
from audit.store_base import PRUNED_TABLES, AuditStoreBase, QueuedWrite

log = logging.getLogger(__name__)

T = TypeVar("T")

# The server rolled the transaction (1213) or the statement (1205) back: run it again.
_CONFLICT_ERRNOS = frozenset({1205, 1213})
# The connection is gone (server restart, network, KILL, idle cut): reconnect and run it again.
_CONNECTION_ERRNOS = frozenset({1053, 1927, 2003, 2006, 2013, 2014, 2055, 4031})
# A fresh database has no audit_schema_version table yet.
_NO_SUCH_TABLE = 1146
# A statement on tables the account may not run (1142), or the database refused to it (1044).
_SCHEMA_CHANGE_DENIED = frozenset({1044, 1142})
_BACKOFF_FIRST_S = 0.05
_BACKOFF_MAX_S = 2.0
# Maintenance statements wait this long for the server, as every statement did before writes got
# their shorter read timeout (`MysqlAuditStore._patiently`).
_PATIENT_TIMEOUT_S = 30.0
# KILL of a thread that is gone (1094) or another account's (1095): nothing of ours to end.
_NOT_OUR_THREAD = frozenset({1094, 1095})
# Two estimates of the server's start this far apart are two server runs (uptime counts whole seconds).
_SAME_SERVER_S = 2.0
# MariaDB has no @@server_uuid (MySQL 5.6+ has): "Unknown system variable".
_UNKNOWN_VARIABLE = 1193
_REAP_POLL_S = 0.01
# Write tokens only need to outlive the retries of their transaction.
_TOKEN_RETENTION = "INTERVAL 1 DAY"  # noqa: S105 - an SQL interval, not a token
_SESSION_SETUP = (
    # SQLite's string literals: a backslash is a character (audit.mysql_dialect).
    "SET SESSION sql_mode = CONCAT(@@SESSION.sql_mode, ',NO_BACKSLASH_ESCAPES')",
    # Writers lock only the rows they touch (no gap locks): fewer deadlocks among many writers.
    "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED",
)


def _failure_kind(exc: BaseException) -> str | None:
    """ "conflict", "connection", or None for an error a retry would only repeat."""
    if isinstance(exc, (pymysql.err.InterfaceError, OSError)):
        return "connection"
    if isinstance(exc, pymysql.err.MySQLError) and exc.args and isinstance(exc.args[0], int):
        errno = exc.args[0]
        if errno in _CONFLICT_ERRNOS:
            return "conflict"
        if errno in _CONNECTION_ERRNOS:
            return "connection"
    return None


@dataclass(frozen=True)
class _ServerThread:
    """A connection's thread on the server: which server (`server`, its identity) and which run of it
    (`server_started`: this host's monotonic clock minus the server's uptime), so a thread id is never
    taken for one of another server, or of a later run of the same one."""

    thread_id: int
    server: tuple[str, ...]
    server_started: float

    def __str__(self) -> str:
        return str(self.thread_id)

    def same_server_run(self, other: _ServerThread) -> bool:
        return (
            self.server == other.server and abs(self.server_started - other.server_started) <= _SAME_SERVER_S
        )


def _server_identity(cursor: Any) -> tuple[str, ...]:
    try:
        cursor.execute("SELECT @@server_uuid")
        return ("uuid", str(cursor.fetchone()[0]))
    except pymysql.err.MySQLError as exc:
        if not (exc.args and exc.args[0] == _UNKNOWN_VARIABLE):
            raise
    cursor.execute("SELECT @@server_id, @@hostname, @@port")
    server_id, hostname, port = cursor.fetchone()
    return ("id", str(server_id), str(hostname), str(port))


def _server_thread(conn: Any) -> _ServerThread:
    with conn.cursor() as cursor:
        server = _server_identity(cursor)
        cursor.execute("SHOW GLOBAL STATUS LIKE 'Uptime'")
        row = cursor.fetchone()
    uptime = float(row[1]) if row else 0.0
    return _ServerThread(int(conn.thread_id()), server, time.monotonic() - uptime)


@dataclass
class _Count:
    """What the sink reads back from a statement: how many rows it matched."""

    rowcount: int


@dataclass
class _CursorStatements:
    """A raw cursor as `audit.port.SqlConnection`, for the audit's shared statements in recovery."""

    cursor: Any

    def execute(self, sql: str, parameters: tuple[Any, ...] = (), /) -> _Count:
        return _Count(int(self.cursor.execute(to_mysql(sql), parameters)))


@dataclass
class _Transaction:
    """One write transaction as it was executed, so it can be replayed after a lost connection."""

    store: MysqlAuditStore
    token: str = field(default_factory=lambda: uuid.uuid4().hex)
    statements: list[tuple[str, tuple[Any, ...], int]] = field(default_factory=list)
    on_commit: list[Callable[[], None]] = field(default_factory=list)
    leases_kept: set[str] = field(default_factory=set)
    broken: bool = False
    commit_sent: bool = False

    @property
    def conn(self) -> _Transaction:
        return self

    def execute(self, sql: str, parameters: tuple[Any, ...] = (), /) -> _Count:
        return _Count(self.store._statement(self, to_mysql(sql), tuple(parameters)))


class MysqlAuditStore(AuditStoreBase):
    """One audit database on a MariaDB/MySQL server (`audit.port.AuditBackend`).

    Opening it migrates the schema (under a server lock, so two processes starting at once are safe)
    and closes the runs of writers whose lease expired.
    """

    text_search: TextSearch = TrigramWordsSearch()  # trigram words under FULLTEXT (audit.mysql_text_search)

    def __init__(
        self,
        location: MysqlLocation,
        *,
        heartbeat_s: float = 5.0,
        lease_s: float = 30.0,
        retry_deadline_s: float = 30.0,
        connect_timeout_s: float = 5.0,
        read_timeout_s: float | None = None,
    ) -> None:
        self._where = location
        # A third of the deadline: a hung statement is noticed with room left to retry it twice.
        self._read_timeout_s = retry_deadline_s / 3 if read_timeout_s is None else read_timeout_s
        if not 0 < self._read_timeout_s < retry_deadline_s:
            raise ValueError("read_timeout_s must be positive and shorter than retry_deadline_s")
        self._password = os.environ.get(location.password_env) if location.password_env else None
        if location.password_env and self._password is None:
            # Connecting without it would only earn the server's "Access denied".
            raise AuditStoreError(
                f"audit {location.describe()}: its password variable {location.password_env} is not set"
            )
        self._retry_deadline_s = retry_deadline_s
        self._connect_timeout_s = connect_timeout_s
        super().__init__()
        # Runs whose lease recovery elsewhere took: their queued rows are dropped, their writes refused.
        self._lost: set[str] = set()
        self._open_warnings: tuple[str, ...] = ()
        self._conn: Any = None
        self._conn_thread: _ServerThread | None = None
        self._orphan: _ServerThread | None = None
        self._patient = False
        self._patient_timeout_s = max(_PATIENT_TIMEOUT_S, connect_timeout_s)
        self._tx: _Transaction | None = None
        self._reading = False
        self._closed = False
        self._heartbeat = Heartbeat(self._connect, heartbeat_s, lease_s)
        try:
            # Opening fails fast: a server that is not there now is an unusable audit, not a busy one.
            self._retrying(self._migrate, deadline_s=min(self._retry_deadline_s, connect_timeout_s))
            self.recover()
        except BaseException:
            self._heartbeat.close()
            self._drop_connection()
            raise

    # --- connection -------------------------------------------------------------------------------

    @property
    def location(self) -> str:
        return self._where.describe()

    def _connect(self, read_timeout_s: float | None = None) -> Any:
        """Autocommit: a lone read needs no transaction of its own (nor a round trip to end one);
        writes, recovery and snapshots open theirs with START TRANSACTION.

        Every read and write on the socket is bounded by `read_timeout_s`, shorter than the retry
        deadline: a flow cut without a reset (a dropped NAT entry, a frozen VM) otherwise leaves a
        COMMIT waiting until the deadline has passed, and it is never retried."""
        timeout = self._read_timeout_s if read_timeout_s is None else read_timeout_s
        conn = pymysql.connect(
            host=self._where.host,
            port=self._where.port,
            user=self._where.user,
            password=self._password or "",
            database=self._where.database,
            charset="utf8mb4",
            autocommit=True,
            connect_timeout=self._connect_timeout_s,
            read_timeout=timeout,
            write_timeout=timeout,
            # An UPDATE reports the rows it matched, as SQLite does, not only those it changed.
            client_flag=CLIENT.FOUND_ROWS,
        )
        with conn.cursor() as cursor:
            for statement in _SESSION_SETUP:
                cursor.execute(statement)
        return conn

    def _connection(self) -> Any:
        if self._closed:
            raise AuditStoreError(f"audit {self.location} is closed")
        if self._conn is None:
            conn = self._connect(self._patient_timeout_s if self._patient else None)
            try:
                thread = _server_thread(conn)
                orphan, self._orphan = self._orphan, None
                if orphan is not None:
                    self._reap(conn, orphan, thread)
            except BaseException:
                conn.close()
                raise
            self._conn, self._conn_thread = conn, thread
        return self._conn

    def _drop_connection(self, *, orphaned: bool = False) -> None:
        """Close the connection. `orphaned`: it failed, and its thread may live on on the server with
        an open transaction and its row locks; the next connection kills that thread first."""
        conn, self._conn = self._conn, None
        thread, self._conn_thread = self._conn_thread, None
        if orphaned and thread is not None:
            self._orphan = thread
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    def _reap(self, conn: Any, orphan: _ServerThread, current: _ServerThread) -> None:
        """KILL this store's previous connection, by its thread id, and wait until the server has let
        it go: its transaction is then rolled back or committed for good (the write token tells which)
        and its locks are free, so the retry neither waits for them nor races a late COMMIT.

        Only on the same server, in the same run of it: on another server (a fail-over behind the same
        address) or after a restart, the thread is not there and its id may be another session's. A
        thread of another account (a reused id) is refused by the server and left alone."""
        if not current.same_server_run(orphan):
            log.info(
                "audit %s: reconnected to another server; connection %s left alone", self.location, orphan
            )
            return
        with conn.cursor() as cursor:
            try:
                cursor.execute(f"KILL CONNECTION {int(orphan.thread_id)}")
            except pymysql.err.MySQLError as exc:
                if exc.args and exc.args[0] in _NOT_OUR_THREAD:
                    return
                raise
            give_up = time.monotonic() + self._connect_timeout_s
            while True:
                cursor.execute(
                    "SELECT 1 FROM information_schema.PROCESSLIST WHERE ID = %s", (orphan.thread_id,)
                )
                if cursor.fetchone() is None:
                    log.info("audit %s: killed connection %s, cut mid-transaction", self.location, orphan)
                    return
                if time.monotonic() >= give_up:
                    log.warning("audit %s: connection %s outlived its KILL", self.location, orphan)
                    return
                time.sleep(_REAP_POLL_S)

    @contextmanager
    def _patiently(self) -> Iterator[None]:
        """Maintenance (migration steps, prune batches, OPTIMIZE TABLE) may run one statement for
        longer than a write's read timeout on a healthy server: it gets a connection of its own that
        waits as long as the store always did."""
        with self._lock:
            self._drop_connection()
            self._patient = True
            try:
                yield
            finally:
                self._patient = False
                self._drop_connection()

    def _retrying(
        self,
        action: Callable[[], T],
        on_retry: Callable[[], None] | None = None,
        deadline_s: float | None = None,
    ) -> T:
        """`action`, again after conflicts and lost connections, with backoff, until the deadline."""

        def prepare_retry(exc: Exception, out_of_time: bool) -> BaseException | None:
            kind = _failure_kind(exc)
            if kind is None:
                return AuditStoreError(f"audit {self.location} failed: {exc}")
            if out_of_time:
                return AuditStoreError(f"audit {self.location} unavailable: {exc}")
            log.info("audit %s: %s, retrying", kind, exc)
            if kind == "connection":
                self._drop_connection(orphaned=True)
            else:
                self._rollback_quietly()
            if on_retry is not None:
                on_retry()
            return None

        return retry_with_backoff(
            action,
            retry_on=(pymysql.err.MySQLError, OSError),
            on_failure=prepare_retry,
            deadline_s=self._retry_deadline_s if deadline_s is None else deadline_s,
            first_delay_s=_BACKOFF_FIRST_S,
            max_delay_s=_BACKOFF_MAX_S,
        )

    def _rollback_quietly(self) -> None:
        if self._conn is None:
            return
        try:
            self._conn.rollback()
        except Exception:
            self._drop_connection(orphaned=True)

    # --- schema -------------------------------------------------------------------------------------

    def _migrate(self) -> None:
        """Bring the schema to this program's version. A current schema is only read, so an account
        whose CREATE/ALTER/INDEX grants were revoked after the first start opens it (README, "Grants")."""
        conn = self._connection()
        with conn.cursor() as cursor:
            self._refuse_foreign_objects(cursor)
            if self._schema_version_seen(cursor) == len(MIGRATIONS):
                return
        try:
            with self._patiently():
                self._migrate_under_lock(self._connection())
        except pymysql.err.MySQLError as exc:
            if not (exc.args and exc.args[0] in _SCHEMA_CHANGE_DENIED):
                raise
            # The server's words name the statement it refused; what to grant is the README's.
            raise AuditStoreError(
                f"audit {self.location}: the account {self._where.user!r} may not create or migrate the "
                f"audit's tables ({exc.args[1]}); grant it CREATE, ALTER, INDEX and REFERENCES on "
                f'{self._where.database}.* for this start, as README "Grants" shows, or run this start '
                "as an administrator"
            ) from None

    def _migrate_under_lock(self, conn: Any) -> None:
        lock = migration_lock_name(self._where.database)
        with conn.cursor() as cursor:
            cursor.execute("SELECT GET_LOCK(%s, %s)", (lock, MIGRATION_LOCK_TIMEOUT_S))
            if cursor.fetchone()[0] != 1:
                raise AuditStoreError(f"audit {self.location}: another process holds the migration lock")
            try:
                cursor.execute(VERSION_TABLE)
                version = self._schema_version_seen(cursor)
                for target, migration in enumerate(MIGRATIONS[version:], start=version + 1):
                    migration(cursor.execute)
                    cursor.execute(
                        "INSERT INTO audit_schema_version (id, version) VALUES (1, %s)"
                        " ON DUPLICATE KEY UPDATE version = VALUES(version)",
                        (target,),
                    )
                    conn.commit()
            finally:
                cursor.execute("SELECT RELEASE_LOCK(%s)", (lock,))
                conn.commit()

    def _refuse_foreign_objects(self, cursor: Any) -> None:
        checked = foreign_objects(cursor)
        found = checked.found
        if found:
            raise AuditStoreError(
                f"audit {self.location} holds what this program did not create ({', '.join(found[:5])}"
                f"{f' and {len(found) - 5} more' if len(found) > 5 else ''}); refusing to use it"
            )
        if "events" in checked.unseen:
            warning = (
                f"audit {self.location}: events in its database could not be checked (the account lacks the"
                ' EVENT privilege there, see README "Grants"): an event another account planted would'
                " go unseen"
            )
            log.warning("%s", warning)
            self._open_warnings = (warning,)

    @property
    def open_warnings(self) -> tuple[str, ...]:
        """What the check of the database's objects at open could not see (`foreign_objects`)."""
        return self._open_warnings

    def _schema_version_seen(self, cursor: Any) -> int:
        """The stored version (0 before the first migration); a newer one is refused."""
        try:
            cursor.execute("SELECT version FROM audit_schema_version WHERE id = 1")
        except pymysql.err.ProgrammingError as exc:
            if exc.args and exc.args[0] == _NO_SUCH_TABLE:
                return 0
            raise
        row = cursor.fetchone()
        version = int(row[0]) if row else 0
        if version > len(MIGRATIONS):
            raise AuditStoreError(
                f"audit {self.location} has schema version {version}, newer than this program "
                f"understands ({len(MIGRATIONS)})"
            )
        return version

    # --- writes -------------------------------------------------------------------------------------

    def _in_transaction(self) -> bool:
        return self._tx is not None

    def _run_closed_elsewhere(self, run_id: str | None) -> bool:
        """A row of a leased run rides only in a transaction that still holds the run's lease
        (`keep_lease`): a run whose lease recovery elsewhere took is closed."""
        return run_id in self._lost

    @contextmanager
    def write(self) -> Iterator[_Transaction]:
        """One committed transaction, queued writes first; any failure surfaces as `AuditStoreError`."""
        with self._lock:
            if self._tx is not None:  # nested: part of the caller's transaction
                yield self._tx
                return
            pending = self._take_queue()
            tx = _Transaction(self)
            self._tx = tx
            committed = False
            try:
                self._retrying(lambda: self._begin(tx))
                self._keep_queued_leases(tx, pending)
                self._apply_queue(tx, pending)
                yield tx
                self._retrying(lambda: self._commit(tx), on_retry=lambda: setattr(tx, "broken", True))
                committed = True
            except (pymysql.err.MySQLError, OSError) as exc:
                raise AuditStoreError(f"audit write to {self.location} failed: {exc}") from exc
            finally:
                self._tx = None
                if not committed:
                    self._rollback_quietly()
                    self._requeue(pending)
            for callback in tx.on_commit:
                callback()

    def _begin(self, tx: _Transaction) -> None:
        """Start (or restart, replaying what ran before) `tx` on a live connection."""
        conn = self._connection()
        with conn.cursor() as cursor:
            cursor.execute("START TRANSACTION")
            cursor.execute(
                "INSERT INTO audit_write_tokens (token, at) VALUES (%s, UTC_TIMESTAMP(6))", (tx.token,)
            )
            for sql, params, rowcount in tx.statements:
                if cursor.execute(sql, params) != rowcount:
                    raise AuditStoreError(
                        f"audit write to {self.location} could not be repeated after a lost connection:"
                        " the rows changed meanwhile"
                    )
        tx.broken = False

    def _statement(self, tx: _Transaction, sql: str, params: tuple[Any, ...]) -> int:
        def run() -> int:
            if tx.broken:
                self._begin(tx)
            with self._connection().cursor() as cursor:
                return int(cursor.execute(sql, params))

        rowcount = self._retrying(run, on_retry=lambda: setattr(tx, "broken", True))
        tx.statements.append((sql, params, rowcount))
        return rowcount

    def _commit(self, tx: _Transaction) -> None:
        if tx.broken:
            if tx.commit_sent and self._token_committed(tx.token):
                return  # the connection dropped after the server committed
            self._begin(tx)
        tx.commit_sent = True
        self._connection().commit()

    def _token_committed(self, token: str) -> bool:
        with self._connection().cursor() as cursor:
            cursor.execute("SELECT 1 FROM audit_write_tokens WHERE token = %s", (token,))
            found = cursor.fetchone() is not None
        self._connection().rollback()
        return found

    def hold_lease(self, run_id: str) -> None:
        """Inside the transaction that records the run's start: take its lease, beat once committed."""
        tx = self._require_tx()
        tx.execute(TAKE_SQL, (run_id, self._heartbeat.holder, self._heartbeat.lease_us))
        tx.on_commit.append(lambda: self._heartbeat.hold(run_id))

    def keep_lease(self, run_id: str) -> None:
        """Inside a transaction that writes rows of a run this process leased: renew the lease, which
        locks its row until the commit, or raise `AuditLeaseLost` if recovery elsewhere took it."""
        tx = self._require_tx()
        if run_id in tx.leases_kept:
            return
        if run_id in self._lost or tx.execute(KEEP_SQL, self._lease_params(run_id)).rowcount != 1:
            self._lose(run_id)
            raise AuditLeaseLost(
                f"audit {self.location}: run {run_id} lost its lease: another opener's recovery closed it"
                " as interrupted while this process was away (paused or cut off for longer than lease_s)"
            )
        tx.leases_kept.add(run_id)

    def _keep_queued_leases(self, tx: _Transaction, pending: list[QueuedWrite]) -> None:
        """Before queued rows are written: the lease of each leased run they belong to. A run that lost
        it has its rows dropped (it is closed); the rows of the others are still written."""
        for run_id in sorted({q.run_id for q in pending if q.run_id and self._heartbeat.holds(q.run_id)}):
            # A lost lease: the run's own next write (a tool's start, its finish) raises it to the run.
            with contextlib.suppress(AuditLeaseLost):
                self.keep_lease(run_id)

    def _lease_params(self, run_id: str) -> tuple[Any, ...]:
        return (self._heartbeat.lease_us, run_id, self._heartbeat.holder)

    def _lose(self, run_id: str) -> None:
        if run_id not in self._lost:
            log.warning("audit %s: run %s lost its lease; its queued rows are dropped", self.location, run_id)
        self._lost.add(run_id)
        self._heartbeat.release(run_id)
        self._deferred = [queued for queued in self._deferred if queued.run_id != run_id]

    def release_lease(self, run_id: str) -> None:
        """Inside the transaction that records the run's end: a finished run needs no lease."""
        tx = self._require_tx()
        tx.execute(RELEASE_SQL, (run_id,))
        tx.on_commit.append(lambda: self._heartbeat.release(run_id))

    def _require_tx(self) -> _Transaction:
        if self._tx is None:
            raise AuditStoreError("a run lease is taken and released only inside a write transaction")
        return self._tx

    # --- reads --------------------------------------------------------------------------------------

    @contextmanager
    def read(self) -> Iterator[MysqlAuditStore]:
        """Several queries over one consistent snapshot."""
        self.flush()
        with self._lock:
            if self._tx is not None or self._reading:
                yield self
                return
            try:
                conn = self._retrying(self._connection)
                with conn.cursor() as cursor:
                    cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                    cursor.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")
            except (pymysql.err.MySQLError, OSError) as exc:
                raise AuditStoreError(f"audit read of {self.location} failed: {exc}") from exc
            self._reading = True
            try:
                yield self
            finally:
                self._reading = False
                self._rollback_quietly()

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        """Rows as dicts; `sql` in the audit's SQLite dialect (audit.mysql_dialect)."""
        self.flush()
        statement, args = to_mysql(sql), tuple(params)

        def run() -> list[dict[str, Any]]:
            with self._connection().cursor(pymysql.cursors.DictCursor) as cursor:
                cursor.execute(statement, args)
                return list(cursor.fetchall())

        with self._lock:
            if self._tx is not None or self._reading:  # inside a transaction: no silent reconnect
                try:
                    return run()
                except (pymysql.err.MySQLError, OSError) as exc:
                    raise AuditStoreError(f"audit read of {self.location} failed: {exc}") from exc
            return self._retrying(run)

    # --- maintenance --------------------------------------------------------------------------------

    def recover(self) -> list[str]:
        """Close the runs whose lease expired (their writer crashed or lost the server); returns their IDs.

        Like the file's recovery: finished_at = now and interrupted = 1, outcome and stop_reason NULL,
        STARTED invocations INTERRUPTED. A run whose writer still renews its lease is never touched,
        whichever host it runs on. A run without a lease row (copied from elsewhere unfinished) has no
        writer here to renew one, so it is closed too.
        """
        with self._lock:
            self.flush()
            return self._retrying(self._recover_once)

    def _recover_once(self) -> list[str]:
        """One recovery transaction that never waits for another connection's row locks.

        A writer whose connection was cut mid-transaction leaves an orphan on the server that keeps its
        locks until the server notices (up to `wait_timeout`); a locking read waiting for it would hold
        every opener. So the candidates come from a plain read, and only rows nobody holds are locked
        (SKIP LOCKED): a run whose row or lease row another transaction holds is being written (its
        writer, or that writer's orphan) and is left for a later recovery.
        """
        now = audit_timestamp(datetime.now(UTC))
        conn = self._connection()
        with conn.cursor() as cursor:
            cursor.execute("START TRANSACTION")
            cursor.execute(
                "SELECT r.run_id FROM runs r LEFT JOIN run_leases l ON l.run_id = r.run_id"
                " WHERE r.finished_at IS NULL AND (l.run_id IS NULL OR l.expires_at < UTC_TIMESTAMP(6))"
            )
            dead = self._lock_dead_runs(cursor, [str(row[0]) for row in cursor.fetchall()])
            if dead:
                marks = ", ".join(["%s"] * len(dead))
                cursor.execute(
                    f"UPDATE invocations SET status = %s, finished_at = %s"
                    f" WHERE status = %s AND run_id IN ({marks})",
                    (InvocationStatus.INTERRUPTED, now, InvocationStatus.STARTED, *dead),
                )
                cursor.execute(
                    f"UPDATE runs SET finished_at = %s, interrupted = 1"
                    f" WHERE finished_at IS NULL AND run_id IN ({marks})",
                    (now, *dead),
                )
                cursor.execute(f"DELETE FROM run_leases WHERE run_id IN ({marks})", tuple(dead))
                # Closed, a run's text can change no more: its rows enter the text index, as at a finish.
                self.text_search.index_runs(_CursorStatements(cursor), dead)
            # By key, after picking them without waiting: a range DELETE waits for the newest token,
            # which an orphaned transaction may hold.
            cursor.execute(
                f"SELECT token FROM audit_write_tokens WHERE at < UTC_TIMESTAMP(6) - {_TOKEN_RETENTION}"
                " LIMIT 10000 FOR UPDATE SKIP LOCKED"
            )
            expired = [str(row[0]) for row in cursor.fetchall()]
            if expired:
                marks = ", ".join(["%s"] * len(expired))
                cursor.execute(f"DELETE FROM audit_write_tokens WHERE token IN ({marks})", tuple(expired))
        conn.commit()
        return dead

    @staticmethod
    def _lock_dead_runs(cursor: Any, candidates: list[str]) -> list[str]:
        """Of `candidates` (unfinished, lease expired or absent in a plain read), those whose run row and
        lease row this transaction could lock and that are dead under the lock.

        Not one locking join: SKIP LOCKED would drop a held lease row from the join, and the run would
        look as if it had no lease at all. So a lease row is read twice: locked (skipping one in use)
        and plainly (it exists); a lease that exists but could not be locked is in use, so its run lives.
        """
        if not candidates:
            return []
        marks = ", ".join(["%s"] * len(candidates))
        cursor.execute(
            f"SELECT run_id FROM runs WHERE run_id IN ({marks}) AND finished_at IS NULL"
            " FOR UPDATE SKIP LOCKED",
            tuple(candidates),
        )
        locked = [str(row[0]) for row in cursor.fetchall()]
        if not locked:
            return []
        marks = ", ".join(["%s"] * len(locked))
        cursor.execute(
            f"SELECT run_id, expires_at < UTC_TIMESTAMP(6) FROM run_leases WHERE run_id IN ({marks})"
            " FOR UPDATE SKIP LOCKED",
            tuple(locked),
        )
        expired = {str(run_id): bool(gone) for run_id, gone in cursor.fetchall()}
        cursor.execute(f"SELECT run_id FROM run_leases WHERE run_id IN ({marks})", tuple(locked))
        leased = {str(row[0]) for row in cursor.fetchall()}
        return [run_id for run_id in locked if run_id not in leased or expired.get(run_id, False)]

    @contextmanager
    def _pruning(self) -> Iterator[None]:
        with self._lock:
            self.flush()
            with self._patiently():
                yield

    def _prune_batch(self, cutoff: str, limit: int) -> dict[str, int] | None:
        """One transaction, retried as a whole after conflicts and lost connections."""

        def batch() -> dict[str, int] | None:
            conn = self._connection()
            with conn.cursor() as cursor:
                cursor.execute("START TRANSACTION")
                cursor.execute(
                    "SELECT run_id FROM runs WHERE finished_at < %s ORDER BY finished_at LIMIT %s FOR UPDATE",
                    (cutoff, limit),
                )
                ids = [row[0] for row in cursor.fetchall()]
                deleted = None
                if ids:
                    marks = ", ".join(["%s"] * len(ids))
                    deleted = {
                        table: cursor.execute(f"DELETE FROM {table} WHERE run_id IN ({marks})", ids)
                        for table in PRUNED_TABLES
                    }
            conn.commit()
            return deleted

        return self._retrying(batch)

    def vacuum(self) -> None:
        """Give freed pages back: InnoDB rebuilds each table (OPTIMIZE TABLE)."""
        with self._lock:
            self.flush()

            def optimize() -> None:
                with self._connection().cursor() as cursor:
                    cursor.execute("OPTIMIZE TABLE runs, model_rounds, invocations, protocol_events")
                    cursor.fetchall()

            with self._patiently():
                self._retrying(optimize)

    def _release(self) -> None:
        self._closed = True
        self._heartbeat.close()
        self._drop_connection()
