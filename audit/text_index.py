"""The audit's text-search index, filled one run at a time off the run's hot path (docs/architecture.md,
"Audit").

`invocations_fts` and `runs_fts` are trigram FTS5 indexes over their tables (external content, named as
sqlite-utils and Datasette expect). Until schema v5 insert and update triggers kept them in sync, which
tokenized every STARTED row and re-tokenized it when its projection arrived: most of a tool round's
audit cost. Now a run is marked `fts_pending` when it starts and all its rows are indexed in one batch
by the commit that finishes it (`AuditSink`, at run_finished) or by crash recovery when it closes the
run. Search reads the rows of pending runs with LIKE (`audit.browse`), so it misses nothing; a pending
run is one still going, so those rows are few. Delete triggers stay: pruned rows leave the index at once.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable

from audit import mysql_text_index
from audit.port import SqlConnection

# The indexed columns per table. Both tables carry run_id, which is how a run's rows are found.
FTS_COLUMNS: dict[str, tuple[str, ...]] = {
    "invocations": ("input_json", "projection_json"),
    "runs": ("query",),
}

# The runs whose rows are not in the index yet (partial index idx_runs_fts_pending: as small as they are).
PENDING_RUNS = "SELECT run_id FROM runs WHERE fts_pending IS NOT NULL"


def _index_run_rows(table: str, columns: tuple[str, ...]) -> str:
    """One run's rows of `table` into its index, only while the run is still pending (never twice)."""
    cols = ", ".join(columns)
    return (
        f"INSERT INTO {table}_fts (rowid, {cols}) SELECT rowid, {cols} FROM {table}"
        " WHERE run_id = ? AND EXISTS (SELECT 1 FROM runs WHERE run_id = ? AND fts_pending IS NOT NULL)"
    )


def _unindex_pending_rows(table: str, columns: tuple[str, ...]) -> str:
    """Take the rows of every pending run out of the index (after a full rebuild read them in)."""
    cols = ", ".join(columns)
    return (
        f"INSERT INTO {table}_fts ({table}_fts, rowid, {cols}) SELECT 'delete', rowid, {cols} FROM {table}"
        f" WHERE run_id IN ({PENDING_RUNS})"
    )


_INDEX_RUN = [_index_run_rows(table, columns) for table, columns in FTS_COLUMNS.items()]
_MARK_INDEXED = "UPDATE runs SET fts_pending = NULL WHERE run_id = ? AND fts_pending IS NOT NULL"
_FINISHED_PENDING = f"{PENDING_RUNS} AND finished_at IS NOT NULL"


def index_runs(
    conn: SqlConnection, run_ids: Iterable[str], *, has_fts: bool, trigram_words: bool = False
) -> None:
    """Index the rows of these runs if they are still pending, inside the caller's transaction.

    Called once a run can write no more indexed text (its finish is in the same transaction): later
    writes only touch status and evaluation columns, which are not indexed. `trigram_words`: the
    store is a server audit, whose index is `audit.mysql_text_index`'s side tables, not FTS5.
    Without an index (SQLite built without the trigram tokenizer) only the mark is cleared.
    """
    for run_id in run_ids:
        if has_fts and trigram_words:
            for statement in mysql_text_index.INDEX_RUN:
                conn.execute(statement, (run_id,) * statement.count("?"))
        elif has_fts:
            for statement in _INDEX_RUN:
                conn.execute(statement, (run_id, run_id))
        conn.execute(_MARK_INDEXED, (run_id,))


def index_finished_runs(conn: sqlite3.Connection, *, has_fts: bool) -> list[str]:
    """Index every finished run still pending (recovery closed it, or its finisher could not index it)."""
    run_ids = [str(row[0]) for row in conn.execute(_FINISHED_PENDING).fetchall()]
    index_runs(conn, run_ids, has_fts=has_fts)
    return run_ids


def rebuild(conn: sqlite3.Connection) -> None:
    """Re-index everything from the tables (after VACUUM renumbered rowids), then take the pending runs'
    rows out again: their finish indexes them, and a row must never be in the index twice."""
    for table, columns in FTS_COLUMNS.items():
        conn.execute(f"INSERT INTO {table}_fts ({table}_fts) VALUES ('rebuild')")
        conn.execute(_unindex_pending_rows(table, columns))
