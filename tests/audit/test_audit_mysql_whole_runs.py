"""The team audit keeps every run whole when a writer is paused past its lease or its flow to the
server is cut mid-transaction (docs/RELIABILITY.md, "Team audit on MariaDB").

- A writer whose lease recovery elsewhere took (a laptop asleep, a frozen VM, SIGSTOP) runs nothing
  more: its next commit refuses the run with a typed audit error, its queued rows are dropped, and the
  audit keeps the run as recovery closed it (interrupted, every row in the text index). A writer whose
  lease merely expired, with nobody taking it, takes the run back whole.
- A COMMIT sent into a flow cut without a reset is noticed before the retry deadline; the store kills
  its orphaned connection by thread id over a new one and retries, and meanwhile another opener's
  recovery waits for none of the orphan's row locks.

Real MariaDB; a writer's pause is simulated deterministically (a heartbeat that never beats, a lease of
a few milliseconds, recovery by a second store) and once for real (SIGSTOP of `diagnose run`). Each
test has a database of its own.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pymysql
import pytest

from audit.browse import AuditBrowser, InvocationFilter
from audit.common import AuditStoreError
from audit.location import MysqlLocation
from audit.mysql_store import MysqlAuditStore
from audit.sink import AuditSink
from tests.support.audit_backends import AuditTarget
from tests.support.audit_events import KNOWLEDGE_INPUT, LOGS_INPUT, Events
from tests.support.mysql import root_connection
from tests.support.resilience import no_conclusion_draft, tool_call, write_config, write_scenario
from tests.support.tcp_proxy import TcpProxy

pytestmark = pytest.mark.mysql

REPO = Path(__file__).resolve().parents[2]
# A writer that stopped beating: no heartbeat within the test, a lease of a few milliseconds.
PAUSED = {"heartbeat_s": 3600.0, "lease_s": 0.02}
LOST = "lost its lease"


def _location(target: AuditTarget) -> MysqlLocation:
    assert isinstance(target.location, MysqlLocation)
    return target.location


def _admin(target: AuditTarget, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    with root_connection(_location(target).database) as conn, conn.cursor() as cursor:
        cursor.execute(sql, args)
        return list(cursor.fetchall())


def _until(check: Callable[[], bool], what: str, timeout_s: float = 30.0) -> None:
    give_up = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() >= give_up:
            pytest.fail(f"never happened: {what}")
        time.sleep(0.01)


def _lease_expired(target: AuditTarget, run_id: str) -> None:
    """Wait until the server's clock has passed the run's lease (the writer is "away")."""
    _until(
        lambda: (
            _admin(
                target,
                "SELECT 1 FROM run_leases WHERE run_id = %s AND expires_at < UTC_TIMESTAMP(6)",
                (run_id,),
            )
            != []
        ),
        f"the lease of {run_id} expired",
    )


def _run(target: AuditTarget, run_id: str) -> tuple[Any, ...]:
    (row,) = _admin(
        target, "SELECT outcome, interrupted, finished_at IS NOT NULL FROM runs WHERE run_id = %s", (run_id,)
    )
    return tuple(row)


def _calls(target: AuditTarget, run_id: str) -> list[tuple[Any, ...]]:
    return _admin(
        target,
        "SELECT tool_call_id, status FROM invocations WHERE run_id = %s ORDER BY tool_call_id",
        (run_id,),
    )


def _assert_every_row_indexed(target: AuditTarget) -> None:
    """Every finished run left the pending set with its rows in the text index, and search finds them
    through the index (a walk of one row: the index, not a scan, answers)."""
    assert (
        _admin(target, "SELECT run_id FROM runs WHERE finished_at IS NOT NULL AND fts_pending IS NOT NULL")
        == []
    )
    assert (
        _admin(
            target,
            "SELECT i.run_id, i.tool_call_id FROM invocations i JOIN runs r ON r.run_id = i.run_id"
            " LEFT JOIN invocation_trigrams t ON t.run_id = i.run_id AND t.tool_call_id = i.tool_call_id"
            " WHERE r.finished_at IS NOT NULL AND t.run_id IS NULL",
        )
        == []
    )
    assert (
        _admin(
            target,
            "SELECT r.run_id FROM runs r LEFT JOIN run_trigrams t ON t.run_id = r.run_id"
            " WHERE r.finished_at IS NOT NULL AND t.run_id IS NULL",
        )
        == []
    )


@pytest.fixture
def index_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    import audit.browse as browse_module

    monkeypatch.setattr(browse_module, "_WALK_LIMIT", {"invocations": 1, "runs": 1})


@pytest.fixture
def migrated(mariadb_audit: AuditTarget) -> AuditTarget:
    mariadb_audit.open().close()
    return mariadb_audit


@pytest.fixture
def paused_writer(migrated: AuditTarget) -> Iterator[MysqlAuditStore]:
    writer = MysqlAuditStore(_location(migrated), **PAUSED)
    try:
        yield writer
    finally:
        writer.close()


# --- 7. a writer that lost its lease stops ---------------------------------------------------------------


def test_a_writer_whose_run_recovery_closed_runs_no_more_tools(
    migrated: AuditTarget, paused_writer: MysqlAuditStore, index_plan: None
) -> None:
    """Paused in its first model round, past its lease; another host's recovery closes the run. Before,
    the writer went on: two tools ran, the run ended DRAFT on an interrupted row, and those rows never
    reached the text index."""
    ev, sink = Events("run-away"), AuditSink(paused_writer)
    sink(ev.run_started("支付回调超时 paused-writer"))
    sink(ev.round_started(1))
    _lease_expired(migrated, "run-away")
    with migrated.open() as other:  # another host opens the audit: its recovery closes the run
        assert _run(migrated, "run-away") == (None, 1, 1)

        sink(ev.round_finished(1, ["call-1"]))
        with pytest.raises(AuditStoreError, match=LOST):
            sink(ev.tool_started("call-1", "lookup_knowledge", KNOWLEDGE_INPUT))
        with pytest.raises(AuditStoreError, match=LOST):
            sink(ev.run_finished("DRAFT", "COMPLETED"))
        paused_writer.close()  # the rows it still had queued belong to a closed run: dropped

        assert _run(migrated, "run-away") == (None, 1, 1)  # as recovery left it: no outcome claimed
        assert _calls(migrated, "run-away") == []  # nothing executed after the lease was gone
        assert _admin(migrated, "SELECT count(*) FROM model_rounds WHERE run_id = 'run-away'") == [(0,)]
        assert _admin(migrated, "SELECT count(*) FROM run_leases") == [(0,)]
        _assert_every_row_indexed(migrated)
        assert [r["run_id"] for r in AuditBrowser(other).runs(text="paused-writer", limit=5).rows] == [
            "run-away"
        ]


def test_rows_queued_for_a_run_that_lost_its_lease_are_dropped_and_the_next_run_is_whole(
    migrated: AuditTarget, paused_writer: MysqlAuditStore, index_plan: None
) -> None:
    """Paused while its tool ran: the tool's finish and the next round were queued when recovery closed
    the run. Before, that queued finish (it must match a STARTED row, now INTERRUPTED) failed every
    later commit of the process: the console could start no other run."""
    ev, sink = Events("run-away"), AuditSink(paused_writer)
    sink(ev.run_started())
    sink(ev.tool_started("call-1", "query_logs", LOGS_INPUT))
    _lease_expired(migrated, "run-away")
    migrated.open().close()  # recovery elsewhere: call-1 INTERRUPTED, the run closed and indexed
    sink(ev.tool_finished("call-1", "query_logs", "FOUND", projection={"lines": [{"message": "池满"}]}))
    sink(ev.round_started(2))
    with pytest.raises(AuditStoreError, match=LOST):
        sink(ev.tool_started("call-2", "query_logs", LOGS_INPUT, round_=2))

    following = Events("run-next", session_id="session-next")  # the same process, its next run
    sink(following.run_started("下一次诊断 next-run"))
    sink(following.tool_started("call-1", "lookup_knowledge", KNOWLEDGE_INPUT))
    sink(
        following.tool_finished(
            "call-1", "lookup_knowledge", "FOUND", projection={"hits": [{"title": "连接池耗尽"}]}
        )
    )
    sink(following.run_finished("DRAFT", "COMPLETED"))
    paused_writer.close()

    assert _run(migrated, "run-away") == (None, 1, 1)
    assert _calls(migrated, "run-away") == [("call-1", "INTERRUPTED")]  # its finish never arrived
    assert _admin(migrated, "SELECT count(*) FROM model_rounds WHERE run_id = 'run-away'") == [(0,)]
    assert _run(migrated, "run-next") == ("DRAFT", 0, 1)
    assert _calls(migrated, "run-next") == [("call-1", "FOUND")]
    _assert_every_row_indexed(migrated)
    with migrated.open() as reader:
        found = AuditBrowser(reader).invocations(InvocationFilter(text="连接池耗尽"), limit=5).rows
        assert [(row["run_id"], row["tool_call_id"]) for row in found] == [("run-next", "call-1")]


def test_a_paused_writer_whose_lease_nobody_took_takes_its_run_back(
    migrated: AuditTarget, paused_writer: MysqlAuditStore
) -> None:
    """The lease expired but no recovery ran: the next commit renews it, so a recovery after that
    leaves the run alone and it finishes whole."""
    ev, sink = Events("run-late"), AuditSink(paused_writer)
    sink(ev.run_started())
    _lease_expired(migrated, "run-late")
    before = _admin(migrated, "SELECT expires_at FROM run_leases WHERE run_id = 'run-late'")
    sink(ev.tool_started("call-1", "query_logs", LOGS_INPUT))
    after = _admin(migrated, "SELECT expires_at FROM run_leases WHERE run_id = 'run-late'")
    assert after[0][0] > before[0][0]  # renewed in the commit that recorded the tool's start
    sink(ev.tool_finished("call-1", "query_logs", "EMPTY"))
    sink(ev.run_finished("DRAFT", "COMPLETED"))
    assert _run(migrated, "run-late") == ("DRAFT", 0, 1)
    assert _calls(migrated, "run-late") == [("call-1", "EMPTY")]
    _assert_every_row_indexed(migrated)


def test_recovery_leaves_a_run_whose_writer_is_renewing_its_lease_mid_commit(
    migrated: AuditTarget, paused_writer: MysqlAuditStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writer is back and renewing (its commit holds the lease row) when another host recovers:
    the lease looks expired to a plain read, yet the run is taken back, not closed, and recovery does
    not wait for the writer's lock either."""
    ev, sink = Events("run-back"), AuditSink(paused_writer)
    sink(ev.run_started())
    _lease_expired(migrated, "run-back")
    seen: list[tuple[Any, ...]] = []
    real_commit = pymysql.connections.Connection.commit

    def recover_elsewhere_first(conn: pymysql.connections.Connection) -> None:
        if not seen:
            seen.append(("armed",))
            with migrated.open(retry_deadline_s=6.0, connect_timeout_s=2.0) as other:
                assert other.recover() == []
                seen.append(_run(migrated, "run-back"))
        real_commit(conn)

    monkeypatch.setattr(pymysql.connections.Connection, "commit", recover_elsewhere_first)
    sink(ev.tool_started("call-1", "query_logs", LOGS_INPUT))
    monkeypatch.undo()
    assert seen[1:] == [(None, 0, 0)]  # untouched while the writer held its lease row
    sink(ev.tool_finished("call-1", "query_logs", "EMPTY"))
    sink(ev.run_finished("DRAFT", "COMPLETED"))
    assert _run(migrated, "run-back") == ("DRAFT", 0, 1)
    assert _calls(migrated, "run-back") == [("call-1", "EMPTY")]


