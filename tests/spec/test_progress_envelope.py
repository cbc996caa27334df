"""Spec rule: each Agent-facing Tool input SHALL be a typed Envelope containing optional
`previous_observation` and required business `input`; the Tool interceptor SHALL validate and consume
the previous observation before execution.

- absent `previous_observation` means null;
- when present it must be the typed object and may only evaluate the observation that is pending;
  anything else is the repairable INVALID_PROGRESS_PROTOCOL (a counted violation, nothing executes);
- of several FOUND results in one round exactly one is pending, and only it says
  `evaluation_required: true` (the first FOUND of the round, in call order);
- tool call IDs are model output: bounded (128 characters) before anything runs, and IDs the harness
  assigns to ID-less calls are unique in the run.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from haystack.components.agents import Agent
from haystack.tools.tool import Tool

from audit import AuditSink, SqliteAuditStore
from tests.support import RecordingAdapter, harness, tool_messages_seen_by_model
from tests.support.audit_reader import AuditReader
from tests.support.spec_scenarios import (
    DOC_DATA,
    LOG_DATA,
    NULL_DRAFT,
    as_text,
    call,
    checks,
    draft,
    empty,
    evaluated,
    finding,
    found,
    logs_input,
    protocol_codes,
    scenario,
    seen,
    started_tools,
    text_round,
    tools_round,
)
from tools.definitions import MAX_TOOL_CALL_ID_CHARS, TOOL_NAMES

NOTHING_PENDING = {
    "code": "INVALID_PROGRESS_PROTOCOL",
    "invalid_field": "previous_observation",
    "expected_tool_call_id": None,
}


def not_executed(tool_call_id: str, control: dict[str, Any], tool: str = "query_logs") -> dict[str, Any]:
    return {"tool_call_id": tool_call_id, "tool": tool, "evidence_status": "NOT_EXECUTED", "control": control}


def violations(h: Any) -> int:
    return int(h.of_type("protocol_changed")[-1]["state"]["protocol_violations"])


# ------------------------------------------------------------------ item 4: optional previous_observation
async def test_previous_observation_is_optional_and_absent_means_null(agent_runs: list[Agent]) -> None:
    logs = RecordingAdapter(answer=empty())
    h = harness(
        scenario(
            tools_round(call("t-01", "query_logs", logs_input(level="ERROR"), omit_previous=True)),
            tools_round(call("t-02", "query_logs", logs_input(level="WARN"), omit_previous=True)),
            text_round(NULL_DRAFT),
        ),
        adapters={"query_logs": logs},
    )

    result = await h.run()

    assert (result.outcome, result.stop_reason) == ("DRAFT", "COMPLETED")
    assert [r.tool_call_id for r in logs.requests] == ["t-01", "t-02"]
    assert [o["evidence_status"] for o in seen(h, 2)] == ["EMPTY", "EMPTY"]
    assert checks(result) == [("t-01", "EMPTY", None), ("t-02", "EMPTY", None)]
    # The schema every tool shows the model says so too: only `input` is required.
    tools = [t for t in agent_runs[0].tools if isinstance(t, Tool)]
    assert [t.parameters["required"] for t in tools] == [["input"]] * len(TOOL_NAMES)


# ------------------------------------------------------------------ item 5: nothing pending
@pytest.mark.parametrize(
    ("first_answer", "previous"),
    [
        pytest.param(empty(), "t-01 GAINED", id="plain-string"),
        pytest.param(empty(), evaluated("t-77"), id="id-that-does-not-exist"),
        pytest.param(empty(), evaluated("t-01"), id="evaluates-an-empty-result"),
        pytest.param(empty(), {"tool_call_id": "t-01"}, id="untyped-object"),
        pytest.param(empty(), 42, id="number"),
    ],
)
async def test_previous_observation_when_nothing_is_pending_is_a_repairable_violation(
    first_answer: Any, previous: Any
) -> None:
    logs = RecordingAdapter(answer=first_answer)
    h = harness(
        scenario(
            tools_round(call("t-01", "query_logs", logs_input(level="ERROR"))),
            tools_round(call("t-02", "query_logs", logs_input(level="WARN"), previous)),
            tools_round(call("t-03", "query_logs", logs_input(level="WARN"))),
            text_round(NULL_DRAFT),
        ),
        adapters={"query_logs": logs},
    )

    result = await h.run()

    assert seen(h, 2)[1] == not_executed("t-02", NOTHING_PENDING)
    assert [r.tool_call_id for r in logs.requests] == ["t-01", "t-03"]  # t-02 never ran; t-03 is the repair
    assert ("INVALID_PROGRESS_PROTOCOL", "t-02") in protocol_codes(h)
    assert violations(h) == 1
    assert (result.outcome, result.stop_reason) == ("DRAFT", "COMPLETED")
    assert checks(result) == [("t-01", "EMPTY", None), ("t-03", "EMPTY", None)]


async def test_previous_observation_may_not_evaluate_a_call_of_the_same_round() -> None:
    logs = RecordingAdapter(answer=found(LOG_DATA))
    h = harness(
        scenario(
            tools_round(
                call("t-01", "query_logs", logs_input(level="ERROR")),
                call("t-02", "query_logs", logs_input("api-gateway"), evaluated("t-01")),
            ),
            text_round(NULL_DRAFT),
        ),
        adapters={"query_logs": logs},
    )

    result = await h.run()

    assert seen(h, 1)[1] == not_executed("t-02", NOTHING_PENDING)
    assert started_tools(h) == [("t-01", "query_logs")]
    assert violations(h) == 1
    assert checks(result) == [("t-01", "FOUND", None)]


async def test_a_second_conflicting_evaluation_is_a_violation_and_stays_in_the_audit(
    audit_store: SqliteAuditStore,
) -> None:
    answers = iter([found(LOG_DATA), empty(), empty()])
    logs = RecordingAdapter(answer=lambda request: next(answers)(request))
    h = harness(
        scenario(
            tools_round(call("t-01", "query_logs", logs_input(level="ERROR"))),
            tools_round(call("t-02", "query_logs", logs_input("api-gateway"), evaluated("t-01", "GAINED"))),
            tools_round(
                call("t-03", "query_logs", logs_input("order-service"), evaluated("t-01", "NO_GAIN"))
            ),
            text_round(as_text(draft("连接池耗尽。", [finding("支付服务日志。", "t-01")]))),
        ),
        adapters={"query_logs": logs},
        sinks=[AuditSink(audit_store)],
    )

    result = await h.run()
    invocations = AuditReader(audit_store).invocations(result.run_id)
    events = AuditReader(audit_store).protocol_events(result.run_id)

    assert seen(h, 3)[2] == not_executed("t-03", NOTHING_PENDING)
    assert [r.tool_call_id for r in logs.requests] == ["t-01", "t-02"]
    assert violations(h) == 1
    # The first evaluation stands; the conflicting one is recorded as what it was, not lost.
    assert [(i["tool_call_id"], i["evaluation"]) for i in invocations] == [("t-01", "GAINED"), ("t-02", None)]
    assert [(e["tool_call_id"], e["code"], json.loads(e["detail_json"])) for e in events] == [
        (
            "t-03",
            "INVALID_PROGRESS_PROTOCOL",
            {"invalid_field": "previous_observation", "expected_tool_call_id": None},
        )
    ]
    assert (result.outcome, result.stop_reason) == ("DRAFT", "COMPLETED")


async def test_parallel_calls_may_repeat_the_one_evaluation_of_their_round() -> None:
    """Models that call tools in parallel often copy the same evaluation into every call of the round:
    the identical restatement is accepted once; a different one in the same round is a violation."""
    logs = RecordingAdapter(answer=found(LOG_DATA))
    h = harness(
        scenario(
            tools_round(call("t-01", "query_logs", logs_input(level="ERROR"))),
            tools_round(
                call("t-02", "query_logs", logs_input("api-gateway"), evaluated("t-01", "GAINED")),
                call("t-03", "query_logs", logs_input("order-service"), evaluated("t-01", "GAINED")),
                call("t-04", "query_logs", logs_input("account-service"), evaluated("t-01", "NO_GAIN")),
            ),
            text_round(NULL_DRAFT),
        ),
        adapters={"query_logs": logs},
    )

    result = await h.run()

    assert [r.tool_call_id for r in logs.requests] == ["t-01", "t-02", "t-03"]
    assert seen(h, 2)[3] == not_executed("t-04", NOTHING_PENDING)
    recorded = [e["detail"] for e in h.of_type("protocol_changed") if e["code"] == "EVALUATION_RECORDED"]
    assert recorded == [{"evaluated_tool_call_id": "t-01", "evaluation": "GAINED"}]
    assert violations(h) == 1
    assert result.outcome == "DRAFT"


# ------------------------------------------------------------------ item 6: several FOUND in one round
@pytest.mark.parametrize("evaluate", ["t-02", "t-03"])
async def test_only_the_pending_observation_of_a_round_requires_evaluation(evaluate: str) -> None:
    answers = {"t-01": empty(), "t-02": found(LOG_DATA), "t-03": found(DOC_DATA), "t-04": empty()}
    adapter = RecordingAdapter(answer=lambda request: answers[request.tool_call_id](request))
    h = harness(
        scenario(
            tools_round(
                call("t-01", "query_logs", logs_input(level="ERROR")),
                call("t-02", "query_logs", logs_input("api-gateway")),
                call("t-03", "lookup_knowledge", {"query": "网关 504"}),
            ),
            tools_round(call("t-04", "query_logs", logs_input("order-service"), evaluated(evaluate))),
            text_round(NULL_DRAFT),
        ),
        adapters={"query_logs": adapter, "lookup_knowledge": adapter},
    )

    result = await h.run()

    first_round = seen(h, 1)
    assert [(o["tool_call_id"], o.get("evaluation_required")) for o in first_round] == [
        ("t-01", None),
        ("t-02", True),
        ("t-03", False),
    ]
    # The observation the model was told to evaluate is exactly the one the protocol accepts.
    if evaluate == "t-02":
        assert [r.tool_call_id for r in adapter.requests] == ["t-01", "t-02", "t-03", "t-04"]
        assert checks(result)[1] == ("t-02", "FOUND", "GAINED")
        assert "INVALID_PROGRESS_PROTOCOL" not in [code for code, _ in protocol_codes(h)]
    else:
        assert seen(h, 2)[3] == not_executed(
            "t-04",
            {
                "code": "INVALID_PROGRESS_PROTOCOL",
                "invalid_field": "previous_observation.tool_call_id",
                "expected_tool_call_id": "t-02",
            },
        )
        assert [r.tool_call_id for r in adapter.requests] == ["t-01", "t-02", "t-03"]


# ------------------------------------------------------------------ item 7: tool call IDs are model output
@pytest.mark.parametrize("length", [MAX_TOOL_CALL_ID_CHARS + 1, 201, 900_000])
async def test_an_overlong_tool_call_id_is_answered_with_a_control_and_never_runs(length: int) -> None:
    long_id = "c" * length
    logs = RecordingAdapter(answer=found(LOG_DATA))
    h = harness(
        scenario(
            tools_round(call(long_id, "query_logs", logs_input(level="ERROR"))),
            tools_round(call("t-02", "query_logs", logs_input(level="ERROR"))),
            text_round(as_text(draft("连接池耗尽。", [finding("支付服务日志。", "t-02")]))),
        ),
        adapters={"query_logs": logs},
    )

    result = await h.run()

    assert (result.outcome, result.stop_reason) == ("DRAFT", "COMPLETED")
    [observation] = seen(h, 1)
    assigned = observation["tool_call_id"]
    assert observation == not_executed(
        assigned, {"code": "INVALID_PROGRESS_PROTOCOL", "invalid_field": "tool_call_id"}
    )
    # The model's transcript, every event and the result carry only the bounded, assigned ID.
    assert [c.id for c in h.generator.received[1][2].tool_calls] == [assigned]
    assert len(assigned) <= MAX_TOOL_CALL_ID_CHARS
    assert long_id not in json.dumps(h.events)
    assert [r.tool_call_id for r in logs.requests] == ["t-02"]
    assert violations(h) == 1
    assert checks(result) == [("t-02", "FOUND", None)]


async def test_a_bounded_long_id_runs_and_its_evaluation_is_accepted() -> None:
    long_id = "c" * MAX_TOOL_CALL_ID_CHARS
    logs = RecordingAdapter(answer=found(LOG_DATA))
    h = harness(
        scenario(
            tools_round(call(long_id, "query_logs", logs_input(level="ERROR"))),
            tools_round(call("t-02", "query_logs", logs_input("api-gateway"), evaluated(long_id))),
            tools_round(call("t-03", "query_logs", logs_input("order-service"), evaluated("x" * 900_000))),
            text_round(as_text(draft("连接池耗尽。", [finding("支付服务日志。", long_id)]))),
        ),
        adapters={"query_logs": logs},
    )

    result = await h.run()

    assert (result.outcome, result.stop_reason) == ("DRAFT", "COMPLETED")
    assert [r.tool_call_id for r in logs.requests] == [long_id, "t-02"]
    assert checks(result) == [(long_id, "FOUND", "GAINED"), ("t-02", "FOUND", None)]
    # A 900 kB evaluation ID is a wrong evaluation, not a crash.
    assert seen(h, 3)[2] == not_executed(
        "t-03",
        {
            "code": "INVALID_PROGRESS_PROTOCOL",
            "invalid_field": "previous_observation.tool_call_id",
            "expected_tool_call_id": "t-02",
        },
    )


async def test_assigned_tool_call_ids_are_unique_in_the_run() -> None:
    """A provider ID that looks like an assigned one never makes an innocent ID-less call a violation."""
    logs = RecordingAdapter(answer=empty())
    h = harness(
        scenario(
            tools_round(
                call("call-r1-2", "query_logs", logs_input(level="ERROR")),
                call(None, "query_logs", logs_input(level="WARN")),
                call("call-r2-1", "query_logs", logs_input(level="INFO")),
            ),
            tools_round(
                call(None, "query_logs", logs_input("api-gateway")),
                call(None, "query_logs", logs_input("order-service")),
            ),
            text_round(NULL_DRAFT),
            settings={"protocol": {"max_consecutive_no_gain": 10}},
        ),
        adapters={"query_logs": logs},
    )

    result = await h.run()

    ids = [r.tool_call_id for r in logs.requests]
    assert len(ids) == len(set(ids)) == 5
    assert ids[0] == "call-r1-2"
    assert ids[2] == "call-r2-1"
    assert "INVALID_PROGRESS_PROTOCOL" not in [code for code, _ in protocol_codes(h)]
    assert [o["tool_call_id"] for o in seen(h, 2)[3:]] == ids[3:]
    assert [m.tool_call_result.origin.id for m in tool_messages_seen_by_model(h.generator, 2)] == ids
    assert result.outcome == "DRAFT"
