"""The audit write side: run events in, durable rows out (docs/contracts.md, "Audit", "Run events").

The tests of opening a file (its schema, migrations, refusals) build the SQLite store directly, not
through audit.factory: the store itself is under test.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from audit.common import AuditStoreError
from audit.port import AuditStore
from audit.sink import AuditSink
from audit.sqlite import store as store_module
from audit.sqlite.store import SqliteAuditStore
from tests.support.audit_backends import mariadb_target
from tests.support.audit_events import KNOWLEDGE_INPUT, LOGS_INPUT, RUN, SESSION, Events, on_disk
from tests.support.audit_reader import AuditReader
from tests.support.mysql import require_server


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "audit.db"  # where the `audit_store` fixture opens it


# Behaviour both stores must have runs on both: the file, and a fresh MariaDB database.
ON_BOTH_STORES = pytest.mark.parametrize(
    "store", ["sqlite", pytest.param("mariadb", marks=pytest.mark.mysql)], indirect=True
)


@pytest.fixture
def store(request: pytest.FixtureRequest) -> Iterator[AuditStore]:
    if getattr(request, "param", "sqlite") == "sqlite":
        yield request.getfixturevalue("audit_store")
        return
    require_server()
    with mariadb_target() as target, target.open() as opened:
        yield opened


def test_started_invocation_is_on_disk_before_the_tool_finishes(
    store: SqliteAuditStore, db_path: Path
) -> None:
    ev, sink = Events(), AuditSink(store)
    sink(ev.run_started())
    sink(ev.round_started(1))
    sink(ev.round_finished(1, ["call-1"]))
    sink(ev.tool_started("call-1", "lookup_knowledge", KNOWLEDGE_INPUT))

    rows = AuditReader(db_path).query("SELECT status, tool, session_id, round, input_json FROM invocations")
    assert rows == [
        {
            "status": "STARTED",
            "tool": "lookup_knowledge",
            "session_id": SESSION,
            "round": 1,
            "input_json": json.dumps(KNOWLEDGE_INPUT, ensure_ascii=False, sort_keys=True),
        }
    ]
    assert "连接池" in rows[0]["input_json"]  # readable, not \u-escaped

    sink(ev.tool_finished("call-1", "lookup_knowledge", "FOUND", projection={"hits": [{"title": "连接池"}]}))
    sink(ev.protocol("EVALUATION_RECORDED", "call-2", evaluated_tool_call_id="call-1", evaluation="GAINED"))

    (inv,) = AuditReader(store).invocations(RUN)
    assert inv["status"] == "FOUND"
    assert inv["evaluation"] == "GAINED"
    assert json.loads(inv["projection_json"]) == {"hits": [{"title": "连接池"}]}
    assert inv["finished_at"] == "2025-01-01T00:00:05.000000Z"
    assert inv["duration_ms"] == 34
    assert AuditReader(store).protocol_events(RUN) == []  # evaluations live on the invocation


@ON_BOTH_STORES
def test_full_run_is_recorded(store: AuditStore) -> None:
    ev, sink = Events(), AuditSink(store)
    sink(ev.run_started())
    sink(ev.round_started(1))
    sink(ev.budget())
    sink(ev.round_finished(1, ["call-1", "call-2"]))
    sink(ev.tool_started("call-1", "query_logs", LOGS_INPUT))
    sink(ev.tool_finished("call-1", "query_logs", "EMPTY"))
    sink(ev.tool_started("call-2", "query_mysql", {"sql": "DELETE FROM t", "database": None}))
    sink(
        ev.tool_finished(
            "call-2", "query_mysql", "ERROR", error_code="POLICY_REJECTED", reason="WRITE_STATEMENT"
        )
    )
    sink(ev.protocol("DUPLICATE_CALL", "call-3", tool="query_logs"))
    sink(ev.protocol("STOP_REQUIRED", None))
    sink(ev("something_new", payload=1))  # unknown types are ignored
    sink(ev.round_started(2))
    sink(ev.round_finished(2, [], has_text=True))
    sink(ev.run_finished("DRAFT", "COMPLETED"))

    run = AuditReader(store).run(RUN)
    assert run is not None
    assert run["session_id"] == SESSION
    assert run["query"] == "订单服务 5xx 升高"
    assert (run["outcome"], run["stop_reason"]) == ("DRAFT", "COMPLETED")
    assert run["started_at"] == "2025-01-01T00:00:01.000000Z"
    assert run["finished_at"] == "2025-01-01T00:00:14.000000Z"
    assert (run["model_calls"], run["prompt_tokens"], run["completion_tokens"], run["total_tokens"]) == (
        2,
        1600,
        120,
        1720,
    )
    assert json.loads(run["result_json"])["outcome"] == "DRAFT"
    assert run["failure_json"] is None
    assert run["pid"] == os.getpid()

    invocations = AuditReader(store).invocations(RUN)
    assert [(i["tool_call_id"], i["status"], i["error_code"], i["reason"]) for i in invocations] == [
        ("call-1", "EMPTY", None, None),
        ("call-2", "ERROR", "POLICY_REJECTED", "WRITE_STATEMENT"),
    ]
    assert invocations[0]["projection_json"] is None

    rounds = AuditReader(store).model_rounds(RUN)
    assert [(r["round"], json.loads(r["tool_call_ids"]), r["has_text"]) for r in rounds] == [
        (1, ["call-1", "call-2"], 0),
        (2, [], 1),
    ]
    assert rounds[0]["started_at"] == "2025-01-01T00:00:02.000000Z"
    assert rounds[0]["finished_at"] == "2025-01-01T00:00:04.000000Z"
    assert (rounds[0]["prompt_tokens"], rounds[0]["completion_tokens"], rounds[0]["duration_ms"]) == (
        800,
        60,
        12,
    )

    events = AuditReader(store).protocol_events(RUN)
    assert [(e["code"], e["tool_call_id"]) for e in events] == [
        ("DUPLICATE_CALL", "call-3"),
        ("STOP_REQUIRED", None),
    ]
    assert json.loads(events[0]["detail_json"]) == {"tool": "query_logs"}
    assert events[0]["at"] == "2025-01-01T00:00:09.000000Z"


@ON_BOTH_STORES
@pytest.mark.parametrize(
    ("outcome", "stop_reason", "closed"),
    [
        ("CANCELLED", "CANCELLED", "CANCELLED"),
        ("FAILED", "AGENT_ERROR", "INTERRUPTED"),
        ("BUDGET_EXHAUSTED", "DEADLINE_EXCEEDED", "INTERRUPTED"),
    ],
)
def test_finished_run_closes_started_invocations(
    store: AuditStore, outcome: str, stop_reason: str, closed: str
) -> None:
    ev, sink = Events(), AuditSink(store)
    sink(ev.run_started())
    sink(ev.tool_started("call-1", "query_logs", LOGS_INPUT))
    sink(ev.tool_finished("call-1", "query_logs", "FOUND", projection={"lines": []}))
    sink(ev.tool_started("call-2", "lookup_knowledge", KNOWLEDGE_INPUT))
    sink(ev.run_finished(outcome, stop_reason, failure={"code": stop_reason}))

    statuses = {
        i["tool_call_id"]: (i["status"], i["finished_at"]) for i in AuditReader(store).invocations(RUN)
    }
    assert statuses == {
        "call-1": ("FOUND", "2025-01-01T00:00:03.000000Z"),
        "call-2": (closed, "2025-01-01T00:00:05.000000Z"),
    }
    run = AuditReader(store).run(RUN)
    assert run is not None
    assert json.loads(run["failure_json"]) == {"code": stop_reason}


@ON_BOTH_STORES
def test_run_finished_without_run_started_still_records_the_run(store: AuditStore) -> None:
    ev = Events()
    AuditSink(store)(
        ev.run_finished("REJECTED", "QUERY_BLANK", failure={"code": "QUERY_BLANK"}, model_calls=0)
    )
    run = AuditReader(store).run(RUN)
    assert run is not None
    assert (run["outcome"], run["session_id"], run["model_calls"], run["started_at"]) == (
        "REJECTED",
        SESSION,
        0,
        None,
    )


@ON_BOTH_STORES
def test_list_runs_is_newest_first(store: AuditStore) -> None:
    for n in range(3):
        AuditSink(store)(Events(run_id=f"run-{n}").run_started() | {"at": f"2025-01-0{n + 1}T00:00:00Z"})
    assert [r["run_id"] for r in AuditReader(store).runs()] == ["run-2", "run-1", "run-0"]
    assert [r["run_id"] for r in AuditReader(store).runs(limit=1)] == ["run-2"]


@ON_BOTH_STORES
def test_finish_without_started_invocation_is_an_audit_error(store: AuditStore) -> None:
    ev, sink = Events(), AuditSink(store)
    sink(ev.run_started())
    with pytest.raises(AuditStoreError, match="no STARTED invocation"):
        sink(ev.tool_finished("call-9", "query_logs", "FOUND"))


@ON_BOTH_STORES
def test_finished_invocation_is_never_rewritten(store: AuditStore) -> None:
    ev, sink = Events(), AuditSink(store)
    sink(ev.run_started())
    sink(ev.tool_started("call-1", "query_logs", LOGS_INPUT))
    sink(ev.tool_finished("call-1", "query_logs", "EMPTY"))
    with pytest.raises(AuditStoreError):
        sink(ev.tool_finished("call-1", "query_logs", "FOUND"))
    assert AuditReader(store).invocations(RUN)[0]["status"] == "EMPTY"


@ON_BOTH_STORES
def test_write_failures_are_audit_errors(store: AuditStore) -> None:
    ev, sink = Events(), AuditSink(store)
    sink(ev.run_started())
    with pytest.raises(AuditStoreError):
        sink(ev.run_started())  # duplicate run_id
    with pytest.raises(AuditStoreError, match="missing field"):
        sink({"type": "tool_started", "run_id": RUN, "session_id": SESSION, "seq": 9, "at": "x"})
    store.close()
    with pytest.raises(AuditStoreError):
        sink(ev.tool_started("call-1", "query_logs", LOGS_INPUT))


def test_file_is_private_wal_and_versioned(store: SqliteAuditStore, db_path: Path) -> None:
    AuditSink(store)(Events().run_started())
    assert stat.S_IMODE(db_path.stat().st_mode) == 0o600
    wal = db_path.with_name(db_path.name + "-wal")
    assert wal.exists()
    assert stat.S_IMODE(wal.stat().st_mode) == 0o600
    assert on_disk(db_path, "PRAGMA journal_mode") == [("wal",)]
    assert on_disk(db_path, "PRAGMA user_version") == [(len(store_module.MIGRATIONS),)]
    assert store.schema_version == len(store_module.MIGRATIONS)
    indexes = {row[0] for row in on_disk(db_path, "SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert {
        "idx_invocations_run",
        "idx_invocations_tool_status_started",
        "idx_invocations_started",
        "idx_runs_started",
        "idx_protocol_events_run",
    } <= indexes


def test_contract_columns_exist(store: SqliteAuditStore, db_path: Path) -> None:
    expected = {
        "runs": "run_id session_id query outcome stop_reason started_at finished_at model_calls total_tokens",
        "model_rounds": "run_id round started_at finished_at prompt_tokens completion_tokens tool_call_ids",
        "invocations": "run_id tool_call_id session_id tool status error_code input_json projection_json"
        " evaluation started_at finished_at duration_ms",
        "protocol_events": "run_id tool_call_id code detail_json at",
    }
    for table, columns in expected.items():
        assert set(columns.split()) <= {row[1] for row in on_disk(db_path, f"PRAGMA table_info({table})")}


def test_invalid_status_is_rejected_by_the_schema(store: SqliteAuditStore) -> None:
    ev, sink = Events(), AuditSink(store)
    sink(ev.run_started())
    sink(ev.tool_started("call-1", "query_logs", LOGS_INPUT))
    with pytest.raises(AuditStoreError):
        sink(ev.tool_finished("call-1", "query_logs", "NOT_EXECUTED"))
    assert AuditReader(store).invocations(RUN)[0]["status"] == "STARTED"


def test_reopening_keeps_rows(db_path: Path) -> None:
    with SqliteAuditStore(db_path) as first:
        AuditSink(first)(Events().run_started())
    with SqliteAuditStore(db_path) as second:
        run = AuditReader(second).run(RUN)
        assert run is not None
        assert run["query"] == "订单服务 5xx 升高"
        assert second.schema_version == len(store_module.MIGRATIONS)


def test_corrupt_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "audit.db"
    path.write_bytes(os.urandom(4096))
    with pytest.raises(AuditStoreError, match="unusable"):
        SqliteAuditStore(path)


def test_unwritable_location_is_refused(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    with pytest.raises(AuditStoreError, match="cannot create"):
        SqliteAuditStore(blocker / "audit.db")
    with pytest.raises(AuditStoreError, match="not a regular file"):
        SqliteAuditStore(tmp_path)


def test_newer_schema_is_refused(db_path: Path) -> None:
    SqliteAuditStore(db_path).close()
    on_disk(db_path, "PRAGMA user_version = 7")
    with pytest.raises(AuditStoreError, match="newer"):
        SqliteAuditStore(db_path)


def test_migrations_apply_forward_once(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    SqliteAuditStore(db_path).close()
    applied: list[int] = []

    shipped = len(store_module.MIGRATIONS)

    def next_add_note(db: Any) -> None:
        if db.execute("PRAGMA database_list").fetchone()[2]:  # the file (the store also builds its
            applied.append(shipped + 1)  # reference schema in memory, to tell its objects from planted ones)
        db.execute("ALTER TABLE runs ADD COLUMN note TEXT")

    monkeypatch.setattr(store_module, "MIGRATIONS", [*store_module.MIGRATIONS, next_add_note])
    with SqliteAuditStore(db_path) as upgraded:
        assert upgraded.schema_version == shipped + 1
    with SqliteAuditStore(db_path) as reopened:
        assert reopened.schema_version == shipped + 1
    assert applied == [shipped + 1]
    assert "note" in {row[1] for row in on_disk(db_path, "PRAGMA table_info(runs)")}


def test_rows_without_a_guarantee_ride_in_the_next_durable_commit(
    store: SqliteAuditStore, db_path: Path
) -> None:
    """One commit per tool call: round rows wait for the STARTED row, on disk before its tool runs."""
    ev, sink = Events(), AuditSink(store)
    sink(ev.run_started())
    sink(ev.round_started(1))
    sink(ev.round_finished(1, ["call-1"]))
    on_file = AuditReader(db_path)  # its own connection: what another process sees
    assert store.deferred_writes == 2
    assert on_file.model_rounds(RUN) == []  # another process does not see them yet
    sink(ev.tool_started("call-1", "lookup_knowledge", KNOWLEDGE_INPUT))
    assert store.deferred_writes == 0
    assert [(r["round"], r["finished_at"] is not None) for r in on_file.model_rounds(RUN)] == [(1, True)]
    assert [i["status"] for i in on_file.invocations(RUN)] == ["STARTED"]

    sink(ev.tool_finished("call-1", "lookup_knowledge", "FOUND", projection={"hits": []}))
    assert [i["status"] for i in on_file.invocations(RUN)] == ["STARTED"]
    assert [i["status"] for i in AuditReader(store).invocations(RUN)] == [
        "FOUND"
    ]  # reads commit the queue first
    assert [i["status"] for i in on_file.invocations(RUN)] == ["FOUND"]


def test_a_failing_durable_write_keeps_the_rows_queued_before_it(
    store: SqliteAuditStore, db_path: Path
) -> None:
    ev, sink = Events(), AuditSink(store)
    sink(ev.run_started())
    sink(ev.round_started(1))
    with pytest.raises(AuditStoreError):
        sink(ev.run_started())  # the same run twice: refused
    assert [r["round"] for r in AuditReader(db_path).model_rounds(RUN)] == [1]


REFUSE_ROUNDS = (
    "CREATE TEMP TRIGGER refuse_rounds BEFORE INSERT ON model_rounds"
    " BEGIN SELECT RAISE(ABORT, 'disk says no'); END"
)


def test_queued_rows_a_reader_could_not_commit_stay_queued_for_the_run(
    store: SqliteAuditStore, db_path: Path
) -> None:
    """A failure met by a reader's flush (the audit screen, an export) must not drop the run's rows."""
    ev, sink = Events(), AuditSink(store)
    sink(ev.run_started())
    sink(ev.round_started(1))
    store.db.execute(REFUSE_ROUNDS)  # a passing failure of the file, on the store's own connection only
    with pytest.raises(AuditStoreError, match="disk says no"):
        AuditReader(store).runs()
    assert store.deferred_writes == 1
    store.db.execute("DROP TRIGGER temp.refuse_rounds")
    sink(ev.tool_started("call-1", "lookup_knowledge", KNOWLEDGE_INPUT))
    assert [r["round"] for r in AuditReader(db_path).model_rounds(RUN)] == [1]


def test_queued_rows_that_cannot_be_written_stop_the_run_at_its_next_write(store: SqliteAuditStore) -> None:
    ev, sink = Events(), AuditSink(store)
    sink(ev.run_started())
    sink(ev.round_started(1))
    store.db.execute(REFUSE_ROUNDS)
    with pytest.raises(AuditStoreError):
        AuditReader(store).runs()
    with pytest.raises(AuditStoreError, match="disk says no"):  # the run meets it too: it stops typed
        sink(ev.tool_started("call-1", "lookup_knowledge", KNOWLEDGE_INPUT))


def test_queued_rows_are_committed_on_close(db_path: Path) -> None:
    ev = Events()
    with SqliteAuditStore(db_path) as store:
        sink = AuditSink(store)
        sink(ev.run_started())
        sink(ev.round_started(1))
    assert [r["round"] for r in AuditReader(db_path).model_rounds(RUN)] == [1]
