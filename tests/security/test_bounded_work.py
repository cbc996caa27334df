"""Issue 20, items 10 and 11: the work one model reply, one run or one log query can cause is bounded.

Calls per reply and per run: the harness takes up at most `[budget] max_tool_calls_per_round` calls of
one reply and `max_tool_calls_per_run` over the run. Every later call is answered NOT_EXECUTED with the
control `{"code": "TOO_MANY_CALLS"}` (no count, cap or allowance: the model is never told budgets), and
never reaches an adapter or the audit's invocations; one audited protocol event per reply names the
cap and the refused calls for the operator.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.scenarios import ScenarioError, parse_scenario
from agent.settings import ConfigError, load_settings
from audit import AuditSink
from tests.support import RecordingAdapter, harness
from tests.support.audit_backends import AuditTarget
from tests.support.mysql import MysqlTestEnv
from tests.support.resilience import read_events, run_cli, write_scenario
from tests.support.spec_scenarios import (
    DOC_DATA,
    NULL_DRAFT,
    call,
    evaluated,
    found,
    scenario,
    seen,
    text_round,
    tools_round,
)
from tools.adapter import AdapterResult, ToolRequest
from tools.mysql import MysqlAdapter

TOO_MANY_CALLS = {"code": "TOO_MANY_CALLS"}


def refused(tool_call_id: str, tool: str) -> dict[str, Any]:
    """Exactly what the model receives for a call beyond a cap: nothing else, no number anywhere."""
    return {
        "tool_call_id": tool_call_id,
        "tool": tool,
        "evidence_status": "NOT_EXECUTED",
        "control": TOO_MANY_CALLS,
    }


def cap_events(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == "protocol_changed" and e["code"] == "TOO_MANY_CALLS"]


@dataclass
class CountingMysql:
    """The real `MysqlAdapter` on the local MariaDB, with a list of the calls that reached it."""

    adapter: MysqlAdapter
    reached: list[str] = field(default_factory=list)

    async def execute(self, request: ToolRequest) -> AdapterResult:
        self.reached.append(request.tool_call_id)
        return await self.adapter.execute(request)


# ------------------------------------------------------------------------------ item 11: calls per reply
@pytest.mark.mysql
async def test_one_reply_of_sixty_statements_runs_only_the_round_cap(
    mysql_env: MysqlTestEnv, audit_target: AuditTarget
) -> None:
    ids = [f"sql-{n:02d}" for n in range(1, 61)]
    sql = "SELECT id, status FROM orders WHERE id = {}"
    statements = [call(i, "query_mysql", {"sql": sql.format(n)}) for n, i in enumerate(ids, 1)]
    mysql_adapter = CountingMysql(mysql_env.adapter())
    store = audit_target.open()
    h = harness(
        scenario(tools_round(*statements), text_round(NULL_DRAFT)),
        adapters={"query_mysql": mysql_adapter},
        sinks=[AuditSink(store)],
    )
    try:
        result = await h.run()
        invocations = store.list_invocations(result.run_id)
        protocol_rows = store.list_protocol_events(result.run_id)
    finally:
        store.close()
        await mysql_adapter.adapter.aclose()

    assert (result.outcome, result.stop_reason) == ("DRAFT", "COMPLETED")
    cap = 8  # the default `[budget] max_tool_calls_per_round`
    assert (
        mysql_adapter.reached == ids[:cap]
    )  # the first eight, in the model's order; no other reached MariaDB
    assert h.settings.budget.max_tool_calls_per_round == cap
    assert [(i["tool_call_id"], i["status"]) for i in invocations] == [(i, "FOUND") for i in ids[:cap]]
    observations = seen(h, 1)  # also: no counter, threshold or budget word reaches the model
    assert [o["evidence_status"] for o in observations[:cap]] == ["FOUND"] * cap
    assert observations[cap:] == [refused(i, "query_mysql") for i in ids[cap:]]
    (event,) = cap_events(h.events)
    assert event["tool_call_id"] is None
    assert event["detail"] == {"cap": "ROUND", "limit": cap, "tool_call_ids": ids[cap:]}
    audited = [(r["code"], r["tool_call_id"], json.loads(r["detail_json"])) for r in protocol_rows]
    assert ("TOO_MANY_CALLS", None, event["detail"]) in audited


async def test_the_run_cap_holds_across_replies() -> None:
    knowledge = RecordingAdapter(answer=found(DOC_DATA))

    def lookup(call_id: str, previous: Any = None) -> dict[str, Any]:
        return call(call_id, "lookup_knowledge", {"query": f"runbook {call_id}"}, previous)

    h = harness(
        scenario(
            tools_round(lookup("a1"), lookup("a2"), lookup("a3")),
            tools_round(lookup("b1", evaluated("a1")), lookup("b2"), lookup("b3")),
            tools_round(lookup("c1", evaluated("b1")), lookup("c2")),
            text_round(NULL_DRAFT),
            settings={"budget": {"max_tool_calls_per_round": 3, "max_tool_calls_per_run": 5}},
        ),
        adapters={"lookup_knowledge": knowledge},
    )

    result = await h.run()

    assert (result.outcome, result.stop_reason) == ("DRAFT", "COMPLETED")
    assert [r.tool_call_id for r in knowledge.requests] == ["a1", "a2", "a3", "b1", "b2"]
    answered = seen(h, 3)  # every observation of the run, in order
    assert answered[5] == refused("b3", "lookup_knowledge")
    assert answered[6:] == [refused("c1", "lookup_knowledge"), refused("c2", "lookup_knowledge")]
    assert [e["detail"] for e in cap_events(h.events)] == [
        {"cap": "RUN", "limit": 5, "tool_call_ids": ["b3"]},
        {"cap": "RUN", "limit": 5, "tool_call_ids": ["c1", "c2"]},
    ]
    # A refused call is not read: c1's evaluation of b1 was never taken, so b1 is still unevaluated.
    assert [(c.tool_call_id, c.evaluation) for c in result.progress.checks][3:] == [  # type: ignore[union-attr]
        ("b1", None),
        ("b2", None),
    ]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    per_round=st.integers(1, 6),
    per_run=st.integers(1, 15),
    replies=st.lists(st.integers(1, 12), min_size=1, max_size=4),
)
async def test_exactly_the_calls_within_both_caps_run(
    per_round: int, per_run: int, replies: list[int]
) -> None:
    """Whatever the caps and however many calls each reply asks for, the calls taken up are the first
    `per_round` of each reply while the run has fewer than `per_run`; every other one is refused."""
    knowledge = RecordingAdapter(answer=found(DOC_DATA))
    rounds: list[dict[str, Any]] = []
    expected_run: list[str] = []
    expected_refused: list[str] = []
    pending: str | None = None
    for r, size in enumerate(replies, 1):
        ids = [f"r{r}-{n}" for n in range(1, size + 1)]
        calls = [call(ids[0], "lookup_knowledge", {"query": ids[0]}, evaluated(pending) if pending else None)]
        calls += [call(i, "lookup_knowledge", {"query": i}) for i in ids[1:]]
        rounds.append(tools_round(*calls))
        taken = ids[: max(0, min(per_round, per_run - len(expected_run)))]
        expected_run += taken
        expected_refused += ids[len(taken) :]
        pending = taken[0] if taken else pending
    h = harness(
        scenario(
            *rounds,
            text_round(NULL_DRAFT),
            settings={
                "budget": {
                    "max_model_calls": len(replies) + 2,
                    "max_tool_calls_per_round": per_round,
                    "max_tool_calls_per_run": per_run,
                }
            },
        ),
        adapters={"lookup_knowledge": knowledge},
    )

    result = await h.run()

    assert (result.outcome, result.stop_reason) == ("DRAFT", "COMPLETED")
    assert [r.tool_call_id for r in knowledge.requests] == expected_run
    answered = seen(h, len(replies))  # every observation of the run, in order
    assert [o["tool_call_id"] for o in answered if o["control"] == TOO_MANY_CALLS] == expected_refused
    assert all(o == refused(o["tool_call_id"], "lookup_knowledge") for o in answered if o["control"])
    in_events = [i for e in cap_events(h.events) for i in e["detail"]["tool_call_ids"]]
    assert in_events == expected_refused


def test_the_caps_are_budget_settings_a_scenario_or_the_environment_may_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DIAGNOSE_BUDGET__MAX_TOOL_CALLS_PER_ROUND", "2")
    monkeypatch.setenv("DIAGNOSE_BUDGET__MAX_TOOL_CALLS_PER_RUN", "3")
    budget = load_settings(None).budget
    assert (budget.max_tool_calls_per_round, budget.max_tool_calls_per_run) == (2, 3)

    monkeypatch.setenv("DIAGNOSE_BUDGET__MAX_TOOL_CALLS_PER_ROUND", "0")
    with pytest.raises(ConfigError, match="max_tool_calls_per_round"):
        load_settings(None)

    body = {"name": "x", "rounds": [{"text": NULL_DRAFT}]}
    limits = parse_scenario(json.dumps({**body, "settings": {"budget": {"max_tool_calls_per_run": 1}}}))
    assert limits.settings == {"budget": {"max_tool_calls_per_run": 1}}
    with pytest.raises(ScenarioError, match="max_tool_calls_per_run"):
        parse_scenario(json.dumps({**body, "settings": {"budget": {"max_tool_calls_per_run": 0}}}))


def test_diagnose_run_applies_a_scenario_files_cap_and_audits_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The whole path an operator takes: a scenario file's cap, the demo sources, the audit file."""
    services = ["payment-service", "order-service", "api-gateway", "account-service", "inventory-service"]
    window = {"start": "2026-11-30T02:00:00Z", "end": "2026-11-30T03:00:00Z"}
    calls = [call(f"logs-{n}", "query_logs", {"service": s, **window}) for n, s in enumerate(services, 1)]
    path = write_scenario(
        tmp_path,
        scenario(
            tools_round(*calls), text_round(NULL_DRAFT), settings={"budget": {"max_tool_calls_per_round": 2}}
        ),
    )
    audit, events = tmp_path / "audit.db", tmp_path / "events.ndjson"

    run = run_cli(capsys, "run", "--scenario", path, "--json", "--audit-db", audit, "--events", events)

    assert run.code == 0, run.err
    emitted = read_events(events)
    assert [e["tool_call_id"] for e in emitted if e["type"] == "tool_started"] == ["logs-1", "logs-2"]
    assert [e["detail"] for e in cap_events(emitted)] == [
        {"cap": "ROUND", "limit": 2, "tool_call_ids": ["logs-3", "logs-4", "logs-5"]}
    ]
    from audit.store import AuditStore

    store = AuditStore(audit)
    try:
        run_id = run.result["run_id"]
        assert [i["tool_call_id"] for i in store.list_invocations(run_id)] == ["logs-1", "logs-2"]
        assert [r["code"] for r in store.list_protocol_events(run_id)].count("TOO_MANY_CALLS") == 1
    finally:
        store.close()