@pytest.mark.long  # a `diagnose run` process (interpreter and Haystack start): ~10 s on two busy cores
def test_diagnose_run_stopped_past_its_lease_ends_with_the_audit_error_not_a_draft(
    migrated: AuditTarget, tmp_path: Path
) -> None:
    """The issue's reproduction, for real: `diagnose run` is SIGSTOPped in its first model round until
    its lease has expired and another opener's recovery closed the run, then continued. Before: exit 0,
    DRAFT, two tools run, in a run the audit shows as interrupted, with rows missing from the index."""
    where = _location(migrated)
    config = write_config(
        tmp_path / "team.toml",
        {
            "audit": {
                "url": f"mysql://{where.user}@{where.host}:{where.port}/{where.database}",
                "heartbeat_s": 0.05,
                "lease_s": 0.2,
            }
        },
    )
    call = tool_call("call-1", "lookup_knowledge", {"query": "支付超时 连接池"})
    second = tool_call("call-2", "lookup_knowledge", {"query": "连接池 配置"}, evaluates="call-1")
    script = write_scenario(
        tmp_path,
        {
            "name": "paused-writer",
            "query": "支付回调超时 sigstop-writer",
            "rounds": [
                {"tool_calls": [call], "delay_ms": 1500},
                {"tool_calls": [second]},
                {"text": no_conclusion_draft()},
            ],
        },
    )
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "console",
            "run",
            "--scenario",
            str(script),
            "--config",
            str(config),
            "--json",
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _until(lambda: _admin(migrated, "SELECT count(*) FROM runs") == [(1,)], "the run started", 60)
        os.kill(process.pid, signal.SIGSTOP)
        ((run_id,),) = _admin(migrated, "SELECT run_id FROM runs")
        assert _calls(migrated, run_id) == [], "the writer was stopped too late: a tool had started"
        _lease_expired(migrated, run_id)
        migrated.open().close()  # another host's recovery
        assert _run(migrated, run_id) == (None, 1, 1)
        os.kill(process.pid, signal.SIGCONT)
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            os.kill(process.pid, signal.SIGCONT)
            process.kill()
            process.communicate()
    assert process.returncode == 1, (out, err)
    result = json.loads(out)  # a typed end: the audit keeps the run as recovery closed it
    assert (result["outcome"], result["stop_reason"], result["draft"]) == ("FAILED", "AGENT_ERROR", None)
    assert result["failure"]["cause"] == "AUDIT_WRITE_FAILED"
    assert "Traceback" not in err
    (line,) = [line for line in err.splitlines() if line]
    assert line.startswith("diagnose: the audit could not be written, so the run was stopped:")
    assert LOST in line
    assert _run(migrated, run_id) == (None, 1, 1)
    assert _calls(migrated, run_id) == []
    _assert_every_row_indexed(migrated)


