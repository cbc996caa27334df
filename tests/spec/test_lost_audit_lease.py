"""Spec: every run ends with a typed execution result and a closing `run_finished` event — also a run
whose team-audit lease was lost (issue 32, item 17).

Before, a writer paused past its lease (another host's recovery closed its run meanwhile) stopped with
exit 3, no result and no `run_finished`: scripts and the console learnt nothing about the run. Now
it ends FAILED / AGENT_ERROR with cause AUDIT_WRITE_FAILED (exit 1), its closing event reaches every
other sink, and the audit keeps the run as recovery closed it.

Real MariaDB, each test on a database of its own; the pause is simulated deterministically (a
heartbeat that never beats, a lease of 20 ms, recovery by a second store while the model "thinks").
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from agent.evidence import build_boundary
from agent.model.scripted import ScriptedChatGenerator
from agent.scenarios import Scenario
from agent.settings import load_settings
from agent.use_case import DiagnosisUseCase
from audit.location import MysqlLocation
from audit.mysql.store import MysqlAuditStore
from audit.sink import AuditSink
from tests.support.audit_backends import AuditTarget
from tests.support.mysql import root_connection
from tests.support.resilience import no_conclusion_draft, tool_call

pytestmark = pytest.mark.mysql

QUERY = "支付回调超时 lost-lease"


def _admin(target: AuditTarget, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    assert isinstance(target.location, MysqlLocation)
    with root_connection(target.location.database) as conn, conn.cursor() as cursor:
        cursor.execute(sql, args)
        return list(cursor.fetchall())


@pytest.fixture
def migrated(mariadb_audit: AuditTarget) -> AuditTarget:
    mariadb_audit.open().close()
    return mariadb_audit


@pytest.fixture
def paused_writer(migrated: AuditTarget) -> Iterator[MysqlAuditStore]:
    assert isinstance(migrated.location, MysqlLocation)
    writer = MysqlAuditStore(migrated.location, heartbeat_s=3600.0, lease_s=0.02)
    try:
        yield writer
    finally:
        writer.close()


async def test_a_run_whose_lease_was_lost_ends_typed_with_its_closing_event(
    migrated: AuditTarget, paused_writer: MysqlAuditStore
) -> None:
    events: list[dict[str, Any]] = []

    def away_in_the_first_round(event: Any) -> None:
        """While round 1 is with the model, the lease expires and another host's recovery runs."""
        events.append(event.to_wire())
        if event.type == "model_round_started" and event.round == 1:
            give_up = time.monotonic() + 30
            while not _admin(migrated, "SELECT 1 FROM run_leases WHERE expires_at < UTC_TIMESTAMP(6)"):
                assert time.monotonic() < give_up, "the lease never expired"
                time.sleep(0.01)
            migrated.open().close()

    rounds = [
        {"tool_calls": [tool_call("call-1", "lookup_knowledge", {"query": "支付超时 连接池"})]},
        {"text": no_conclusion_draft()},
    ]
    settings = load_settings(None)
    use_case = DiagnosisUseCase(
        settings,
        ScriptedChatGenerator(Scenario.model_validate({"name": "lost-lease", "rounds": rounds}).rounds),
        build_boundary(settings),
        sinks=[away_in_the_first_round],
        required_sinks=[AuditSink(paused_writer)],
    )

    result = await use_case.execute(QUERY)

    assert (result.outcome, result.stop_reason, result.draft) == ("FAILED", "AGENT_ERROR", None)
    assert result.exit_code == 1
    assert result.failure is not None
    assert result.failure.cause == "AUDIT_WRITE_FAILED"
    assert result.failure.detail is not None
    assert "lost its lease" in result.failure.detail
    # The closing event reached the other sinks, carrying the same result.
    assert events[-1]["type"] == "run_finished"
    assert (events[-1]["outcome"], events[-1]["stop_reason"]) == ("FAILED", "AGENT_ERROR")
    assert events[-1]["result"] == result.to_json_dict()
    assert [e["type"] for e in events].count("run_finished") == 1
    assert not [e for e in events if e["type"] == "tool_started"], "no tool ran once the lease was gone"
    # The audit keeps the run as recovery closed it: interrupted, no outcome claimed, nothing executed.
    ((run_id,),) = _admin(migrated, "SELECT run_id FROM runs")
    assert run_id == result.run_id
    assert _admin(migrated, "SELECT outcome, interrupted FROM runs") == [(None, 1)]
    assert _admin(migrated, "SELECT count(*) FROM invocations") == [(0,)]
