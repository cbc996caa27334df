"""The local SQLite audit database (docs/contracts.md, "Audit"): schema, migrations, short write
transactions, reads.

The audit is a required record of what the agent touched, so opening it never degrades silently: a
corrupt file, a newer schema or an unwritable location raises `AuditStoreError` before any run starts.
Several processes (headless runs, the console) may share one file: writes take the write lock up
front (`BEGIN IMMEDIATE`) and retry with bounded backoff, so a busy file delays a write instead of
losing it. Opening a file also closes what crashed processes left open (see `SqliteAuditStore.recover`).
"""

from __future__ import annotations

import functools
import logging
import os
import sqlite3
import stat
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import sqlite_utils
from sqlite_utils.db import NotFoundError, TransactionError

from agent.vocabulary import InvocationStatus
from audit.common import RUN_LISTED_AT, RUN_SETUP_COLUMNS, AuditStoreError, audit_timestamp
from audit.files import (
    PRIVATE_FILE,
    UnsafeFileError,
    check_private,
    make_last_folder,
    open_private,
    private_state_dir,
)
from audit.liveness import is_process_live
from audit.location import SqliteLocation, default_audit_path, local_files
from audit.port import TextSearch
from audit.retry import retry_with_backoff
from audit.sqlite.text_search import FTS_COLUMNS, Fts5TextSearch, NoTextIndex, index_finished_runs, rebuild
from audit.store_base import PRUNED_TABLES, AuditStoreBase

log = logging.getLogger(__name__)

T = TypeVar("T")

Migration = Callable[[sqlite_utils.Database], None]

# SQLite's own busy handler waits this long per attempt; the retry loop around BEGIN IMMEDIATE adds
# attempts with backoff up to _BUSY_DEADLINE_S, so contention slows a write down but never fails it.
_BUSY_TIMEOUT_MS = 2000
_BUSY_DEADLINE_S = 60.0
_SQLITE_HEADER = b"SQLite format 3\x00"
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_SQLITE_STATISTICS = frozenset({"sqlite_stat1", "sqlite_stat2", "sqlite_stat3", "sqlite_stat4"})


