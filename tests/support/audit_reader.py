"""The audit's rows as tests assert on them: a run, the runs, and a run's invocations, model rounds
and protocol events, in the order they were written.

The product reads the audit only through the browser (audit.browse), export and replay; these
row-by-row reads exist for tests alone, so they live here and the stores do not carry them.

`AuditReader(store)` reads through an open store (SQLite file or MariaDB database) and sees its own
queued writes; `AuditReader(path)` reads a SQLite file through a connection of its own, as another
process would, without opening a store (which would create, migrate or recover the audit).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from audit.port import AuditStore
from audit.sqlite.store import SqliteAuditStore

Query = Callable[[str, Sequence[Any]], list[dict[str, Any]]]


class AuditReader:
    """Rows of one audit as dicts, keyed by column name."""

    def __init__(self, source: AuditStore | Path) -> None:
        """`source`: an open store, or the path of a SQLite audit, which the reader never changes."""
        self._query: Query = _file_query(source) if isinstance(source, Path) else source.query
        # Rows written in the same microsecond keep their write order: SQLite's rowid; the server's
        # tables have none, so there the sequence number and the call ID break the tie.
        self._on_file = isinstance(source, Path | SqliteAuditStore)

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        return self._query(sql, params)

    def schema_version(self) -> int:
        if self._on_file:
            return int(self.query("PRAGMA user_version")[0]["user_version"])
        rows = self.query("SELECT version FROM audit_schema_version WHERE id = 1")
        return int(rows[0]["version"]) if rows else 0

    def run(self, run_id: str) -> dict[str, Any] | None:
        rows = self.query("SELECT * FROM runs WHERE run_id = ?", (run_id,))
        return rows[0] if rows else None

    def runs(self, limit: int = 50) -> list[dict[str, Any]]:
        """Newest first; a run recorded only by its finish sorts by its finish time."""
        tiebreak = "rowid" if self._on_file else "run_id"
        return self.query(
            f"SELECT * FROM runs ORDER BY COALESCE(started_at, finished_at) DESC, {tiebreak} DESC LIMIT ?",
            (limit,),
        )

    def invocations(self, run_id: str) -> list[dict[str, Any]]:
        tiebreak = "rowid" if self._on_file else "seq, tool_call_id"
        return self.query(
            f"SELECT * FROM invocations WHERE run_id = ? ORDER BY started_at, {tiebreak}", (run_id,)
        )

    def model_rounds(self, run_id: str) -> list[dict[str, Any]]:
        return self.query("SELECT * FROM model_rounds WHERE run_id = ? ORDER BY round", (run_id,))

    def protocol_events(self, run_id: str) -> list[dict[str, Any]]:
        return self.query("SELECT * FROM protocol_events WHERE run_id = ? ORDER BY id", (run_id,))


def _file_query(path: Path) -> Query:
    uri = f"{path.resolve().as_uri()}?mode=rw"  # rw, not rwc: a missing audit is an error, not a new file

    def query(sql: str, params: Sequence[Any]) -> list[dict[str, Any]]:
        conn = sqlite3.connect(uri, uri=True, timeout=30)
        conn.row_factory = sqlite3.Row
        try:
            return [dict(row) for row in conn.execute(sql, tuple(params))]
        finally:
            conn.close()

    return query
