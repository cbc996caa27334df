"""Browsing the audit (audit.browse): every filter and their combinations, keyset pages that stay
stable while runs write, text search (Chinese included, with and without the FTS index), timelines."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from audit import browse as browse_module
from audit.browse import AuditBrowser, InvocationFilter, normalize_time
from audit.common import audit_timestamp
from audit.copy import copy_audit
from audit.factory import open_audit_store
from audit.location import SqliteLocation
from audit.port import AuditStore
from audit.sink import AuditSink
from audit.sqlite.store import SqliteAuditStore
from audit.sqlite.text_search import NoTextIndex
from tests.support.audit_backends import mariadb_target
from tests.support.audit_data import populate_audit
from tests.support.audit_events import KNOWLEDGE_INPUT, LOGS_INPUT, Events
from tests.support.mysql import require_server

FIELDS = ("run_id", "session_id", "tool", "status", "error_code", "since", "until", "text")


# Browsing behaves alike on both stores: these tests also run on a MariaDB copy of the corpus.
ON_BOTH_STORES = pytest.mark.parametrize(
    "corpus", ["sqlite", pytest.param("mariadb", marks=pytest.mark.mysql)], indirect=True
)


@pytest.fixture(scope="module")
def corpus(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[AuditStore]:
    """~600 invocations over ~200 runs with the benchmark's realistic mix (Chinese queries included);
    on MariaDB, the same file copied into a fresh database (`audit copy`'s code path)."""
    path = tmp_path_factory.mktemp("browse") / "audit.db"
    populate_audit(path, 600, seed=11)
    with open_audit_store(SqliteLocation(path)) as store:
        if getattr(request, "param", "sqlite") == "sqlite":
            yield store
            return
        require_server()
        with mariadb_target() as target, target.open() as server:
            copy_audit(store, server)
            yield server


def all_invocations(store: AuditStore) -> list[dict[str, Any]]:
    return store.query(
        "SELECT i.*, r.query AS run_query FROM invocations i LEFT JOIN runs r ON r.run_id = i.run_id"
    )


def matches(row: dict[str, Any], flt: InvocationFilter) -> bool:
    """The reference semantics, in plain Python."""
    for column in ("run_id", "session_id", "tool", "status", "error_code"):
        wanted = getattr(flt, column)
        if wanted is not None and row[column] != wanted:
            return False
    if flt.since is not None and row["started_at"] < normalize_time(flt.since):
        return False
    if flt.until is not None and row["started_at"] >= normalize_time(flt.until):
        return False
    haystack = " ".join(str(row[c] or "") for c in ("input_json", "projection_json", "run_query")).lower()
    return all(term.lower() in haystack for term in (flt.text or "").split())


def expected_keys(store: AuditStore, flt: InvocationFilter) -> list[tuple[str, str]]:
    rows = sorted(
        (r for r in all_invocations(store) if matches(r, flt)),
        key=lambda r: (r["started_at"], r["run_id"], r["tool_call_id"]),
        reverse=True,
    )
    return [(r["run_id"], r["tool_call_id"]) for r in rows]


def page_through(browser: AuditBrowser, flt: InvocationFilter, limit: int) -> list[tuple[str, str]]:
    keys: list[tuple[str, str]] = []
    cursor: str | None = None
    while True:
        page = browser.invocations(flt, limit=limit, cursor=cursor)
        assert len(page.rows) <= limit
        keys += [(r["run_id"], r["tool_call_id"]) for r in page.rows]
        if page.next_cursor is None:
            return keys
        assert len(page.rows) == limit
        cursor = page.next_cursor


def sample_values(store: AuditStore) -> dict[str, Any]:
    """Filter values that select a non-empty set: those of one ERROR invocation of query_logs."""
    candidates = store.query(
        "SELECT * FROM invocations WHERE status = 'ERROR' AND tool = 'query_logs' ORDER BY started_at"
    )
    row = candidates[len(candidates) // 2]
    started = datetime.fromisoformat(row["started_at"])
    return {
        "run_id": row["run_id"],
        "session_id": row["session_id"],
        "tool": row["tool"],
        "status": row["status"],
        "error_code": row["error_code"],
        "since": audit_timestamp(started - timedelta(days=20)),
        "until": audit_timestamp(started + timedelta(microseconds=1)),
        "text": json.loads(row["input_json"])["service"],
    }


SUBSETS = [combo for n in range(len(FIELDS) + 1) for combo in itertools.combinations(FIELDS, n)]


@ON_BOTH_STORES
@pytest.mark.parametrize("fields", SUBSETS, ids=lambda f: "+".join(f) or "none")
def test_every_filter_combination_pages_exactly_the_matching_rows(
    corpus: AuditStore, fields: tuple[str, ...]
) -> None:
    values = sample_values(corpus)
    flt = InvocationFilter(**{f: values[f] for f in fields})
    browser = AuditBrowser(corpus)
    expected = expected_keys(corpus, flt)
    assert expected, "the sample row itself always matches"
    assert page_through(browser, flt, limit=7) == expected
    assert browser.count_invocations(flt) == len(expected)


TERMS = [
    "连接池",  # Chinese, 3 characters: trigram index
    "超时",  # Chinese, 2 characters: too short for trigrams, LIKE
    "企业账号",  # only in runs' queries
    "hikaripool",  # case-insensitive
    "HikariPool-1 Connection",  # two terms, both must occur
    "merchant_id = 10",  # JSON text with spaces: three terms
    "payment-service 504",
    "query_mysql",  # a tool name is not in input/projection text
    "zzz-nothing",
    "50%",  # LIKE metacharacters are literal
    'say "hi"',  # FTS quote characters are literal
    "HikariPOOL-1",  # mixed case
    "V2.14.0 之后",  # mixed case and Chinese, in runs' queries
    "10614",  # rare: one merchant
    "不存在的词",  # absent Chinese
    '"service": "inventory-service"',  # quotes, colon and hyphen are literal text
    "+payment -service",  # FULLTEXT's operators are literal: no row holds "+payment"
    "(~*<>@+-)",  # every FULLTEXT operator character, absent
]


@ON_BOTH_STORES
@pytest.mark.parametrize("use_fts", [True, False], ids=["fts", "like-only"])
@pytest.mark.parametrize("walk", ["default", "tiny"], ids=["walk-default", "walk-tiny"])
@pytest.mark.parametrize("term", TERMS)
def test_text_search(
    corpus: AuditStore, term: str, use_fts: bool, walk: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not use_fts:
        monkeypatch.setattr(corpus, "text_search", NoTextIndex())
    if walk == "tiny":  # forces the index-driven plan for every term that is not in the first rows
        monkeypatch.setattr(browse_module, "_WALK_LIMIT", {"invocations": 3, "runs": 2})
    browser = AuditBrowser(corpus)
    flt = InvocationFilter(text=term)
    expected = expected_keys(corpus, flt)
    assert page_through(browser, flt, limit=9) == expected
    assert browser.count_invocations(flt) == len(expected)
    assert page_through(browser, InvocationFilter(text=term, tool="query_logs"), limit=50) == expected_keys(
        corpus, InvocationFilter(text=term, tool="query_logs")
    )

    runs = [r["run_id"] for r in _all_pages(lambda c: browser.runs(limit=5, cursor=c, text=term))]
    assert runs == expected_runs(corpus, term)


def expected_runs(store: AuditStore, text: str) -> list[str]:
    """A run matches when every term occurs in its query or in one of its invocations."""
    texts: dict[str, list[str]] = {}
    for inv in store.query("SELECT run_id, input_json, projection_json FROM invocations"):
        texts.setdefault(inv["run_id"], []).extend([inv["input_json"] or "", inv["projection_json"] or ""])
    runs = sorted(
        store.query("SELECT * FROM runs"),
        key=lambda r: (r["started_at"] or r["finished_at"], r["run_id"]),
        reverse=True,
    )
    terms = text.lower().split()
    return [
        r["run_id"]
        for r in runs
        if all(
            any(t in part.lower() for part in [r["query"] or "", *texts.get(r["run_id"], [])]) for t in terms
        )
    ]


def test_fts_index_exists_on_this_sqlite(corpus: SqliteAuditStore) -> None:
    """SQLite >= 3.34 ships the trigram tokenizer; the file carries the FTS tables Datasette detects."""
    assert corpus.has_fts
    names = {r["name"] for r in corpus.query("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"invocations_fts", "runs_fts"} <= names
    assert corpus.db.table("invocations").detect_fts() == "invocations_fts"
    assert corpus.db.table("runs").detect_fts() == "runs_fts"


def _all_pages(fetch: Any) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    cursor = None
    while True:
        page = fetch(cursor)
        rows += page.rows
        if page.next_cursor is None:
            return rows
        cursor = page.next_cursor


@ON_BOTH_STORES
def test_runs_are_newest_first_with_filters_and_pages(corpus: AuditStore) -> None:
    browser = AuditBrowser(corpus)
    everything = corpus.query("SELECT * FROM runs")
    key = sorted(everything, key=lambda r: (r["started_at"] or r["finished_at"], r["run_id"]), reverse=True)
    assert [r["run_id"] for r in _all_pages(lambda c: browser.runs(limit=13, cursor=c))] == [
        r["run_id"] for r in key
    ]
    session = key[5]["session_id"]
    assert [
        r["run_id"] for r in _all_pages(lambda c: browser.runs(limit=2, cursor=c, session_id=session))
    ] == [r["run_id"] for r in key if r["session_id"] == session]
    drafts = [r["run_id"] for r in _all_pages(lambda c: browser.runs(limit=20, cursor=c, outcome="DRAFT"))]
    assert drafts == [r["run_id"] for r in key if r["outcome"] == "DRAFT"]
    both = browser.runs(limit=50, session_id=session, outcome="DRAFT").rows
    assert [r["run_id"] for r in both] == [
        r["run_id"] for r in key if r["session_id"] == session and r["outcome"] == "DRAFT"
    ]


def insert_invocation(
    store: SqliteAuditStore, run_id: str, call: str, started_at: str, **columns: Any
) -> None:
    row = {
        "run_id": run_id,
        "tool_call_id": call,
        "session_id": columns.pop("session_id", "s"),
        "tool": columns.pop("tool", "query_logs"),
        "status": columns.pop("status", "FOUND"),
        "started_at": started_at,
        **columns,
    }
    with store.write() as db:
        db.table("invocations").insert(row)


BASE = datetime(2026, 1, 1, tzinfo=UTC)


def ts(second: float) -> str:
    return audit_timestamp(BASE + timedelta(seconds=second))


def test_pages_stay_stable_while_rows_are_inserted(audit_store: SqliteAuditStore) -> None:
    """Keyset pages: rows written between fetches never repeat a row or hide a row that existed."""
    for n in range(60):
        # Pairs of rows share a timestamp, so ties are broken by (run_id, tool_call_id).
        insert_invocation(audit_store, f"run-{n % 7}", f"call-{n:02d}", ts(n // 2))
    existing = {(r["run_id"], r["tool_call_id"]) for r in audit_store.query("SELECT * FROM invocations")}
    browser = AuditBrowser(audit_store)
    seen: list[tuple[str, str]] = []
    cursor = None
    extra = 0
    while True:
        page = browser.invocations(limit=8, cursor=cursor)
        seen += [(r["run_id"], r["tool_call_id"]) for r in page.rows]
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
        last = page.rows[-1]
        extra += 1
        # Newer than everything, tied with the cursor row on either side, and older than it.
        insert_invocation(audit_store, "run-new", f"new-{extra}", ts(1000 + extra))
        insert_invocation(audit_store, "run-0", f"tie-before-{extra}", last["started_at"])
        insert_invocation(audit_store, "run-zz", f"tie-after-{extra}", last["started_at"])
        insert_invocation(audit_store, "run-old", f"old-{extra}", ts(-extra))
    assert len(seen) == len(set(seen)), "no row twice"
    assert existing <= set(seen), "no pre-existing row skipped"
    assert not any(call.startswith(("new-", "tie-after-")) for _, call in seen), "rows above the cursor wait"


def test_cursor_and_limit_errors(audit_store: SqliteAuditStore) -> None:
    browser = AuditBrowser(audit_store)
    insert_invocation(audit_store, "run-1", "call-1", ts(1))
    insert_invocation(audit_store, "run-1", "call-2", ts(2))
    with audit_store.write() as db:
        db.table("runs").insert_all(
            [{"run_id": f"run-{n}", "session_id": "s", "started_at": ts(n)} for n in (1, 2)]
        )
    invocation_cursor = browser.invocations(limit=1).next_cursor
    run_cursor = browser.runs(limit=1).next_cursor
    assert invocation_cursor
    assert run_cursor
    for bad in ("not-a-cursor", "", run_cursor):
        with pytest.raises(ValueError, match="invalid invocation cursor"):
            browser.invocations(cursor=bad)
    with pytest.raises(ValueError, match="invalid run cursor"):
        browser.runs(cursor=invocation_cursor)
    with pytest.raises(ValueError, match="limit"):
        browser.invocations(limit=0)
    with pytest.raises(ValueError, match="ISO-8601"):
        browser.invocations(InvocationFilter(since="yesterday"))


def test_time_bounds_accept_any_iso_form(audit_store: SqliteAuditStore) -> None:
    insert_invocation(audit_store, "run-1", "call-1", "2026-01-01T00:00:00.500000Z")
    browser = AuditBrowser(audit_store)
    for since in ("2026-01-01", "2026-01-01T00:00:00Z", "2026-01-01T08:00:00+08:00", "2026-01-01T00:00:00"):
        assert browser.count_invocations(InvocationFilter(since=since)) == 1
    assert browser.count_invocations(InvocationFilter(until="2026-01-01T00:00:00.500000Z")) == 0  # exclusive
    assert browser.count_invocations(InvocationFilter(until="2026-01-01T00:00:01Z")) == 1


def test_timeline_is_in_event_order(audit_store: SqliteAuditStore) -> None:
    ev, sink = Events(), AuditSink(audit_store)
    same_moment = "2025-01-01T00:00:00.000000Z"  # ties on time: only seq can order these

    def send(event: dict[str, Any]) -> None:
        sink(event | {"at": same_moment})

    send(ev.run_started())
    send(ev.round_started(1))
    send(ev.round_finished(1, ["call-2", "call-1"]))
    send(ev.tool_started("call-2", "query_logs", LOGS_INPUT))
    send(ev.tool_finished("call-2", "query_logs", "FOUND", projection={"lines": []}))
    send(ev.protocol("INVALID_PROGRESS_PROTOCOL", "call-1", missing_field="previous_observation"))
    send(ev.round_started(2))
    send(ev.round_finished(2, ["call-3"]))
    send(ev.tool_started("call-3", "lookup_knowledge", KNOWLEDGE_INPUT))
    send(ev.tool_finished("call-3", "lookup_knowledge", "EMPTY"))
    send(ev.protocol("STOP_REQUIRED"))
    send(ev.run_finished("CONTROLLED_STOP", "INFORMATION_SATURATED"))

    timeline = AuditBrowser(audit_store).timeline("run-1")
    assert timeline is not None
    assert timeline.run["outcome"] == "CONTROLLED_STOP"
    label = {"model_round": "round", "invocation": "tool_call_id", "protocol_event": "code"}
    assert [(e.kind, dict(e.data)[label[e.kind]]) for e in timeline.entries] == [
        ("model_round", 1),
        ("invocation", "call-2"),
        ("protocol_event", "INVALID_PROGRESS_PROTOCOL"),
        ("model_round", 2),
        ("invocation", "call-3"),
        ("protocol_event", "STOP_REQUIRED"),
    ]
    assert all(e.at == same_moment for e in timeline.entries)
    assert AuditBrowser(audit_store).timeline("no-such-run") is None


def test_timeline_without_seq_falls_back_to_time(audit_store: SqliteAuditStore) -> None:
    """Rows written before schema 2 have no seq: they are ordered by time, rounds first on ties."""
    with audit_store.write() as db:
        db.table("runs").insert({"run_id": "old", "session_id": "s", "started_at": ts(0)})
        db.table("model_rounds").insert({"run_id": "old", "round": 1, "started_at": ts(1)})
        db.table("model_rounds").insert({"run_id": "old", "round": 2, "started_at": ts(3)})
        db.table("protocol_events").insert({"run_id": "old", "code": "STOP_REQUIRED", "at": ts(3)})
    insert_invocation(audit_store, "old", "call-1", ts(2))
    timeline = AuditBrowser(audit_store).timeline("old")
    assert timeline is not None
    assert [e.kind for e in timeline.entries] == [
        "model_round",
        "invocation",
        "model_round",
        "protocol_event",
    ]


def test_run_recorded_only_by_its_finish_is_listed_by_its_finish(audit_store: SqliteAuditStore) -> None:
    sink = AuditSink(audit_store)
    early, rejected, late = Events("early"), Events("rejected"), Events("late")
    sink(early.run_started() | {"at": ts(1)})
    sink(rejected.run_finished("REJECTED", "QUERY_BLANK", model_calls=0) | {"at": ts(2)})
    sink(late.run_started() | {"at": ts(3)})
    browser = AuditBrowser(audit_store)
    first = browser.runs(limit=1)
    second = browser.runs(limit=1, cursor=first.next_cursor)
    third = browser.runs(limit=1, cursor=second.next_cursor)
    assert [p.rows[0]["run_id"] for p in (first, second, third)] == ["late", "rejected", "early"]
    assert third.next_cursor is None
    assert browser.runs(outcome="REJECTED").rows[0]["started_at"] is None
