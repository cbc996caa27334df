"""Audit durability: crash recovery on open, liveness across pid reuse, migration of a version-1 file,
private and refused files, retention (prune) that never touches a live run.

The SQLite store is what is under test (its open recovers, migrates and refuses), so these tests build
it directly, not through audit.factory.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from audit import store_base
from audit.browse import AuditBrowser, InvocationFilter
from audit.common import AuditStoreError, audit_timestamp
from audit.liveness import is_process_live, own_start_marker, process_start_marker
from audit.sink import AuditSink
from audit.sqlite import store as store_module
from audit.sqlite.store import SqliteAuditStore
from tests.support.audit_events import LOGS_INPUT, Events, on_disk
from tests.support.audit_reader import AuditReader

REPO = Path(__file__).resolve().parents[2]

# A process that writes a run and a STARTED invocation through the real sink, then either kills
# itself with SIGKILL ("crash") or reports "ready" and waits: a line "finish" on stdin completes the
# run, end of input or a signal ends the process without finishing it.
CHILD = """
import os, signal, sys
from audit import AuditSink, SqliteAuditStore
from audit.common import audit_timestamp
from datetime import UTC, datetime

path, run_id, mode = sys.argv[1:4]
seq = 0
def event(type_, **fields):
    global seq
    seq += 1
    return {"type": type_, "run_id": run_id, "session_id": "s-" + run_id, "seq": seq,
            "at": audit_timestamp(datetime.now(UTC)), **fields}
sink = AuditSink(SqliteAuditStore(path))
sink(event("run_started", query="订单服务 5xx 升高 " + run_id))
sink(event("model_round_started", round=1))
sink(event("tool_started", round=1, tool_call_id="call-1", tool="query_logs", input={"service": "orders"}))
if mode == "crash":
    os.kill(os.getpid(), signal.SIGKILL)
print("ready", flush=True)
if sys.stdin.readline().strip() == "finish":
    sink(event("tool_finished", round=1, tool_call_id="call-1", tool="query_logs", status="EMPTY",
               error_code=None, reason=None, projection=None, duration_ms=5, observation=None))
    result = {"usage": {"model_calls": 1}}
    sink(event("run_finished", outcome="DRAFT", stop_reason="COMPLETED", result=result))
    print("finished", flush=True)
