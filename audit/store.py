"""The local SQLite audit database (DESIGN 3.9): schema, migrations, short write transactions, reads.

The audit is a required record of what the agent touched, so opening it never degrades silently: a
corrupt file, a newer schema or an unwritable location raises `AuditStoreError` before any run starts.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import platformdirs
import sqlite_utils
from sqlite_utils.db import NotFoundError, TransactionError

INVOCATION_STATUSES: tuple[str, ...] = ("STARTED", "FOUND", "EMPTY", "ERROR", "CANCELLED", "INTERRUPTED")

Migration = Callable[[sqlite_utils.Database], None]


class AuditStoreError(Exception):
    """The audit database cannot be opened or written; a run must not continue without its audit."""


def default_audit_path() -> Path:
    """Where the audit lives when neither `[audit] path` nor `--audit-db` says otherwise."""
    return platformdirs.user_state_path("diagnosis-console") / "audit.db"


def _v1_initial_schema(db: sqlite_utils.Database) -> None:
    statuses = ", ".join(f"'{status}'" for status in INVOCATION_STATUSES)
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


# Append-only: migration N (1-based) brings a file from user_version N-1 to N. Never edit a shipped one.
MIGRATIONS: list[Migration] = [_v1_initial_schema]


class AuditStore:
    """One open audit database file.

    Every write is its own short transaction committed at once, so a crash mid-run still leaves the
    STARTED invocation on disk. WAL lets the console browse while a run writes.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        # The console may write from a run worker while the UI thread reads; one lock keeps the shared
        # connection's transaction state consistent.
        self._lock = threading.RLock()
        self._create_private_file()
        try:
            conn = sqlite3.connect(str(self.path), check_same_thread=False)
        except sqlite3.Error as exc:
            raise AuditStoreError(f"cannot open audit database {self.path}: {exc}") from exc
        try:
            self.db = sqlite_utils.Database(conn)
            self._configure()
            self._migrate()
        except (sqlite3.Error, TransactionError) as exc:
            conn.close()
            raise AuditStoreError(f"audit database {self.path} is unusable: {exc}") from exc
        except AuditStoreError:
            conn.close()
            raise

    def _create_private_file(self) -> None:
        """Create the file owner-only before SQLite touches it: audit rows are operator data."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
            except FileExistsError:
                pass
            else:
                os.close(fd)
                os.chmod(self.path, 0o600)  # a restrictive umask must not leave it unreadable to us
        except OSError as exc:
            raise AuditStoreError(f"cannot create audit database {self.path}: {exc}") from exc
        if not self.path.is_file():
            raise AuditStoreError(f"audit database {self.path} is not a regular file")
        # SQLite opens an unwritable file read-only without complaint and fails only on the first write.
        if not os.access(self.path, os.R_OK | os.W_OK) or not os.access(self.path.parent, os.W_OK | os.X_OK):
            raise AuditStoreError(f"audit database {self.path} is not writable")

    def _configure(self) -> None:
        mode = self._pragma("journal_mode=WAL")
        if str(mode).lower() != "wal":
            raise AuditStoreError(f"audit database {self.path} cannot use WAL (journal_mode={mode})")
        self._pragma("busy_timeout=5000")
        self._pragma("synchronous=NORMAL")

    def _pragma(self, pragma: str) -> Any:
        row = self.db.execute(f"PRAGMA {pragma}").fetchone()
        return row[0] if row else None

    @property
    def schema_version(self) -> int:
        return int(self._pragma("user_version"))

    def _migrate(self) -> None:
        version = self.schema_version
        if version > len(MIGRATIONS):
            raise AuditStoreError(
                f"audit database {self.path} has schema version {version}, newer than this program "
                f"understands ({len(MIGRATIONS)})"
            )
        for target, migration in enumerate(MIGRATIONS[version:], start=version + 1):
            with self.db.atomic():
                migration(self.db)
                self.db.execute(f"PRAGMA user_version = {target}")

    @contextmanager
    def write(self) -> Iterator[sqlite_utils.Database]:
        """One committed transaction; any database failure surfaces as `AuditStoreError`."""
        with self._lock:
            try:
                with self.db.atomic():
                    yield self.db
            except (sqlite3.Error, NotFoundError, TransactionError) as exc:
                raise AuditStoreError(f"audit write to {self.path} failed: {exc}") from exc

    def _rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        with self._lock:
            try:
                return list(self.db.query(sql, params))
            except sqlite3.Error as exc:
                raise AuditStoreError(f"audit read from {self.path} failed: {exc}") from exc

    def get_run(self, run_id: str) -> dict[str, Any] | None:
        rows = self._rows("SELECT * FROM runs WHERE run_id = ?", (run_id,))
        return rows[0] if rows else None

    def list_runs(self, limit: int = 50) -> list[dict[str, Any]]:
        """Newest first; a run recorded only by its finish sorts by its finish time."""
        return self._rows(
            "SELECT * FROM runs ORDER BY COALESCE(started_at, finished_at) DESC, rowid DESC LIMIT ?",
            (limit,),
        )

    def list_invocations(self, run_id: str) -> list[dict[str, Any]]:
        return self._rows("SELECT * FROM invocations WHERE run_id = ? ORDER BY started_at, rowid", (run_id,))

    def list_model_rounds(self, run_id: str) -> list[dict[str, Any]]:
        return self._rows("SELECT * FROM model_rounds WHERE run_id = ? ORDER BY round", (run_id,))

    def list_protocol_events(self, run_id: str) -> list[dict[str, Any]]:
        return self._rows("SELECT * FROM protocol_events WHERE run_id = ? ORDER BY id", (run_id,))

    def close(self) -> None:
        with self._lock:
            self.db.close()

    def __enter__(self) -> AuditStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
