"""Audit schema v5: text search is indexed a run at a time, off the run's hot path, and finds every row
it found when triggers indexed each write (docs/contracts.md, "Audit").

Each search is asked through the FTS plan (the walk that could find a row by LIKE alone is switched
off), and the index itself is read directly, to tell "found through the index" from "found as a row
of a run still going". The SQLite store is what is under test, so these tests build it directly,
not through audit.factory.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import sqlite_utils

from audit import browse as browse_module
from audit.browse import AuditBrowser, InvocationFilter
from audit.sink import AuditSink
from audit.sqlite import store as store_module
from audit.sqlite.store import SqliteAuditStore
from tests.support.audit_events import KNOWLEDGE_INPUT, LOGS_INPUT, Events, on_disk
from tests.support.audit_reader import AuditReader

PROJECTION = {"lines": ["HikariPool-1 连接池耗尽 timeout"]}


@pytest.fixture(autouse=True)
def index_plan_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """No walk prefix: every text search goes through the index plan (index + rows of pending runs)."""
    monkeypatch.setattr(browse_module, "_WALK_LIMIT", {"invocations": 0, "runs": 0})


@pytest.fixture
def store(audit_store: SqliteAuditStore) -> SqliteAuditStore:
    if not audit_store.has_fts:
        pytest.skip("this SQLite has no trigram tokenizer: no text index to fill")
    return audit_store


def found_invocations(store: SqliteAuditStore, text: str) -> set[tuple[str, str]]:
    browser = AuditBrowser(store)
    rows = browser.invocations(InvocationFilter(text=text)).rows
    assert browser.count_invocations(InvocationFilter(text=text)) == len(rows)
    return {(r["run_id"], r["tool_call_id"]) for r in rows}


def found_runs(store: SqliteAuditStore, text: str) -> set[str]:
    return {r["run_id"] for r in AuditBrowser(store).runs(text=text).rows}


def indexed_runs(path: Path, text: str) -> set[str]:
    """Runs whose invocations the index itself holds for `text` (no LIKE, no pending rows)."""
    rows = on_disk(
        path,
        "SELECT DISTINCT run_id FROM invocations WHERE rowid IN"
        " (SELECT rowid FROM invocations_fts WHERE invocations_fts MATCH ?)",
        (f'"{text}"',),
    )
    return {str(r[0]) for r in rows}


def index_matches_tables(path: Path) -> None:
    """FTS5's own check that the index holds exactly the tables' rows, each once."""
    for table in ("invocations", "runs"):
        on_disk(path, f"INSERT INTO {table}_fts ({table}_fts, rank) VALUES ('integrity-check', 1)")


def start_run(sink: AuditSink, ev: Events, query: str = "订单服务 5xx 升高") -> None:
    sink(ev.run_started(query))
    sink(ev.round_started(1))
    sink(ev.tool_started("call-1", "query_logs", LOGS_INPUT))
    sink(ev.tool_finished("call-1", "query_logs", "FOUND", projection=PROJECTION))


def test_a_finished_run_is_searchable_through_the_index(store: SqliteAuditStore) -> None:
    ev, sink = Events("done"), AuditSink(store)
    start_run(sink, ev, query="支付回调超时")
    sink(ev.run_finished("DRAFT", "COMPLETED"))

    assert indexed_runs(store.path, "连接池耗尽") == {"done"}  # the projection, indexed at the finish
    assert store.query("SELECT fts_pending FROM runs") == [{"fts_pending": None}]
    for text in ("连接池耗尽", "orders", "支付回调"):  # projection, input, the run's query
        assert found_invocations(store, text) == {("done", "call-1")}, text
        assert found_runs(store, text) == {"done"}, text
    assert found_invocations(store, "nowhere") == set()
    index_matches_tables(store.path)


def test_a_run_still_going_is_searchable_before_it_is_indexed(store: SqliteAuditStore) -> None:
    finished, going, sink = Events("done"), Events("going"), AuditSink(store)
    start_run(sink, finished)
    sink(finished.run_finished("DRAFT", "COMPLETED"))
    start_run(sink, going, query="网关 504 升高")

    # Nothing of the running run is in the index (no tokenizing on the run's path) ...
    assert indexed_runs(store.path, "连接池耗尽") == {"done"}
    # ... yet search finds its rows, by projection, input and query, with the finished run's.
    assert found_invocations(store, "连接池耗尽") == {("done", "call-1"), ("going", "call-1")}
    assert found_invocations(store, "orders") == {("done", "call-1"), ("going", "call-1")}
    assert found_invocations(store, "网关 504") == {("going", "call-1")}
    assert found_runs(store, "网关") == {"going"}
    assert found_runs(store, "hikaripool") == {"done", "going"}  # ASCII case-insensitive, as before

    sink(going.run_finished("DRAFT", "COMPLETED"))
    assert indexed_runs(store.path, "连接池耗尽") == {"done", "going"}
    assert found_invocations(store, "网关 504") == {("going", "call-1")}
    index_matches_tables(store.path)


def test_a_rejected_run_is_indexed_by_its_finish(store: SqliteAuditStore) -> None:
    ev = Events("rejected")
    finish = ev("run_finished", outcome="REJECTED", stop_reason="QUERY_TOO_LARGE", result={})
    rejected = {
        "query": "拒绝的问题 gateway",
        "model": "m",
        "limits": {"max_model_calls": 1, "max_total_tokens": 2, "deadline_s": 3.0, "max_run_bytes": 4},
        "protocol": {"max_consecutive_no_gain": 5, "max_protocol_violations": 6},
    }
    AuditSink(store)(finish | {"rejected_input": rejected})
    assert found_runs(store, "拒绝的问题") == {"rejected"}
    assert on_disk(store.path, "SELECT rowid FROM runs_fts WHERE runs_fts MATCH '\"拒绝的问题\"'") != []
    index_matches_tables(store.path)


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_crashed_run_closed_by_recovery_is_indexed(tmp_path: Path) -> None:
    path = tmp_path / "audit.db"
    ev = Events("crashed")
    with SqliteAuditStore(path) as store:
        if not store.has_fts:
            pytest.skip("this SQLite has no trigram tokenizer")
        sink = AuditSink(store)
        start_run(sink, ev, query="crashed 连接池")
        sink(ev.tool_started("call-2", "lookup_knowledge", KNOWLEDGE_INPUT))
    # The writing process is gone, without a run_finished.
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE runs SET pid = ? WHERE run_id = 'crashed'", (dead_pid(),))
    conn.close()
    assert indexed_runs(path, "连接池耗尽") == set()

    with SqliteAuditStore(path) as reopened:
        run = AuditReader(reopened).run("crashed")
        assert run is not None
        assert run["interrupted"] == 1
        assert run["fts_pending"] is None
        assert indexed_runs(path, "连接池耗尽") == {"crashed"}
        assert indexed_runs(path, "连接池 耗尽") == {"crashed"}  # the STARTED call's input too
        assert found_invocations(reopened, "连接池耗尽") == {("crashed", "call-1")}
        assert found_invocations(reopened, "top_k") == {("crashed", "call-2")}
        assert found_runs(reopened, "crashed") == {"crashed"}
    index_matches_tables(path)


def make_v4_file(path: Path) -> None:
    """A file as the previous release left it: schema v4, its triggers indexing each write."""
    path.touch(mode=0o600)
    db = sqlite_utils.Database(sqlite3.connect(path))
    db.execute("PRAGMA journal_mode=WAL")
    for step, migration in enumerate(store_module.MIGRATIONS[:4], start=1):
        migration(db)
        db.execute(f"PRAGMA user_version = {step}")
    db.execute(
        "INSERT INTO runs (run_id, session_id, query, outcome, stop_reason, started_at, finished_at)"
        " VALUES ('old', 'sess', '旧的 gateway 504', 'DRAFT', 'COMPLETED', '2026-01-01T00:00:00.000000Z',"
        " '2026-01-01T00:00:09.000000Z')"
    )
    db.execute(
        "INSERT INTO invocations (run_id, tool_call_id, session_id, tool, round, status, input_json,"
        " started_at) VALUES ('old', 'call-1', 'sess', 'query_logs', 1, 'STARTED',"
        " '{\"service\": \"billing\"}', '2026-01-01T00:00:01.000000Z')"
    )
    db.execute(
        "UPDATE invocations SET status = 'FOUND', projection_json = '{\"lines\": [\"死锁 detected\"]}'"
    )
    db.conn.commit()
    db.close()


def trigger_names(path: Path) -> set[str]:
    return {str(r[0]) for r in on_disk(path, "SELECT name FROM sqlite_master WHERE type = 'trigger'")}


def test_a_v4_file_migrates_with_its_search_intact(tmp_path: Path) -> None:
    path = tmp_path / "audit.db"
    make_v4_file(path)
    if "invocations_ai" not in trigger_names(path):
        pytest.skip("this SQLite has no trigram tokenizer: the v4 file has no index")
    for _ in range(2):  # the first open migrates; the second finds nothing to do
        with SqliteAuditStore(path) as store:
            assert store.schema_version == len(store_module.MIGRATIONS) == 5
            assert trigger_names(path) == {"invocations_ad", "runs_ad"}  # no work on insert or update
            # The old rows stay searchable through the index the triggers built.
            assert indexed_runs(path, "死锁 detected") == {"old"}
            assert found_invocations(store, "死锁 detected") == {("old", "call-1")}
            assert found_invocations(store, "billing") == {("old", "call-1")}
            assert found_invocations(store, "旧的 gateway") == {("old", "call-1")}
            assert found_runs(store, "detected") == {"old"}
    with SqliteAuditStore(path) as store:  # and the new release indexes its own runs in the old file
        ev, sink = Events("new"), AuditSink(store)
        start_run(sink, ev)
        assert found_invocations(store, "连接池耗尽") == {("new", "call-1")}
        sink(ev.run_finished("DRAFT", "COMPLETED"))
        assert indexed_runs(path, "连接池耗尽") == {"new"}
    index_matches_tables(path)


def test_the_v5_step_can_run_twice(tmp_path: Path) -> None:
    path = tmp_path / "audit.db"
    make_v4_file(path)
    db = sqlite_utils.Database(sqlite3.connect(path))
    store_module.MIGRATIONS[4](db)
    store_module.MIGRATIONS[4](db)  # once more: every step checks what exists, nothing fails
    db.execute("PRAGMA user_version = 5")
    db.conn.commit()
    db.close()
    with SqliteAuditStore(path) as store:
        assert store.schema_version == 5
        assert found_invocations(store, "billing") == {("old", "call-1")}
