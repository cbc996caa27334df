"""The audit file's text search: its FTS5 index, filled one run at a time off the run's hot path, and
how a search reads it (docs/contracts.md, "Audit").

`invocations_fts` and `runs_fts` are trigram FTS5 indexes over their tables (external content, named as
sqlite-utils and Datasette expect). Insert and update triggers (schema v4 and older) would tokenize every
STARTED row and re-tokenize it when its projection arrived: most of a tool round's audit cost. So a
run is marked `fts_pending` when it starts and all its rows are indexed in one batch
by the commit that finishes it (`AuditSink`, at run_finished) or by crash recovery when it closes the
run. Search reads the rows of pending runs with LIKE (`audit.browse`), so it misses nothing; a pending
run is one still going, so those rows are few. Delete triggers stay: pruned rows leave the index at once.

Consequences worth knowing: FTS5's `integrity-check` against the content tables holds only while no
run is pending; an invocation written without a `runs` row is found only by the LIKE scan of the page
walk; a tool reading the index directly (Datasette, say) sees a run's rows only once the run finished;
and an older version still writing during a migration leaves rows unindexed until `vacuum` rebuilds
the index.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from audit.common import MARK_INDEXED, PENDING_RUNS
from audit.port import SqlConnection, TextSearch

# The indexed columns per table. Both tables carry run_id, which is how a run's rows are found.
FTS_COLUMNS: dict[str, tuple[str, ...]] = {
    "invocations": ("input_json", "projection_json"),
    "runs": ("query",),
}

# The trigram tokenizer indexes 3-character sequences: shorter terms cannot use its index.
_MIN_INDEXED_TERM = 3


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
_FINISHED_PENDING = f"{PENDING_RUNS} AND finished_at IS NOT NULL"

# Per table, one term's index lookup (2 params) that narrows to the rows holding it or a superset (it
# also folds non-ASCII case). The rows of runs not yet indexed (still going) are always candidates, so
# the LIKE test decides for them; there are few.
_TEXT_INDEXED = {
    "invocations": "(rowid IN (SELECT rowid FROM invocations_fts WHERE invocations_fts MATCH ?)"
    " OR run_id IN (SELECT run_id FROM runs WHERE rowid IN"
    f" (SELECT rowid FROM runs_fts WHERE runs_fts MATCH ?)) OR run_id IN ({PENDING_RUNS}))",
    "runs": "(rowid IN (SELECT rowid FROM runs_fts WHERE runs_fts MATCH ?)"
    " OR run_id IN (SELECT run_id FROM invocations WHERE rowid IN"
    f" (SELECT rowid FROM invocations_fts WHERE invocations_fts MATCH ?)) OR run_id IN ({PENDING_RUNS}))",
}


def _phrase(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


class Fts5TextSearch:
    """The file's trigram FTS5 tables (`invocations_fts`, `runs_fts`): every term of 3+ characters."""

    def index_runs(self, conn: SqlConnection, run_ids: Iterable[str]) -> None:
        for run_id in run_ids:
            for statement in _INDEX_RUN:
                conn.execute(statement, (run_id, run_id))
            conn.execute(MARK_INDEXED, (run_id,))

    def indexed_terms(self, terms: Sequence[str]) -> list[str]:
        return [term for term in terms if len(term) >= _MIN_INDEXED_TERM]

    def term_clauses(self, table: str, terms: Sequence[str]) -> list[tuple[str, list[Any]]]:
        return [(_TEXT_INDEXED[table], [_phrase(term)] * 2) for term in terms]

    def candidates(
        self, table: str, terms: Sequence[str], rarest: Callable[[Sequence[str]], str]
    ) -> tuple[str, list[Any]] | None:
        return None  # every indexed term narrows the table itself (`term_clauses`)


class NoTextIndex:
    """A file without FTS5's trigram tokenizer (SQLite < 3.34): search walks the rows with LIKE, and
    a finished run only has its pending mark cleared."""

    def index_runs(self, conn: SqlConnection, run_ids: Iterable[str]) -> None:
        for run_id in run_ids:
            conn.execute(MARK_INDEXED, (run_id,))

    def indexed_terms(self, terms: Sequence[str]) -> list[str]:
        return []

    def term_clauses(self, table: str, terms: Sequence[str]) -> list[tuple[str, list[Any]]]:
        return []

    def candidates(
        self, table: str, terms: Sequence[str], rarest: Callable[[Sequence[str]], str]
    ) -> tuple[str, list[Any]] | None:
        return None


def index_finished_runs(conn: sqlite3.Connection, search: TextSearch) -> list[str]:
    """Index every finished run still pending (recovery closed it, or its finisher could not index it)."""
    run_ids = [str(row[0]) for row in conn.execute(_FINISHED_PENDING).fetchall()]
    search.index_runs(conn, run_ids)
    return run_ids


def rebuild(conn: sqlite3.Connection) -> None:
    """Re-index everything from the tables (after VACUUM renumbered rowids), then take the pending runs'
    rows out again: their finish indexes them, and a row must never be in the index twice."""
    for table, columns in FTS_COLUMNS.items():
        conn.execute(f"INSERT INTO {table}_fts ({table}_fts) VALUES ('rebuild')")
        conn.execute(_unindex_pending_rows(table, columns))
