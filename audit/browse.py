"""Browsing the audit: filtered keyset pages of runs and invocations, text search, a run's timeline.

`diagnose audit` and the console both read through `AuditBrowser`, so they show the same rows in the
same order. Pages are keyset pages, never OFFSET: a page costs the same at row 10 and at row 900,000,
and rows written between two page fetches neither repeat nor push older rows out of sight.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, Literal, TypeAlias, TypeVar, cast

from agent.vocabulary import INTERRUPTED_RUN
from audit.common import RUN_LISTED_AT, PruneReport, audit_timestamp
from audit.port import AuditBackend
from audit.rows import InvocationRow, ModelRoundRow, ProtocolEventRow, RunRow

INVOCATION_ORDER = "started_at DESC, run_id DESC, tool_call_id DESC"
RUN_ORDER = f"{RUN_LISTED_AT} DESC, run_id DESC"
# How far a text search walks the page order before it asks the FTS index instead (a run is tested
# against its invocations too, so runs walk less).
_WALK_LIMIT = {"invocations": 2000, "runs": 500}
# Invocation filter columns from the fewest rows per value to the most (a run has a handful of
# invocations, a session a few runs, an error code a few percent of all rows); tool and status are
# left to the planner, which has the (tool, status, started_at) index for them.
_SELECTIVE_FIRST = ("run_id", "session_id", "error_code")


@dataclass(frozen=True)
class InvocationFilter:
    """Every set field must match. `since` is inclusive and `until` exclusive, both ISO-8601 on
    started_at (a naive time is UTC). `text`: every whitespace-separated term must occur in the
    invocation's input or projection JSON or in its run's query (substring, ASCII case-insensitive)."""

    run_id: str | None = None
    session_id: str | None = None
    tool: str | None = None
    status: str | None = None
    error_code: str | None = None
    since: str | None = None
    until: str | None = None
    text: str | None = None


Row = TypeVar("Row", RunRow, InvocationRow)


@dataclass(frozen=True)
class Page(Generic[Row]):
    rows: list[Row]
    next_cursor: str | None  # opaque; None on the last page


@dataclass(frozen=True)
class ModelRoundEntry:
    kind: Literal["model_round"]
    at: str
    data: ModelRoundRow


@dataclass(frozen=True)
class InvocationEntry:
    kind: Literal["invocation"]
    at: str
    data: InvocationRow


@dataclass(frozen=True)
class ProtocolEventEntry:
    kind: Literal["protocol_event"]
    at: str
    data: ProtocolEventRow


# One entry of a run's timeline: `kind` says which table its row (`data`) comes from.
TimelineEntry: TypeAlias = ModelRoundEntry | InvocationEntry | ProtocolEventEntry


@dataclass(frozen=True)
class RunTimeline:
    run: RunRow
    entries: list[TimelineEntry]  # ordered as they happened


def normalize_time(value: str) -> str:
    """Any ISO-8601 date or time -> the stored format, so comparisons on the text are comparisons in time."""
    try:
        return audit_timestamp(datetime.fromisoformat(value.strip()))
    except ValueError:
        raise ValueError(f"not an ISO-8601 date or time: {value!r}") from None


def _encode_cursor(kind: str, key: list[Any]) -> str:
    raw = json.dumps([kind, *key], ensure_ascii=False, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_cursor(kind: str, cursor: str, size: int) -> list[str]:
    try:
        value = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (binascii.Error, ValueError):
        value = None
    if (
        not isinstance(value, list)
        or len(value) != size + 1
        or value[0] != kind
        or not all(isinstance(part, str) for part in value[1:])
    ):
        raise ValueError(f"invalid {kind} cursor")
    return value[1:]


def _like(term: str) -> str:
    escaped = term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


# Per table, one term: LIKE (exact substring, ASCII case-insensitive; 3 params). The store's text
# search (`AuditBackend.text_search`) narrows to the same rows or a superset first.
_TEXT_LIKE = {
    "invocations": "(input_json LIKE ? ESCAPE '\\' OR projection_json LIKE ? ESCAPE '\\' OR EXISTS"
    " (SELECT 1 FROM runs r WHERE r.run_id = invocations.run_id AND r.query LIKE ? ESCAPE '\\'))",
    "runs": "(query LIKE ? ESCAPE '\\' OR EXISTS (SELECT 1 FROM invocations i WHERE i.run_id = runs.run_id"
    " AND (i.input_json LIKE ? ESCAPE '\\' OR i.projection_json LIKE ? ESCAPE '\\')))",
}


@dataclass
class _Where:
    """Filter clauses, with text terms kept apart: they can be evaluated in two ways."""

    clauses: list[str] = field(default_factory=list)
    params: list[Any] = field(default_factory=list)
    terms: list[str] = field(default_factory=list)

    def add(self, clause: str, *params: Any) -> None:
        self.clauses.append(clause)
        self.params += params


class AuditBrowser:
    """Read-only queries over one `AuditBackend`. Rows are the tables' rows as dicts (JSON left as text),
    typed per table (`audit.rows`).

    Text search: a term must occur as a substring (ASCII case-insensitive). For a term of 3+
    characters (most of 2 on a server audit) two exact plans exist. Walking the page order and
    testing rows with LIKE is cheap when the term is common, so a bounded prefix of the walk is
    tried first; if that does not fill the page, the term's matches are fetched from the trigram
    index (cost: the number of matches), plus the rows of runs still going, which are indexed only
    when they finish. Shorter terms, or a file without FTS (SQLite < 3.34), only have the walk,
    which for a rare term reads every row the other filters allow.
    """

    def __init__(self, store: AuditBackend) -> None:
        self._store = store

    def _indexed(self, terms: list[str]) -> list[str]:
        return self._store.text_search.indexed_terms(terms)

    def _text_clauses(self, table: str, terms: list[str], indexed: list[str]) -> _Where:
        where = _Where()
        for clause, params in self._store.text_search.term_clauses(table, indexed):
            where.add(clause, *params)
        for term in terms:
            where.add(_TEXT_LIKE[table], *[_like(term)] * 3)
        return where

    def _source(self, table: str, order: str, where: _Where, indexed: list[str]) -> tuple[str, list[Any]]:
        """What the index-driven plan reads: the table, or the candidates of one indexed term when the
        store's text search reads them that way (LIKE checks every term on them)."""
        if not indexed:
            return table, []
        candidates = self._store.text_search.candidates(
            table, indexed, lambda terms: self._rarest(table, order, where, terms)
        )
        return candidates or (table, [])

    def _rarest(self, table: str, order: str, where: _Where, indexed: Sequence[str]) -> str:
        """The term that occurs in the fewest of the first rows in page order (the walk's rows),
        the longest among equals.

        A term's length says little: `merchant_id = 10043` has a long common term and a short rare
        one, and reading the common one's candidates costs seconds where the rare one's cost
        milliseconds. Asking the index is no cheaper: InnoDB evaluates a FULLTEXT match whole, and
        counting a common term's matches took 9 s at a million rows. The walk's rows are a sample of
        the rows the filters allow, and testing each term on them costs what the walk costs."""
        walked, walk_clauses = _walked(table, where.clauses, order)
        hits = ", ".join(f"SUM({_TEXT_LIKE[table]}) AS n{i}" for i in range(len(indexed)))
        row = self._store.query(
            f"SELECT {hits} FROM {walked} {_sql_where(walk_clauses)}",
            [*[_like(term) for term in indexed for _ in range(3)], *where.params, _WALK_LIMIT[table]],
        )[0]
        counts = [int(value or 0) for value in row.values()]
        return min(zip(indexed, counts, strict=True), key=lambda pair: (pair[1], -len(pair[0])))[0]

    def _select(self, table: str, order: str, where: _Where, limit: int) -> list[dict[str, Any]]:
        indexed = self._indexed(where.terms)
        text = self._text_clauses(table, where.terms, [])
        if indexed:
            walked, walk_clauses = _walked(table, where.clauses, order)
            walk = self._store.query(
                f"SELECT * FROM {walked} {_sql_where(walk_clauses + text.clauses)} ORDER BY {order} LIMIT ?",
                [*where.params, _WALK_LIMIT[table], *text.params, limit],
            )
            if len(walk) == limit:  # the first rows in page order held a full page: exact
                return walk
            text = self._text_clauses(table, where.terms, indexed)
        source, source_params = self._source(table, order, where, indexed)
        clauses = _sql_where(where.clauses + text.clauses)
        return self._store.query(
            f"SELECT {table}.* FROM {source} {clauses} ORDER BY {order} LIMIT ?",
            [*source_params, *where.params, *text.params, limit],
        )

    # --- invocations -------------------------------------------------------------------------------

    def _invocation_where(self, flt: InvocationFilter) -> _Where:
        where = _Where(terms=(flt.text or "").split())
        # Without statistics SQLite prefers the index matching the most equality columns, e.g.
        # (tool, status) over session_id, and then walks every ERROR row of a tool to find one
        # session's few. The most selective column present leads; `+` keeps the others off the index.
        lead = next((c for c in _SELECTIVE_FIRST if getattr(flt, c) is not None), None)
        for column in ("run_id", "session_id", "error_code", "tool", "status"):
            value = getattr(flt, column)
            if value is not None:
                unindexed = lead is not None and column != lead
                where.add(f"{'+' if unindexed else ''}{column} = ?", value)
        if flt.since is not None:
            where.add("started_at >= ?", normalize_time(flt.since))
        if flt.until is not None:
            where.add("started_at < ?", normalize_time(flt.until))
        return where

    def invocations(
        self, flt: InvocationFilter = InvocationFilter(), *, limit: int = 50, cursor: str | None = None
    ) -> Page[InvocationRow]:
        """Newest first: (started_at, run_id, tool_call_id) descending."""
        _check_limit(limit)
        where = self._invocation_where(flt)
        if cursor is not None:
            started_at, run_id, tool_call_id = _decode_cursor("invocation", cursor, 3)
            # The first conjunct alone bounds the index range; the second breaks ties within it.
            where.add(
                "started_at <= ? AND (started_at < ? OR (run_id, tool_call_id) < (?, ?))",
                started_at,
                started_at,
                run_id,
                tool_call_id,
            )
        rows = cast(list[InvocationRow], self._select("invocations", INVOCATION_ORDER, where, limit + 1))
        next_cursor = None
        if len(rows) > limit:
            rows = rows[:limit]
            last = rows[-1]
            key = [last["started_at"], last["run_id"], last["tool_call_id"]]
            next_cursor = _encode_cursor("invocation", key)
        return Page(rows, next_cursor)

    def count_invocations(self, flt: InvocationFilter = InvocationFilter()) -> int:
        """How many invocations match; a count reads every match, so text terms always use the index."""
        where = self._invocation_where(flt)
        indexed = self._indexed(where.terms)
        text = self._text_clauses("invocations", where.terms, indexed)
        source, source_params = self._source("invocations", INVOCATION_ORDER, where, indexed)
        rows = self._store.query(
            f"SELECT count(*) AS n FROM {source} {_sql_where(where.clauses + text.clauses)}",
            [*source_params, *where.params, *text.params],
        )
        return int(rows[0]["n"])

    # --- runs --------------------------------------------------------------------------------------

    def runs(
        self,
        *,
        limit: int = 50,
        cursor: str | None = None,
        session_id: str | None = None,
        outcome: str | None = None,
        text: str | None = None,
    ) -> Page[RunRow]:
        """Newest first by start (by finish for a run recorded only by its finish, e.g. rejected input).

        `outcome` is an Outcome, or INTERRUPTED_RUN ("INTERRUPTED") for runs closed by crash recovery
        (their outcome column is NULL). `text` matches the run's query or any of its invocations.
        """
        _check_limit(limit)
        where = _Where(terms=(text or "").split())
        if session_id is not None:
            where.add("session_id = ?", session_id)
        other = "+" if session_id is not None else ""  # a session's few runs beat any outcome index
        if outcome == INTERRUPTED_RUN:
            where.add(f"{other}interrupted = 1")
        elif outcome is not None:
            where.add(f"{other}outcome = ?", outcome)
        if cursor is not None:
            listed_at, run_id = _decode_cursor("run", cursor, 2)
            where.add(
                f"{RUN_LISTED_AT} <= ? AND ({RUN_LISTED_AT} < ? OR run_id < ?)", listed_at, listed_at, run_id
            )
        rows = cast(list[RunRow], self._select("runs", RUN_ORDER, where, limit + 1))
        next_cursor = None
        if len(rows) > limit:
            rows = rows[:limit]
            last = rows[-1]
            next_cursor = _encode_cursor("run", [last["started_at"] or last["finished_at"], last["run_id"]])
        return Page(rows, next_cursor)

    # --- pruning ------------------------------------------------------------------------------------

    def prunable(self, cutoff: str) -> PruneReport:
        """What `prune` with this cutoff would delete, counted from one snapshot and deleting nothing:
        `diagnose audit prune --dry-run` shows it, and the confirmation asks about it."""
        finished_before = "run_id IN (SELECT run_id FROM runs WHERE finished_at < ?)"
        counts: dict[str, int] = {}
        with self._store.read():
            counts["runs"] = int(
                self._store.query("SELECT count(*) AS n FROM runs WHERE finished_at < ?", [cutoff])[0]["n"]
            )
            for table in ("model_rounds", "invocations", "protocol_events"):
                sql = f"SELECT count(*) AS n FROM {table} WHERE {finished_before}"
                rows = self._store.query(sql, [cutoff])
                counts[table] = int(rows[0]["n"])
        return PruneReport(cutoff=cutoff, **counts)

    # --- one run -----------------------------------------------------------------------------------

    def timeline(self, run_id: str) -> RunTimeline | None:
        """The run and its model rounds, invocations and protocol events in the order they happened:
        by event seq (exact), or for rows written before seq was recorded, by time."""
        with self._store.read():
            runs = cast(list[RunRow], self._store.query("SELECT * FROM runs WHERE run_id = ?", [run_id]))
            if not runs:
                return None
            rounds = cast(
                list[ModelRoundRow],
                self._store.query("SELECT * FROM model_rounds WHERE run_id = ? ORDER BY round", [run_id]),
            )
            invocations = cast(
                list[InvocationRow],
                self._store.query(
                    "SELECT * FROM invocations WHERE run_id = ? ORDER BY started_at, tool_call_id", [run_id]
                ),
            )
            events = cast(
                list[ProtocolEventRow],
                self._store.query("SELECT * FROM protocol_events WHERE run_id = ? ORDER BY id", [run_id]),
            )
        entries: list[TimelineEntry] = [
            *(ModelRoundEntry("model_round", r["started_at"] or r["finished_at"] or "", r) for r in rounds),
            *(InvocationEntry("invocation", i["started_at"], i) for i in invocations),
            *(ProtocolEventEntry("protocol_event", e["at"], e) for e in events),
        ]
        rank = {"model_round": 0, "invocation": 1, "protocol_event": 2}
        if all(entry.data["seq"] is not None for entry in entries):
            entries.sort(key=lambda entry: int(entry.data["seq"] or 0))  # every seq is set here
        else:
            entries.sort(key=lambda entry: (entry.at, rank[entry.kind]))  # stable: keeps query order in ties
        return RunTimeline(runs[0], entries)


def _walked(table: str, clauses: list[str], order: str) -> tuple[str, list[str]]:
    """The first rows of `table` in page order (one LIMIT parameter): a FROM item named `table` and
    the clauses that keep only them.

    Runs are picked by key and read from the table again: on the server their page order is the
    INVISIBLE column `listed_at`, which a derived table's `*` would drop before the outer ORDER BY."""
    first = f"FROM {table} {_sql_where(clauses)} ORDER BY {order} LIMIT ?"
    if table == "runs":
        return "runs", [f"run_id IN (SELECT run_id FROM (SELECT run_id {first}) AS walk)"]
    return f"(SELECT * {first}) AS {table}", []


def _sql_where(clauses: list[str]) -> str:
    return f"WHERE {' AND '.join(clauses)}" if clauses else ""


def _check_limit(limit: int) -> None:
    if limit < 1:
        raise ValueError("limit must be at least 1")
