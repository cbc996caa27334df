"""The team audit on MariaDB: schema and migrations, many writers, retries without duplicates, a typed
failure when the server goes away, and lease-based crash recovery across processes
(docs/contracts.md, "Audit"). Each test uses its own freshly created database, dropped afterwards.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pymysql
import pytest

from audit.common import AuditStoreError
from audit.location import MysqlLocation
from audit.mysql.schema import MIGRATIONS
from audit.mysql.store import MysqlAuditStore
from audit.port import AuditStore
from audit.sink import AuditSink
from tests.support.audit_backends import AuditTarget
from tests.support.audit_events import LOGS_INPUT, Events
from tests.support.audit_reader import AuditReader
from tests.support.mysql import root_connection
from tests.support.tcp_proxy import TcpProxy

REPO = Path(__file__).resolve().parents[2]
WRITERS = 8


def _admin(database: str, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    with root_connection(database) as conn, conn.cursor() as cursor:
        cursor.execute(sql, args)
        return list(cursor.fetchall())


def _database(target: AuditTarget) -> str:
    assert isinstance(target.location, MysqlLocation)
    return target.location.database


def _writer(target: AuditTarget, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.support.audit_writer", "--url", target.url, *args],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )


def test_schema_is_innodb_utf8mb4_and_versioned(mariadb_audit: AuditTarget) -> None:
    with mariadb_audit.open() as store:
        assert isinstance(store, MysqlAuditStore)
        assert AuditReader(store).schema_version() == len(MIGRATIONS)
    tables = _admin(
        _database(mariadb_audit),
        "SELECT table_name, engine, table_collation FROM information_schema.tables WHERE table_schema = %s",
        (_database(mariadb_audit),),
    )
    names = {name for name, _, _ in tables}
    assert {"runs", "model_rounds", "invocations", "protocol_events", "run_leases"} <= names
    assert {(engine, collation) for _, engine, collation in tables} == {("InnoDB", "utf8mb4_bin")}


def test_the_same_columns_as_the_sqlite_file(mariadb_audit: AuditTarget, audit_store: AuditStore) -> None:
    file_store = audit_store
    with mariadb_audit.open() as server_store:
        for table in ("runs", "model_rounds", "invocations", "protocol_events"):
            in_file = [
                row["name"] for row in file_store.query(f"SELECT name FROM pragma_table_info('{table}')")
            ]
            on_server = [
                row["column_name"]
                for row in server_store.query(
                    "SELECT column_name AS column_name FROM information_schema.columns"
                    " WHERE table_schema = DATABASE() AND table_name = ? AND extra NOT LIKE '%INVISIBLE%'"
                    " ORDER BY ordinal_position",
                    (table,),
                )
            ]
            assert on_server == in_file, table


def test_processes_starting_at_once_migrate_once(mariadb_audit: AuditTarget) -> None:
    opened: list[AuditStore] = []
    errors: list[BaseException] = []

    def open_one() -> None:
        try:
            opened.append(mariadb_audit.open())
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for store in opened:
        store.close()
    assert errors == []
    assert len(opened) == 6
    rows = _admin(_database(mariadb_audit), "SELECT id, version FROM audit_schema_version")
    assert rows == [(1, len(MIGRATIONS))]


def test_a_newer_schema_is_refused(mariadb_audit: AuditTarget) -> None:
    mariadb_audit.open().close()
    _admin(_database(mariadb_audit), "UPDATE audit_schema_version SET version = 99")
    with pytest.raises(AuditStoreError, match="newer than this program"):
        mariadb_audit.open()


def test_a_started_row_is_committed_before_the_tool_runs(mariadb_audit: AuditTarget) -> None:
    with mariadb_audit.open() as store:
        ev, sink = Events("run-1"), AuditSink(store)
        sink(ev.run_started())
        sink(ev.round_started(1))
        sink(ev.tool_started("call-1", "query_logs", LOGS_INPUT))
        # Another connection (another host) sees the STARTED row and the round queued before it.
        database = _database(mariadb_audit)
        assert _admin(database, "SELECT status FROM invocations") == [("STARTED",)]
        assert _admin(database, "SELECT round FROM model_rounds") == [(1,)]


def test_a_killed_connection_is_replaced_without_losing_or_duplicating_rows(
    mariadb_audit: AuditTarget,
) -> None:
    database = _database(mariadb_audit)
    with mariadb_audit.open() as store:
        ev, sink = Events("run-1"), AuditSink(store)
        sink(ev.run_started())
        sink(ev.protocol("STOP_REQUIRED"))  # queued: rides in the next commit
        for (thread_id,) in _admin(
            database,
            "SELECT id FROM information_schema.processlist WHERE db = %s AND id <> CONNECTION_ID()",
            (database,),
        ):
            _admin(database, f"KILL CONNECTION {int(thread_id)}")
        sink(ev.tool_started("call-1", "query_logs", LOGS_INPUT))
        sink(ev.tool_finished("call-1", "query_logs", "EMPTY"))
        sink(ev.run_finished("DRAFT", "COMPLETED"))
    assert _admin(database, "SELECT tool_call_id, status FROM invocations") == [("call-1", "EMPTY")]
    assert _admin(database, "SELECT code FROM protocol_events") == [("STOP_REQUIRED",)]
    assert _admin(database, "SELECT run_id, outcome FROM runs") == [("run-1", "DRAFT")]


def test_a_commit_whose_answer_was_lost_is_not_applied_twice(
    mariadb_audit: AuditTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server committed, then the connection dropped before it said so: the retry must find the
    transaction's token and stop, not insert the protocol row again."""
    database = _database(mariadb_audit)
    with mariadb_audit.open() as store:
        ev, sink = Events("run-1"), AuditSink(store)
        sink(ev.run_started())
        real_commit = pymysql.connections.Connection.commit
        dropped: list[bool] = []

        def commit_then_drop(conn: pymysql.connections.Connection) -> None:
            real_commit(conn)
            if not dropped:
                dropped.append(True)
                conn.close()
                raise pymysql.err.OperationalError(2013, "Lost connection to server during query")

        monkeypatch.setattr(pymysql.connections.Connection, "commit", commit_then_drop)
        sink(ev.protocol("STOP_REQUIRED"))
        sink(ev.tool_started("call-1", "query_logs", LOGS_INPUT))
        monkeypatch.undo()
        assert dropped == [True]
    assert _admin(database, "SELECT code FROM protocol_events") == [("STOP_REQUIRED",)]
    assert _admin(database, "SELECT tool_call_id, status FROM invocations") == [("call-1", "STARTED")]