def _is_busy(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def _unless_busy(exc: sqlite3.OperationalError, out_of_time: bool) -> BaseException | None:
    """Another connection holds the lock: wait for it, until the deadline; any other error stands."""
    return exc if out_of_time or not _is_busy(exc) else None


def _retry_busy(action: Callable[[], T]) -> T:
    """Run `action`, retrying while another connection holds the lock, with jittered backoff."""
    return retry_with_backoff(
        action,
        retry_on=sqlite3.OperationalError,
        on_failure=_unless_busy,
        deadline_s=_BUSY_DEADLINE_S,
        first_delay_s=0.005,
        max_delay_s=0.25,
    )


def trigram_available() -> bool:
    """FTS5 with the trigram tokenizer (SQLite >= 3.34) indexes any script, Chinese included."""
    probe = sqlite3.connect(":memory:")
    try:
        probe.execute("CREATE VIRTUAL TABLE probe USING fts5(x, tokenize='trigram')")
    except sqlite3.Error:
        return False
    finally:
        probe.close()
    return True


def _v1_initial_schema(db: sqlite_utils.Database) -> None:
    # Spelled out, not read from InvocationStatus: a shipped migration must never change.
    statuses = "'STARTED', 'FOUND', 'EMPTY', 'ERROR', 'CANCELLED', 'INTERRUPTED'"
    statements = [
        """CREATE TABLE runs (
            run_id TEXT PRIMARY KEY,
            session_id TEXT NOT NULL,
            query TEXT,
            outcome TEXT,
            stop_reason TEXT,
            started_at TEXT,
            finished_at TEXT,
            model_calls INTEGER,
            prompt_tokens INTEGER,
            completion_tokens INTEGER,
            total_tokens INTEGER,
            result_json TEXT,
            failure_json TEXT,
            pid INTEGER
        )""",
        """CREATE TABLE model_rounds (
            run_id TEXT NOT NULL,
            round INTEGER NOT NULL,
            started_at TEXT,
            finished_at TEXT,
            prompt_tokens INTEGER,
            completion_tokens INTEGER,
            tool_call_ids TEXT,
            has_text INTEGER,
            duration_ms INTEGER,
            PRIMARY KEY (run_id, round)
        )""",
        f"""CREATE TABLE invocations (
            run_id TEXT NOT NULL,
            tool_call_id TEXT NOT NULL,
            session_id TEXT NOT NULL,
            tool TEXT NOT NULL,
            round INTEGER,
            status TEXT NOT NULL CHECK (status IN ({statuses})),
            error_code TEXT,
            reason TEXT,
            input_json TEXT,
            projection_json TEXT,
            evaluation TEXT,
            started_at TEXT NOT NULL,
            finished_at TEXT,
            duration_ms INTEGER,
            PRIMARY KEY (run_id, tool_call_id)
        )""",
        """CREATE TABLE protocol_events (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            run_id TEXT NOT NULL,
            tool_call_id TEXT,
            code TEXT NOT NULL,
            detail_json TEXT,
            at TEXT NOT NULL
        )""",
        "CREATE INDEX idx_invocations_run ON invocations (run_id)",
        "CREATE INDEX idx_invocations_tool_status_started ON invocations (tool, status, started_at)",
        "CREATE INDEX idx_invocations_started ON invocations (started_at)",
        "CREATE INDEX idx_runs_started ON runs (started_at)",
        "CREATE INDEX idx_protocol_events_run ON protocol_events (run_id)",
    ]
    for statement in statements:
        db.execute(statement)


def _fts_statements(table: str, columns: Sequence[str]) -> list[str]:
    """An external-content FTS5 index kept in sync by triggers, named the way sqlite-utils and Datasette
    expect (`<table>_fts`, `content="<table>"`), so both offer search on the file as it is. (Schema v5
    drops the insert and update triggers: audit.sqlite.text_search fills the index a run at a time.)"""
    fts = f"{table}_fts"
    cols = ", ".join(columns)
    new = ", ".join(f"new.{c}" for c in columns)
    old = ", ".join(f"old.{c}" for c in columns)
    insert = f"INSERT INTO {fts} (rowid, {cols}) VALUES (new.rowid, {new});"
    delete = f"INSERT INTO {fts} ({fts}, rowid, {cols}) VALUES ('delete', old.rowid, {old});"
    return [
        f"""CREATE VIRTUAL TABLE {fts} USING fts5({cols}, tokenize='trigram', content="{table}")""",
        f"CREATE TRIGGER {table}_ai AFTER INSERT ON {table} BEGIN {insert} END",
        f"CREATE TRIGGER {table}_ad AFTER DELETE ON {table} BEGIN {delete} END",
        # Only the indexed columns: status and evaluation updates must not re-tokenize the row.
        f"CREATE TRIGGER {table}_au AFTER UPDATE OF {cols} ON {table} BEGIN {delete} {insert} END",
        f"INSERT INTO {fts} ({fts}) VALUES ('rebuild')",
    ]


def _v2_browse_and_recovery(db: sqlite_utils.Database) -> None:
    """Browse indexes (every filter walks an index in page order), text search, crash recovery columns.

    Each invocation index ends in the page order (started_at, run_id, tool_call_id), so a filtered
    page is an index range scan that stops after `limit` rows, never a sort.
    """
    order = "started_at, run_id, tool_call_id"
    statements = [
        "ALTER TABLE runs ADD COLUMN pid_start TEXT",  # process start marker, see audit.liveness
        "ALTER TABLE runs ADD COLUMN interrupted INTEGER NOT NULL DEFAULT 0",
        # Event seq (docs/contracts.md, "Run events") orders a run's timeline exactly, even when
        # timestamps tie.
        "ALTER TABLE model_rounds ADD COLUMN seq INTEGER",
        "ALTER TABLE invocations ADD COLUMN seq INTEGER",
        "ALTER TABLE protocol_events ADD COLUMN seq INTEGER",
        "DROP INDEX idx_invocations_run",
        "DROP INDEX idx_invocations_tool_status_started",
        "DROP INDEX idx_invocations_started",
        "DROP INDEX idx_runs_started",
        f"CREATE INDEX idx_invocations_started ON invocations ({order})",
        "CREATE INDEX idx_invocations_run ON invocations (run_id, started_at, tool_call_id)",
        f"CREATE INDEX idx_invocations_tool_status_started ON invocations (tool, status, {order})",
        f"CREATE INDEX idx_invocations_tool_started ON invocations (tool, {order})",
        f"CREATE INDEX idx_invocations_status_started ON invocations (status, {order})",
        f"CREATE INDEX idx_invocations_error_started ON invocations (error_code, {order})",
        f"CREATE INDEX idx_invocations_session_started ON invocations (session_id, {order})",
        f"CREATE INDEX idx_runs_started ON runs ({RUN_LISTED_AT}, run_id)",
        f"CREATE INDEX idx_runs_session_started ON runs (session_id, {RUN_LISTED_AT}, run_id)",
        f"CREATE INDEX idx_runs_outcome_started ON runs (outcome, {RUN_LISTED_AT}, run_id)",
        f"CREATE INDEX idx_runs_interrupted ON runs ({RUN_LISTED_AT}, run_id) WHERE interrupted = 1",
        "CREATE INDEX idx_runs_unfinished ON runs (run_id) WHERE finished_at IS NULL",
        "CREATE INDEX idx_runs_finished ON runs (finished_at)",
    ]
    if trigram_available():  # else text search falls back to LIKE scans (audit.browse)
        for table, columns in FTS_COLUMNS.items():
            statements += _fts_statements(table, columns)
    for statement in statements:
        db.execute(statement)


def _v3_estimated_usage_and_input_keys(db: sqlite_utils.Database) -> None:
    """Two facts the run knows and the audit did not keep.

    `model_rounds.usage_estimated`: the provider did not report usable usage, so the round was counted
    from the bytes sent and received (nobody should read an estimate as a provider's bill).
    `invocations.input_key`: the canonical business input (tools.canonical), equal for equivalent
    calls however the model spelled them; NULL for invocations recorded before it existed.
    """
    db.execute("ALTER TABLE model_rounds ADD COLUMN usage_estimated INTEGER NOT NULL DEFAULT 0")
    db.execute("ALTER TABLE invocations ADD COLUMN input_key TEXT")


def _v4_run_model_and_limits(db: sqlite_utils.Database) -> None:
    """What a replay needs to say which model ran and within which limits.

    Until v4 a replay showed `model: not recorded` and limits as `4 / —`. The columns are NULL for runs
    recorded before them (nobody knows those values any more). Columns that already exist are left
    alone, so the step is safe to run again on a file another program version half-migrated.
    """
    existing = {row[1] for row in db.execute("PRAGMA table_info(runs)").fetchall()}
    for column, kind in RUN_SETUP_COLUMNS.items():
        if column not in existing:
            db.execute(f"ALTER TABLE runs ADD COLUMN {column} {kind}")


def _v5_text_index_at_run_end(db: sqlite_utils.Database) -> None:
    """Text search leaves the run's hot path (audit.sqlite.text_search): no insert or update triggers on the
    indexed tables; a run is indexed in one batch when it finishes or recovery closes it.

    `runs.fts_pending` marks a run whose rows are not indexed yet (NULL: indexed, or nothing to index,
    as for every run recorded before v5, which its triggers indexed). Delete triggers stay, so pruned
    rows leave the index. Each step checks what exists, so it is safe to run again.
    """
    existing = {row[1] for row in db.execute("PRAGMA table_info(runs)").fetchall()}
    if "fts_pending" not in existing:
        db.execute("ALTER TABLE runs ADD COLUMN fts_pending INTEGER")
    db.execute(
        "CREATE INDEX IF NOT EXISTS idx_runs_fts_pending ON runs (run_id) WHERE fts_pending IS NOT NULL"
    )
    for table in FTS_COLUMNS:
        db.execute(f"DROP TRIGGER IF EXISTS {table}_ai")
        db.execute(f"DROP TRIGGER IF EXISTS {table}_au")


# Append-only: migration N (1-based) brings a file from user_version N-1 to N. Never edit a shipped one.
MIGRATIONS: list[Migration] = [
    _v1_initial_schema,
    _v2_browse_and_recovery,
    _v3_estimated_usage_and_input_keys,
    _v4_run_model_and_limits,
    _v5_text_index_at_run_end,
]


@dataclass(frozen=True)
class _SchemaObject:
    type: str
    name: str
    table: str
    sql: str


def _normalized(sql: str | None) -> str:
    return " ".join((sql or "").split())


def _schema_objects(conn: sqlite3.Connection) -> dict[str, _SchemaObject]:
    rows = conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master").fetchall()
    return {
        str(name): _SchemaObject(str(kind), str(name), str(table), _normalized(sql))
        for kind, name, table, sql in rows
    }


@functools.cache
def _reference_schema(version: int) -> dict[str, _SchemaObject]:
    """What our own migrations 1..version create, built once in memory."""
    reference = sqlite_utils.Database(memory=True)
    for migration in MIGRATIONS[:version]:
        migration(reference)
    return _schema_objects(reference.conn)


def check_schema_objects(conn: sqlite3.Connection, path: Path) -> None:
    """Refuse a file holding schema objects this program did not create.

    Triggers run on every write (a planted one could copy audit rows elsewhere or never end) and views
    run whatever they select, so each must be exactly one of ours; an unknown table or index means the
    file is not (only) an audit, so it is not ours to write to. Nothing is written before this check.
    """
    conn.execute("BEGIN")  # version and objects from one snapshot: another process may be migrating
    try:
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        objects = _schema_objects(conn)
    finally:
        conn.execute("COMMIT")
    if version > len(MIGRATIONS):
        return  # a newer schema: refused by the version check, with the better message
    reference = _reference_schema(version)
    for found in objects.values():
        expected = reference.get(found.name)
        if found.name.startswith("sqlite_autoindex_") and found.table in reference:
            continue
        if found.type == "table" and found.name in _SQLITE_STATISTICS:
            continue  # ANALYZE's statistics (sqlite3, Datasette): data for the planner, never code
        ours = (
            expected is not None
            and expected.type == found.type
            and expected.table == found.table
            and (
                (found.type in ("table", "index") and not found.sql.startswith("CREATE VIRTUAL"))
                or expected.sql == found.sql
            )
        )
        if not ours:
            raise AuditStoreError(
                f"audit database {path} holds a {found.type} this program did not create "
                f"({found.name!r} on {found.table!r}); refusing to use it"
            )


class SqliteAuditStore(AuditStoreBase):
    """One open audit database file.

    Every write is a short transaction committed at once (WAL, synchronous=NORMAL), so a crash mid-run
    still leaves the STARTED invocation on disk; rows that prove nothing on their own are queued with
    `defer` and ride in the next such commit. WAL lets the console browse while a run writes.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        super().__init__()
        self.path = Path(path)
        # Descriptors of the audit's files opened to check them, held until the connection closes:
        # closing any descriptor of a file drops every POSIX lock this process holds on it, SQLite's too
        # (another process could then reset the WAL index under this connection).
        self._held: dict[Path, int] = {}
        try:
            checked = self._create_private_file()
            conn = sqlite3.connect(str(self.path), check_same_thread=False)
        except sqlite3.Error as exc:
            self._release_held()
            raise AuditStoreError(f"cannot open audit database {self.path}: {exc}") from exc
        except BaseException:
            self._release_held()
            raise
        try:
            self._same_file(checked)
            self.db = sqlite_utils.Database(conn)
            # Nothing in the file may run (triggers fire on writes) before its schema is known to be
            # ours. (`trusted_schema=OFF` is no substitute: our own FTS delete triggers need it on.)
            self._pragma(f"busy_timeout={_BUSY_TIMEOUT_MS}")
            _retry_busy(lambda: check_schema_objects(conn, self.path))
            self._tighten()
            self._configure()
            self._migrate()
            self.has_fts = self._table_exists("invocations_fts") and self._table_exists("runs_fts")
            self.text_search: TextSearch = Fts5TextSearch() if self.has_fts else NoTextIndex()
            self.recover()
        except (sqlite3.Error, TransactionError) as exc:
            conn.close()
            self._release_held()
            raise AuditStoreError(f"audit database {self.path} is unusable: {exc}") from exc
        except AuditStoreError:
            conn.close()
            self._release_held()
            raise

    def _create_private_file(self) -> os.stat_result:
        """Create a new audit file exclusively, owner-only, before SQLite touches it; or check an
        existing one without changing it.

        An existing file (and the -wal/-shm/-journal files SQLite keeps next to it) must be a regular
        file of ours, reached without a symbolic link, and the file itself a SQLite database (or empty:
        one created here and left before its first page was written). Anything else is refused as it
        is: no mode is tightened until the schema check knows the file is an audit (`_tighten`).
        Only the last folder of an operator's path is created; the program's own state folder whole.
        """
        try:
            if self.path == default_audit_path():
                private_state_dir(self.path.parent, ours=True)
            else:
                make_last_folder(self.path.parent)
        except OSError as exc:
            raise AuditStoreError(f"cannot create audit database {self.path}: {exc}") from None
        if self.path.is_symlink():
            raise AuditStoreError(f"audit database {self.path} is a symbolic link; give the real path")
        if self.path.exists() and not self.path.is_file():
            raise AuditStoreError(f"audit database {self.path} is not a regular file")
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, PRIVATE_FILE)
        except FileExistsError:
            fd = None
        except OSError as exc:
            reason = exc.strerror or exc
            raise AuditStoreError(f"cannot create audit database {self.path}: {reason}") from None
        if fd is None:
            fd = self._open_existing(self.path)
            if os.read(fd, len(_SQLITE_HEADER)) not in (b"", _SQLITE_HEADER):
                raise AuditStoreError(
                    f"audit database {self.path} is unusable: not a SQLite file (it was left as it is)"
                )
        else:
            self._held[self.path] = fd
        checked = os.fstat(fd)
        for side in local_files(SqliteLocation(self.path))[1:]:
            if os.path.lexists(side):
                self._open_existing(side)
        # SQLite opens an unwritable file read-only without complaint and fails only on the first write.
        if not os.access(self.path, os.R_OK | os.W_OK) or not os.access(self.path.parent, os.W_OK | os.X_OK):
            raise AuditStoreError(f"audit database {self.path} is not writable")
        return checked

    def _open_existing(self, name: Path) -> int:
        """An existing file of the audit, read-only and held: a regular file of ours, its mode left
        as it is."""
        try:
            fd = open_private(name, os.O_RDONLY, tighten=False)
        except UnsafeFileError as exc:
            raise AuditStoreError(f"cannot use audit database {self.path}: {exc}") from None
        self._held[name] = fd
        return fd

    def _tighten(self) -> None:
        """Once the file is known to be an audit: it and its side files are owner-only (0600), changed
        through descriptors opened without following a link (SQLite may have just created a side file
        with the audit's old mode)."""
        for name in local_files(SqliteLocation(self.path)):
            fd = self._held.get(name)
            if fd is None:
                if not os.path.lexists(name):
                    continue
                try:
                    fd = self._open_existing(name)
                except AuditStoreError:
                    if os.path.lexists(name):
                        raise
                    continue  # gone again (SQLite deletes its journal)
            try:
                check_private(fd, name)
            except UnsafeFileError as exc:
                raise AuditStoreError(f"cannot use audit database {self.path}: {exc}") from None

    def _release_held(self) -> None:
        """Close the descriptors `_create_private_file` and `_tighten` held (the connection is closed)."""
        held, self._held = self._held, {}
        for fd in held.values():
            os.close(fd)

    def _same_file(self, checked: os.stat_result) -> None:
        """SQLite opened the path itself: it must still be the checked file, not a swapped-in link."""
        now = os.lstat(self.path)
        if stat.S_ISLNK(now.st_mode) or (now.st_dev, now.st_ino) != (checked.st_dev, checked.st_ino):
            raise AuditStoreError(f"audit database {self.path} was replaced while it was being opened")

    def _configure(self) -> None:
        # The busy timeout comes first: switching to WAL needs a lock another opener may hold.
        self._pragma(f"busy_timeout={_BUSY_TIMEOUT_MS}")
        mode = _retry_busy(lambda: self._pragma("journal_mode=WAL"))
        if str(mode).lower() != "wal":
            raise AuditStoreError(f"audit database {self.path} cannot use WAL (journal_mode={mode})")
        self._pragma("synchronous=NORMAL")

    def _pragma(self, pragma: str) -> Any:
        row = self.db.execute(f"PRAGMA {pragma}").fetchone()
        return row[0] if row else None

    def _table_exists(self, name: str) -> bool:
        return bool(self.db.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (name,)).fetchone())

    def hold_lease(self, run_id: str) -> None:
        """Nothing to hold: a file's recovery tells live runs by their process (audit.liveness)."""

    def keep_lease(self, run_id: str) -> None:
        """Nothing to keep: the file's recovery never closes the run of a live process, paused or not."""

    def release_lease(self, run_id: str) -> None:
        """Nothing to release (see `hold_lease`)."""

    @property
    def open_warnings(self) -> tuple[str, ...]:
        """Nothing the file's checks at open could not see (`AuditStore.open_warnings`)."""
        return ()

    @property
    def location(self) -> str:
        """The file, for people (audit.port.AuditStore)."""
        return str(self.path)

    @property
    def schema_version(self) -> int:
        return int(self._pragma("user_version"))

    def _check_version(self, version: int) -> None:
        if version > len(MIGRATIONS):
            raise AuditStoreError(
                f"audit database {self.path} has schema version {version}, newer than this program "
                f"understands ({len(MIGRATIONS)})"
            )

    def _migrate(self) -> None:
        self._check_version(self.schema_version)
        if self.schema_version == len(MIGRATIONS):
            return
        with self.write():
            version = self.schema_version  # again under the write lock: another opener may have migrated
            self._check_version(version)
            for target, migration in enumerate(MIGRATIONS[version:], start=version + 1):
                migration(self.db)
                self.db.execute(f"PRAGMA user_version = {target}")

    def _in_transaction(self) -> bool:
        try:
            return self.db.conn.in_transaction
        except sqlite3.ProgrammingError:  # closed under us: the write that follows says so, typed
            return False

    @contextmanager
    def write(self) -> Iterator[sqlite_utils.Database]:
        """One committed transaction, queued writes first; any failure surfaces as `AuditStoreError`.

        The write lock is taken at BEGIN, where waiting is safe: a deferred transaction that upgrades
        to a writer later can fail with SQLITE_BUSY that no amount of waiting resolves.
        """
        with self._lock, self._mapped_errors("write"):
            conn = self.db.conn
            if conn.in_transaction:  # nested: part of the caller's transaction
                with self.db.atomic():
                    yield self.db
                return
            _retry_busy(lambda: conn.execute("BEGIN IMMEDIATE"))
            pending = self._take_queue()
            committed = False
            try:
                if pending:
                    self._apply_queue(conn, pending)
                    # The queued rows are sound on their own: a failing body must not take them along.
                    conn.execute("SAVEPOINT body")
                    try:
                        yield self.db
                    except BaseException:
                        conn.execute("ROLLBACK TO body")
                        conn.execute("COMMIT")
                        committed = True
                        raise
                else:
                    yield self.db
                conn.execute("COMMIT")
                committed = True
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                if not committed:
                    self._requeue(pending)
                raise

    @contextmanager
    def read(self) -> Iterator[sqlite_utils.Database]:
        """Several queries over one consistent snapshot (a run's timeline must not mix two moments)."""
        self.flush()
        with self._lock, self._mapped_errors("read"):
            conn = self.db.conn
            if conn.in_transaction:
                yield self.db
                return
            conn.execute("BEGIN")
            try:
                yield self.db
            finally:
                if conn.in_transaction:
                    conn.execute("COMMIT")

    @contextmanager
    def _mapped_errors(self, what: str) -> Iterator[None]:
        try:
            yield
        except (sqlite3.Error, NotFoundError, TransactionError) as exc:
            raise AuditStoreError(f"audit {what} of {self.path} failed: {exc}") from exc

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        """Rows as dicts; the browse queries go through here."""
        self.flush()
        with self._lock, self._mapped_errors("read"):
            cursor = self.db.conn.execute(sql, tuple(params))
            keys = [column[0] for column in cursor.description]
            return [dict(zip(keys, row, strict=True)) for row in cursor.fetchall()]

    def recover(self) -> list[str]:
        """Close what crashed processes left open; returns the run IDs it closed.

        A run without finished_at whose process is gone (or whose pid now belongs to another process)
        gets finished_at = now and interrupted = 1, with outcome and stop_reason left NULL: an Outcome
        describes how a run ended, and nobody saw this one end. Its STARTED invocations become
        INTERRUPTED. Runs whose process is still alive are not touched, whichever process that is.
        Every closed run is then added to the text index (audit.sqlite.text_search), like a run that finished.
        """
        now = audit_timestamp(datetime.now(UTC))
        with self.write() as db:
            open_runs = list(db.query("SELECT run_id, pid, pid_start FROM runs WHERE finished_at IS NULL"))
            live = [r["run_id"] for r in open_runs if is_process_live(r["pid"], r["pid_start"])]
            dead = [r["run_id"] for r in open_runs if r["run_id"] not in live]
            marks = ", ".join("?" for _ in live)
            keep_live = f"AND run_id NOT IN ({marks})" if live else ""
            db.execute(
                f"UPDATE invocations SET status = ?, finished_at = ? WHERE status = ? {keep_live}",
                (InvocationStatus.INTERRUPTED, now, InvocationStatus.STARTED, *live),
            )
            if dead:
                db.execute(
                    f"UPDATE runs SET finished_at = ?, interrupted = 1"
                    f" WHERE finished_at IS NULL AND run_id IN ({', '.join('?' for _ in dead)})",
                    (now, *dead),
                )
            index_finished_runs(db.conn, self.text_search)
        return dead

    def _prune_batch(self, cutoff: str, limit: int) -> dict[str, int] | None:
        """One short write transaction (the FTS delete triggers drop the rows' index entries)."""
        with self.write() as db:
            ids = [
                row[0]
                for row in db.execute(
                    "SELECT run_id FROM runs WHERE finished_at < ? ORDER BY finished_at LIMIT ?",
                    (cutoff, limit),
                )
            ]
            if not ids:
                return None
            marks = ", ".join("?" for _ in ids)
            return {
                table: db.execute(f"DELETE FROM {table} WHERE run_id IN ({marks})", ids).rowcount
                for table in PRUNED_TABLES
            }

    def vacuum(self) -> None:
        """Give freed pages back to the file system.

        VACUUM may renumber the rowids of tables without an INTEGER PRIMARY KEY, which the external
        content FTS indexes point at, so those are rebuilt afterwards (a full re-index: run it rarely).
        """
        with self._lock, self._mapped_errors("write"):
            _retry_busy(lambda: self.db.conn.execute("VACUUM"))
        if self.has_fts:
            with self.write() as db:
                rebuild(db.conn)

    def _release(self) -> None:
        self.db.close()
        self._release_held()