# --- 8. a network cut mid-transaction ---------------------------------------------------------------------


def test_a_commit_sent_into_a_cut_flow_is_retried_and_no_opener_waits_for_its_locks(
    migrated: AuditTarget, paused_writer: MysqlAuditStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The flow to the server is cut without a reset just as the run's finish is committed. Before, the
    COMMIT waited the whole read timeout (the retry deadline), was never retried, and the orphaned
    transaction kept the run's row locks: every other opener waited in recovery and failed
    "unavailable". Now the writer gives up on the flow before its deadline, kills its orphan by thread
    id over a new connection, and replays the finish once; meanwhile another opener's recovery closes a
    dead run without waiting for the orphan."""
    where = _location(migrated)
    AuditSink(paused_writer)(Events("run-dead").run_started())  # a writer gone for good
    _lease_expired(migrated, "run-dead")
    with TcpProxy(where.host, where.port) as proxy:
        through = MysqlLocation("127.0.0.1", proxy.port, where.user, where.database)
        writer = MysqlAuditStore(through, retry_deadline_s=6.0, connect_timeout_s=2.0)
        ev, sink = Events("run-cut"), AuditSink(writer)
        sink(ev.run_started("支付回调超时 cut-flow"))
        sink(ev.tool_started("call-1", "query_logs", LOGS_INPUT))
        sink(ev.tool_finished("call-1", "query_logs", "FOUND", projection={"lines": [{"message": "504"}]}))
        cut: dict[str, Any] = {}
        real_commit = pymysql.connections.Connection.commit

        def commit_into_a_cut_flow(conn: pymysql.connections.Connection) -> None:
            if not cut and conn.port == proxy.port:
                cut["orphan"] = conn.thread_id()
                proxy.freeze()  # the COMMIT goes nowhere, and nothing comes back
                with MysqlAuditStore(where, retry_deadline_s=6.0, connect_timeout_s=2.0):
                    cut["dead"] = _run(migrated, "run-dead")
                    cut["cut"] = _run(migrated, "run-cut")
            real_commit(conn)

        monkeypatch.setattr(pymysql.connections.Connection, "commit", commit_into_a_cut_flow)
        sink(ev.run_finished("DRAFT", "COMPLETED"))
        monkeypatch.undo()
        writer.close()

    assert cut["dead"] == (None, 1, 1)  # recovered while the orphan held the other run's locks
    assert cut["cut"] == (None, 0, 0)  # the orphan's finish was not committed, and not touched
    assert _run(migrated, "run-cut") == ("DRAFT", 0, 1)
    assert _calls(migrated, "run-cut") == [("call-1", "FOUND")]
    assert _admin(migrated, "SELECT count(*) FROM run_leases WHERE run_id = 'run-cut'") == [(0,)]
    orphan = cut["orphan"]
    assert _admin(
        migrated, "SELECT count(*) FROM information_schema.PROCESSLIST WHERE ID = %s", (orphan,)
    ) == [(0,)]
    _assert_every_row_indexed(migrated)


def test_a_thread_id_from_an_earlier_server_run_is_never_killed(migrated: AuditTarget) -> None:
    """After a server restart the orphan died with the server, and its id may now be another session's:
    the store kills an orphan only on the server run that held it."""
    from audit.mysql_store import _ServerThread

    bystander = root_connection(_location(migrated).database)
    try:
        with migrated.open() as store:
            assert isinstance(store, MysqlAuditStore)
            store.query("SELECT 1")
            current = store._conn_thread
            assert current is not None
            store._drop_connection(orphaned=True)
            store._orphan = _ServerThread(
                bystander.thread_id(), current.server, current.server_started - 3600
            )
            store.query("SELECT 1")  # a new connection: no KILL of the bystander
            with bystander.cursor() as cursor:
                cursor.execute("SELECT 1")
                assert cursor.fetchone() == (1,)
            # The same id on this server run is this store's orphan, and is killed.
            store._drop_connection(orphaned=True)
            store._orphan = _ServerThread(bystander.thread_id(), current.server, current.server_started)
            store.query("SELECT 1")
        processes = "SELECT count(*) FROM information_schema.PROCESSLIST WHERE ID = %s"
        assert _admin(migrated, processes, (bystander.thread_id(),)) == [(0,)]
    finally:
        with contextlib.suppress(pymysql.err.Error):  # killed: already closed
            bystander.close()


def test_the_read_timeout_is_shorter_than_the_retry_deadline() -> None:
    """A statement that hangs must be given up with time left to retry it."""
    location = MysqlLocation("127.0.0.1", 1, "auditor", "team_audit")
    with pytest.raises(ValueError, match="shorter than retry_deadline_s"):
        MysqlAuditStore(location, retry_deadline_s=5.0, read_timeout_s=5.0)