def test_a_deadlock_victim_is_replayed_once(
    mariadb_audit: AuditTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server picks this transaction as a deadlock victim and rolls it back after the queued rows
    went in: the retry replays the whole transaction, so each row exists exactly once."""
    database = _database(mariadb_audit)
    with mariadb_audit.open() as store:
        ev, sink = Events("run-1"), AuditSink(store)
        sink(ev.run_started())
        sink(ev.round_started(1))
        sink(ev.protocol("STOP_REQUIRED"))
        real_execute = pymysql.cursors.Cursor.execute
        victims: list[str] = []

        def deadlock_once(cursor: pymysql.cursors.Cursor, query: str, args: Any = None) -> int:
            if query.startswith("INSERT INTO invocations") and not victims:
                victims.append(query)
                cursor.connection.rollback()  # what InnoDB does to a deadlock victim
                raise pymysql.err.OperationalError(1213, "Deadlock found when trying to get lock")
            return int(real_execute(cursor, query, args))

        monkeypatch.setattr(pymysql.cursors.Cursor, "execute", deadlock_once)
        sink(ev.tool_started("call-1", "query_logs", LOGS_INPUT))
        monkeypatch.undo()
        assert len(victims) == 1
    assert _admin(database, "SELECT tool_call_id, status FROM invocations") == [("call-1", "STARTED")]
    assert _admin(database, "SELECT round FROM model_rounds") == [(1,)]
    assert _admin(database, "SELECT code FROM protocol_events") == [("STOP_REQUIRED",)]


def test_the_run_stops_typed_when_the_server_goes_away(mariadb_audit: AuditTarget) -> None:
    assert isinstance(mariadb_audit.location, MysqlLocation)
    with TcpProxy(mariadb_audit.location.host, mariadb_audit.location.port) as proxy:
        through_proxy = MysqlLocation("127.0.0.1", proxy.port, "root", _database(mariadb_audit))
        store = MysqlAuditStore(through_proxy, retry_deadline_s=1.0, connect_timeout_s=1.0)
        ev, sink = Events("run-1"), AuditSink(store)
        sink(ev.run_started())
        proxy.stop()
        with pytest.raises(AuditStoreError, match="unavailable"):
            sink(ev.tool_started("call-1", "query_logs", LOGS_INPUT))
        store.close()
    rows = _admin(_database(mariadb_audit), "SELECT tool_call_id FROM invocations")
    assert rows == []  # the tool never ran without its STARTED row


# 8 processes x 25 runs takes 20-30 s on two busy cores (mostly interpreter starts): it is a `long`
# test, and 4 processes x 3 runs run in the default suite.
@pytest.mark.parametrize(
    ("writers", "runs_per_writer"), [(4, 3), pytest.param(WRITERS, 25, marks=pytest.mark.long)]
)
def test_many_writer_processes_lose_and_duplicate_nothing(
    mariadb_audit: AuditTarget, writers: int, runs_per_writer: int
) -> None:
    mariadb_audit.open().close()  # schema first: the writers race on rows, not on the migration
    processes = [
        _writer(mariadb_audit, "--prefix", f"w{n}", "--runs", str(runs_per_writer)) for n in range(writers)
    ]
    assert [process.wait(timeout=180) for process in processes] == [0] * writers
    database = _database(mariadb_audit)
    total = writers * runs_per_writer
    assert _admin(database, "SELECT count(*), count(DISTINCT run_id) FROM runs") == [(total, total)]
    assert _admin(database, "SELECT count(*) FROM runs WHERE outcome = 'DRAFT' AND interrupted = 0") == [
        (total,)
    ]
    assert _admin(database, "SELECT status, count(*) FROM invocations GROUP BY status ORDER BY status") == [
        ("EMPTY", total),
        ("FOUND", total),
    ]
    assert _admin(database, "SELECT count(*) FROM model_rounds") == [(total,)]
    assert _admin(database, "SELECT count(*) FROM protocol_events") == [(total,)]
    assert _admin(database, "SELECT count(*) FROM run_leases") == [(0,)]
    expected = {f"w{n}-{i}" for n in range(writers) for i in range(runs_per_writer)}
    assert {row[0] for row in _admin(database, "SELECT run_id FROM runs")} == expected


def test_a_killed_writers_run_is_interrupted_after_its_lease_a_live_one_is_not(
    mariadb_audit: AuditTarget,
) -> None:
    mariadb_audit.open().close()
    lease = ["--heartbeat-s", "0.2", "--lease-s", "1.0"]
    doomed = _writer(mariadb_audit, "--prefix", "doomed", "--hold", *lease)
    alive = _writer(mariadb_audit, "--prefix", "alive", "--hold", *lease)
    try:
        for writer in (doomed, alive):
            assert writer.stdout is not None
            assert writer.stdout.readline().strip() == "ready"
        os.kill(doomed.pid, signal.SIGKILL)
        doomed.wait(timeout=10)
        with mariadb_audit.open() as reader:
            rows = AuditReader(reader)
            assert reader.recover() == []  # the lease has not expired yet: nobody is closed early
            closed: list[str] = []
            give_up = time.monotonic() + 20
            while not closed and time.monotonic() < give_up:
                time.sleep(0.2)
                closed = reader.recover()
            assert closed == ["doomed-held"]
            doomed_run, alive_run = rows.run("doomed-held"), rows.run("alive-held")
            assert doomed_run is not None
            assert alive_run is not None
            assert (doomed_run["interrupted"], doomed_run["outcome"]) == (1, None)
            assert doomed_run["finished_at"] is not None
            assert [i["status"] for i in rows.invocations("doomed-held")] == ["INTERRUPTED"]
            # The live writer on the same database keeps beating: untouched, several leases later.
            time.sleep(1.5)
            assert reader.recover() == []
            alive_run = rows.run("alive-held")
            assert alive_run is not None
            assert (alive_run["interrupted"], alive_run["finished_at"]) == (0, None)
            assert [i["status"] for i in rows.invocations("alive-held")] == ["STARTED"]
    finally:
        for writer in (doomed, alive):
            if writer.poll() is None:
                writer.kill()
            writer.wait(timeout=10)
            if writer.stdout is not None:
                writer.stdout.close()