"""


def child(path: Path, run_id: str, mode: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, str(path), run_id, mode],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def wait_ready(proc: subprocess.Popen[str]) -> None:
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"


def state(path: Path, run_id: str) -> tuple[Any, ...]:
    """(run finished?, interrupted, outcome, invocation status, invocation finished?) from disk."""
    ((finished, interrupted, outcome),) = on_disk(
        path, "SELECT finished_at IS NOT NULL, interrupted, outcome FROM runs WHERE run_id = ?", (run_id,)
    )
    ((status, inv_finished),) = on_disk(
        path, "SELECT status, finished_at IS NOT NULL FROM invocations WHERE run_id = ?", (run_id,)
    )
    return bool(finished), interrupted, outcome, status, bool(inv_finished)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "audit.db"


def test_crashed_runs_are_interrupted_and_live_runs_untouched(db_path: Path) -> None:
    SqliteAuditStore(db_path).close()
    live = child(db_path, "live", "wait")
    doomed = child(db_path, "doomed", "wait")
    try:
        wait_ready(live)
        wait_ready(doomed)
        crashed = child(db_path, "crashed", "crash")
        assert crashed.wait(timeout=30) == -signal.SIGKILL
        doomed.kill()  # SIGKILL from outside
        assert doomed.wait(timeout=30) == -signal.SIGKILL

        with SqliteAuditStore(db_path) as store:
            closed_by_open = {
                r["run_id"] for r in store.query("SELECT run_id FROM runs WHERE interrupted = 1")
            }
            assert store.recover() == []  # already done on open; a second pass finds nothing
        assert closed_by_open == {"crashed", "doomed"}
        for run_id in ("crashed", "doomed"):
            assert state(db_path, run_id) == (True, 1, None, "INTERRUPTED", True)
        assert state(db_path, "live") == (False, 0, None, "STARTED", False)

        # The live process never noticed: it finishes its run as usual.
        assert live.stdin is not None
        assert live.stdout is not None
        live.stdin.write("finish\n")
        live.stdin.flush()
        assert live.stdout.readline().strip() == "finished"
        assert live.wait(timeout=30) == 0
        assert state(db_path, "live") == (True, 0, "DRAFT", "EMPTY", True)
    finally:
        for proc in (live, doomed):
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def test_pid_reuse_and_unknown_owners(db_path: Path) -> None:
    """A live pid only keeps a run open when it is the same process (start marker), so a recycled
    pid does not keep a crashed run open forever. Runs from schema 1 (no marker) rely on the pid."""
    me, marker = os.getpid(), own_start_marker()
    assert marker is not None
    rows = {
        "mine": (me, marker),
        "recycled-pid": (me, "another-boot/12345"),
        "no-pid": (None, None),
        "schema-1-live-pid": (me, None),
    }
    with SqliteAuditStore(db_path) as store, store.write() as db:
        for run_id, (pid, start) in rows.items():
            db.table("runs").insert({"run_id": run_id, "session_id": "s", "pid": pid, "pid_start": start})
            db.table("invocations").insert(
                {"run_id": run_id, "tool_call_id": "c", "session_id": "s", "tool": "query_logs",
                 "status": "STARTED", "started_at": audit_timestamp(datetime.now(UTC))}
            )  # fmt: skip
    SqliteAuditStore(db_path).close()
    interrupted = dict(on_disk(db_path, "SELECT run_id, interrupted FROM runs"))
    assert interrupted == {"mine": 0, "recycled-pid": 1, "no-pid": 1, "schema-1-live-pid": 0}
    statuses = dict(on_disk(db_path, "SELECT run_id, status FROM invocations"))
    assert statuses == {
        "mine": "STARTED",
        "recycled-pid": "INTERRUPTED",
        "no-pid": "INTERRUPTED",
        "schema-1-live-pid": "STARTED",
    }


def test_liveness_of_exited_and_zombie_processes() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    marker = process_start_marker(proc.pid)
    deadline = time.monotonic() + 10
    while process_start_marker(proc.pid) is not None and time.monotonic() < deadline:
        try:  # not reaped yet: a zombie
            with open(f"/proc/{proc.pid}/stat", encoding="utf-8") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    break
        except FileNotFoundError:
            break
        time.sleep(0.01)
    assert not is_process_live(proc.pid, marker)  # exited: a zombie never writes again
    proc.wait()
    assert not is_process_live(proc.pid, marker)
    assert not is_process_live(None, None)
    assert is_process_live(os.getpid(), own_start_marker())


# The exact schema of version 1, as shipped, frozen here so the migration is tested against the real
# thing even if the migration code is ever (wrongly) edited.
V1_SCHEMA = """
CREATE TABLE runs (
    run_id TEXT PRIMARY KEY, session_id TEXT NOT NULL, query TEXT, outcome TEXT, stop_reason TEXT,
    started_at TEXT, finished_at TEXT, model_calls INTEGER, prompt_tokens INTEGER, completion_tokens INTEGER,
    total_tokens INTEGER, result_json TEXT, failure_json TEXT, pid INTEGER
);
CREATE TABLE model_rounds (
    run_id TEXT NOT NULL, round INTEGER NOT NULL, started_at TEXT, finished_at TEXT, prompt_tokens INTEGER,
    completion_tokens INTEGER, tool_call_ids TEXT, has_text INTEGER, duration_ms INTEGER,
    PRIMARY KEY (run_id, round)
);
CREATE TABLE invocations (
    run_id TEXT NOT NULL, tool_call_id TEXT NOT NULL, session_id TEXT NOT NULL, tool TEXT NOT NULL,
    round INTEGER,
    status TEXT NOT NULL CHECK (status IN ('STARTED', 'FOUND', 'EMPTY', 'ERROR', 'CANCELLED', 'INTERRUPTED')),
    error_code TEXT, reason TEXT, input_json TEXT, projection_json TEXT, evaluation TEXT,
    started_at TEXT NOT NULL, finished_at TEXT, duration_ms INTEGER, PRIMARY KEY (run_id, tool_call_id)
);
CREATE TABLE protocol_events (
    id INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL, tool_call_id TEXT, code TEXT NOT NULL,
    detail_json TEXT, at TEXT NOT NULL
);
CREATE INDEX idx_invocations_run ON invocations (run_id);
CREATE INDEX idx_invocations_tool_status_started ON invocations (tool, status, started_at);
CREATE INDEX idx_invocations_started ON invocations (started_at);
CREATE INDEX idx_runs_started ON runs (started_at);
CREATE INDEX idx_protocol_events_run ON protocol_events (run_id);
PRAGMA user_version = 1;
"""


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def make_v1_file(path: Path) -> None:
    fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o600)
    os.close(fd)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.executescript(V1_SCHEMA)
    day1, day2 = "2025-01-01T00:00:0{}.000000Z", "2025-01-02T00:00:0{}.000000Z"
    conn.executemany(
        "INSERT INTO runs VALUES (?, 'sess-1', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, ?)",
        [
            ("old-done", "支付回调超时，连接池耗尽？", "DRAFT", "COMPLETED", day1.format(0), day1.format(9),
             2, 1600, 120, 1720, "{}", 1),
            ("old-crashed", "gateway 504", None, None, day2.format(0), None, None, None, None, None, None,
             dead_pid()),
        ],
    )  # fmt: skip
    conn.execute(
        "INSERT INTO model_rounds VALUES ('old-done', 1, ?, ?, 800, 60, '[\"call-1\"]', 0, 12)",
        (day1.format(1), day1.format(2)),
    )
    conn.executemany(
        "INSERT INTO invocations VALUES (?, 'call-1', 'sess-1', ?, 1, ?, NULL, NULL, ?, ?, ?, ?, ?, ?)",
        [
            ("old-done", "lookup_knowledge", "FOUND", '{"query": "连接池 耗尽", "top_k": 3}',
             '{"hits": [{"title": "HikariPool 排查手册"}]}', "GAINED", day1.format(3), day1.format(4), 30),
            ("old-crashed", "query_logs", "STARTED", '{"service": "api-gateway"}', None, None, day2.format(1),
             None, None),
        ],
    )  # fmt: skip
    conn.execute(
        "INSERT INTO protocol_events (run_id, tool_call_id, code, detail_json, at)"
        " VALUES ('old-done', NULL, 'STOP_REQUIRED', '{}', ?)",
        (day1.format(5),),
    )
    conn.commit()
    conn.close()


def test_a_version_1_file_is_migrated_in_place(db_path: Path) -> None:
    make_v1_file(db_path)
    with SqliteAuditStore(db_path) as store:
        assert store.schema_version == len(store_module.MIGRATIONS) == 5
        # Runs recorded before v4 did not keep their model or limits: NULL, never invented.
        assert {(r["model"], r["max_model_calls"]) for r in AuditReader(store).runs()} == {(None, None)}
        # Rounds recorded before usage could be estimated were reported by their provider.
        assert [r["usage_estimated"] for r in AuditReader(store).model_rounds("old-done")] == [0]
        browser = AuditBrowser(store)
        # Old rows are kept, searchable (Chinese, through the index built by the migration) and browsable.
        assert [r["run_id"] for r in browser.runs().rows] == ["old-crashed", "old-done"]
        assert store.has_fts
        for text in ("连接池", "HikariPool", "支付回调", "504"):
            found = [
                (r["run_id"], r["tool_call_id"])
                for r in browser.invocations(InvocationFilter(text=text)).rows
            ]
            assert found == [("old-crashed", "call-1")] if text == "504" else [("old-done", "call-1")], text
        timeline = browser.timeline("old-done")
        assert timeline is not None
        assert [e.kind for e in timeline.entries] == ["model_round", "invocation", "protocol_event"]
        # The crashed process of the old file is gone: its run was closed on open.
        crashed = AuditReader(store).run("old-crashed")
        assert crashed is not None
        assert crashed["interrupted"] == 1
        assert crashed["finished_at"]
        assert AuditReader(store).invocations("old-crashed")[0]["status"] == "INTERRUPTED"
        done = AuditReader(store).run("old-done")
        assert done is not None
        assert (done["interrupted"], done["outcome"]) == (0, "DRAFT")
        # And the new release writes to it as usual.
        ev, sink = Events("new-run"), AuditSink(store)
        sink(ev.run_started())
        sink(ev.tool_started("call-1", "query_logs", LOGS_INPUT))
        sink(ev.tool_finished("call-1", "query_logs", "EMPTY"))
        sink(ev.run_finished("DRAFT", "COMPLETED"))
        assert browser.count_invocations(InvocationFilter(text="orders")) == 1
    columns = {row[1] for row in on_disk(db_path, "PRAGMA table_info(runs)")}
    assert {"pid_start", "interrupted"} <= columns
    indexes = {row[0] for row in on_disk(db_path, "SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert {
        "idx_invocations_started",
        "idx_invocations_run",
        "idx_invocations_tool_status_started",
        "idx_invocations_tool_started",
        "idx_invocations_status_started",
        "idx_invocations_error_started",
        "idx_invocations_session_started",
        "idx_runs_started",
        "idx_runs_session_started",
        "idx_runs_outcome_started",
    } <= indexes
    assert on_disk(db_path, "PRAGMA integrity_check") == [("ok",)]
    assert (
        on_disk(db_path, "INSERT INTO invocations_fts(invocations_fts, rank) VALUES ('integrity-check', 1)")
        == []
    )
    assert stat.S_IMODE(db_path.stat().st_mode) == 0o600


def test_file_is_owner_only_even_with_a_permissive_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        path = tmp_path / "new" / "audit.db"
        SqliteAuditStore(path).close()
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700


@pytest.mark.parametrize("damage", ["random-bytes", "truncated", "damaged-schema-page"])
def test_corrupt_files_are_refused(db_path: Path, damage: str) -> None:
    with SqliteAuditStore(db_path) as store:
        sink = AuditSink(store)
        for n in range(40):
            ev = Events(f"run-{n}")
            sink(ev.run_started("查询" * 200))
    on_disk(db_path, "PRAGMA wal_checkpoint(TRUNCATE)")
    data = db_path.read_bytes()
    if damage == "random-bytes":
        db_path.write_bytes(os.urandom(len(data)))
    elif damage == "truncated":
        db_path.write_bytes(data[: len(data) // 2])
    else:
        db_path.write_bytes(data[:100] + os.urandom(3000) + data[3100:])
    with pytest.raises(AuditStoreError, match="unusable"):
        SqliteAuditStore(db_path)


def test_unwritable_file_is_refused(db_path: Path) -> None:
    SqliteAuditStore(db_path).close()
    db_path.chmod(0o400)
    try:
        if os.access(db_path, os.W_OK):
            pytest.skip("running as a user that can write anyway (root)")
        with pytest.raises(AuditStoreError, match="not writable"):
            SqliteAuditStore(db_path)
    finally:
        db_path.chmod(0o600)


def finished_run(sink: AuditSink, run_id: str, finished: datetime, calls: int = 2) -> None:
    ev = Events(run_id)
    at = audit_timestamp(finished)
    sink(ev.run_started(f"query of {run_id} 连接池") | {"at": at})
    sink(ev.round_started(1) | {"at": at})
    sink(ev.round_finished(1, [f"call-{n}" for n in range(calls)]) | {"at": at})
    for n in range(calls):
        sink(ev.tool_started(f"call-{n}", "query_logs", LOGS_INPUT) | {"at": at})
        sink(
            ev.tool_finished(f"call-{n}", "query_logs", "FOUND", projection={"lines": ["连接池耗尽"]})
            | {"at": at}
        )
    sink(ev.protocol("STOP_REQUIRED") | {"at": at})
    sink(ev.run_finished("DRAFT", "COMPLETED") | {"at": at})


@pytest.fixture
def store(db_path: Path) -> Iterator[SqliteAuditStore]:
    with SqliteAuditStore(db_path) as opened:
        yield opened


def test_prune_deletes_old_finished_runs_and_nothing_live(
    store: SqliteAuditStore, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_base, "PRUNE_BATCH", 3)  # several short transactions
    now = datetime.now(UTC)
    sink = AuditSink(store)
    for n in range(7):
        finished_run(sink, f"old-{n}", now - timedelta(days=40 + n))
    finished_run(sink, "recent", now - timedelta(days=2))
    # A run of this (live) process that started long ago and has not finished.
    live = Events("live-old")
    sink(live.run_started() | {"at": audit_timestamp(now - timedelta(days=90))})
    sink(
        live.tool_started("call-1", "query_logs", LOGS_INPUT)
        | {"at": audit_timestamp(now - timedelta(days=90))}
    )

    report = store.prune(timedelta(days=30))

    assert (report.runs, report.model_rounds, report.invocations, report.protocol_events) == (7, 7, 14, 7)
    assert report.cutoff.startswith(audit_timestamp(now - timedelta(days=30))[:13])
    remaining = {r["run_id"] for r in store.query("SELECT run_id FROM runs")}
    assert remaining == {"recent", "live-old"}
    for table in ("model_rounds", "invocations", "protocol_events"):
        runs = {row[0] for row in on_disk(db_path, f"SELECT DISTINCT run_id FROM {table}")}
        assert runs <= {"recent", "live-old"}, table
    assert AuditReader(store).invocations("live-old")[0]["status"] == "STARTED"
    # The index forgot the pruned rows too: search sees only what is left, and the index is sound (the
    # live run is not in it yet: it is indexed when it finishes).
    browser = AuditBrowser(store)
    assert {r["run_id"] for r in browser.invocations(InvocationFilter(text="连接池耗尽")).rows} == {"recent"}
    assert {r["run_id"] for r in browser.invocations(InvocationFilter(text="orders")).rows} == {
        "recent",
        "live-old",
    }
    on_disk(db_path, "INSERT INTO invocations_fts(invocations_fts, rank) VALUES ('integrity-check', 0)")
    on_disk(db_path, "INSERT INTO runs_fts(runs_fts, rank) VALUES ('integrity-check', 0)")

    store.vacuum()  # rebuilds the index, leaving the live run's rows to its finish
    assert {r["run_id"] for r in browser.invocations(InvocationFilter(text="连接池耗尽")).rows} == {"recent"}
    assert {r["run_id"] for r in browser.runs(text="query of").rows} == {"recent"}
    assert {r["run_id"] for r in browser.runs(text="orders").rows} == {"recent", "live-old"}
    sink(live.run_finished("DRAFT", "COMPLETED") | {"at": audit_timestamp(now)})
    # Now every row is indexed exactly once: the index matches the tables row for row.
    on_disk(db_path, "INSERT INTO invocations_fts(invocations_fts, rank) VALUES ('integrity-check', 1)")
    on_disk(db_path, "INSERT INTO runs_fts(runs_fts, rank) VALUES ('integrity-check', 1)")
    assert store.prune(timedelta(days=30)).runs == 0
    with pytest.raises(ValueError, match="older_than must not be negative"):
        store.prune(timedelta(days=-1))
