"""The run-event wire format is pinned: the typed events write exactly the JSON objects of the contract.

The golden lines below were written by the dict-based emitter the typed protocol replaced; `--events`
and every consumer of the NDJSON depend on these bytes (key order, spelling, nulls).
"""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from agent.events import run_events
from agent.events.emitter import RunEventEmitter
from agent.events.run_events import (
    BudgetChanged,
    InvalidRunEvent,
    ModelRoundFinished,
    ModelRoundStarted,
    ProtocolChanged,
    ProtocolThresholds,
    RunFinished,
    RunLimits,
    RunStarted,
    ToolFinished,
    ToolStarted,
    parse_event,
)
from agent.vocabulary import EventType, InvocationStatus, Outcome, ProtocolCode, StopCause, StopReason
from console.commands.run import _NdjsonSink
from tests.support import harness
from tools.vocabulary import ErrorCode, Evaluation

AT = "2026-11-30T02:30:00.000000Z"
GOLDEN = [
    '{"type":"run_started","run_id":"run-0001","session_id":"session-test","seq":1,"at":"2026-11-30T02:30:00.000000Z","query":"payment-service 02:10Z 起超时","previous_turn":null,"model":"scripted: demo","limits":{"max_model_calls":8,"max_total_tokens":64000,"deadline_s":300.0,"max_run_bytes":262144},"protocol":{"max_consecutive_no_gain":3,"max_protocol_violations":3}}',
    '{"type":"model_round_started","run_id":"run-0001","session_id":"session-test","seq":2,"at":"2026-11-30T02:30:00.000000Z","round":1}',
    '{"type":"budget_changed","run_id":"run-0001","session_id":"session-test","seq":3,"at":"2026-11-30T02:30:00.000000Z","model_calls":{"used":1,"limit":8},"tokens":{"used":0,"limit":64000,"estimated":false},"run_bytes":{"used":120,"limit":262144},"deadline":{"elapsed_s":0.004,"limit_s":300.0},"exhausted":null}',
    '{"type":"model_round_finished","run_id":"run-0001","session_id":"session-test","seq":4,"at":"2026-11-30T02:30:00.000000Z","round":1,"duration_ms":12,"prompt_tokens":812,"completion_tokens":64,"usage_estimated":false,"tool_call_ids":["call-1"],"has_text":false}',
    '{"type":"tool_started","run_id":"run-0001","session_id":"session-test","seq":5,"at":"2026-11-30T02:30:00.000000Z","round":1,"tool_call_id":"call-1","tool":"query_logs","input":{"service":"payment-service","start":"2026-11-30T02:00:00Z","end":"2026-11-30T02:30:00Z","level":"ERROR","contains":null,"limit":50},"input_key":"{\\"contains\\":null}"}',
    '{"type":"tool_finished","run_id":"run-0001","session_id":"session-test","seq":6,"at":"2026-11-30T02:30:00.000000Z","round":1,"tool_call_id":"call-1","tool":"query_logs","status":"FOUND","error_code":null,"reason":null,"projection":{"entries":[{"message":"连接池耗尽"}],"returned":1},"duration_ms":3,"observation":{"tool_call_id":"call-1","tool":"query_logs","evidence_status":"FOUND","data":{"entries":[{"message":"连接池耗尽"}],"returned":1},"evaluation_required":true,"control":null}}',
    '{"type":"tool_finished","run_id":"run-0001","session_id":"session-test","seq":7,"at":"2026-11-30T02:30:00.000000Z","round":2,"tool_call_id":"call-2","tool":"query_mysql","status":"ERROR","error_code":"POLICY_REJECTED","reason":"WRITE_STATEMENT","projection":null,"duration_ms":1,"observation":{"tool_call_id":"call-2","tool":"query_mysql","evidence_status":"ERROR","error_code":"POLICY_REJECTED","reason":"WRITE_STATEMENT","control":null}}',
    '{"type":"protocol_changed","run_id":"run-0001","session_id":"session-test","seq":8,"at":"2026-11-30T02:30:00.000000Z","code":"EVALUATION_RECORDED","tool_call_id":"call-3","detail":{"evaluated_tool_call_id":"call-1","evaluation":"GAINED"},"state":{"pending_tool_call_id":null,"consecutive_no_gain":0,"max_consecutive_no_gain":3,"protocol_violations":0,"max_protocol_violations":3,"stop_required":false,"final_opportunity":false,"saturation":null}}',
    '{"type":"protocol_changed","run_id":"run-0001","session_id":"session-test","seq":9,"at":"2026-11-30T02:30:00.000000Z","code":"STOP_REQUIRED","tool_call_id":null,"detail":{"cause":"SATURATION"},"state":{"pending_tool_call_id":null,"consecutive_no_gain":3,"max_consecutive_no_gain":3,"protocol_violations":0,"max_protocol_violations":3,"stop_required":true,"final_opportunity":false,"saturation":"INFORMATION_SATURATED"}}',
    '{"type":"budget_changed","run_id":"run-0001","session_id":"session-test","seq":10,"at":"2026-11-30T02:30:00.000000Z","model_calls":{"used":4,"limit":4},"tokens":{"used":3000,"limit":64000,"estimated":true},"run_bytes":{"used":900,"limit":262144},"deadline":{"elapsed_s":0.5,"limit_s":300.0},"exhausted":"MODEL_CALLS_EXHAUSTED"}',
    '{"type":"run_finished","run_id":"run-0001","session_id":"session-test","seq":11,"at":"2026-11-30T02:30:00.000000Z","outcome":"BUDGET_EXHAUSTED","stop_reason":"MODEL_CALLS_EXHAUSTED","result":{"run_id":"run-0001","session_id":"session-test","outcome":"BUDGET_EXHAUSTED","stop_reason":"MODEL_CALLS_EXHAUSTED","draft":null,"progress":{"checks":[{"tool_call_id":"call-1","tool":"query_logs","evidence_status":"FOUND","evaluation":"GAINED"}],"stop_required":true,"saturation":null},"usage":{"model_calls":4,"prompt_tokens":2800,"completion_tokens":200,"total_tokens":3000},"failure":null}}',
]
# The contract's key order per event type (envelope first, then the type's fields).
ENVELOPE = ["type", "run_id", "session_id", "seq", "at"]
KEYS = {
    EventType.RUN_STARTED: [*ENVELOPE, "query", "previous_turn", "model", "limits", "protocol"],
    EventType.MODEL_ROUND_STARTED: [*ENVELOPE, "round"],
    EventType.MODEL_ROUND_FINISHED: [
        *ENVELOPE,
        *("round", "duration_ms", "prompt_tokens", "completion_tokens", "usage_estimated"),
        *("tool_call_ids", "has_text"),
    ],
    EventType.TOOL_STARTED: [*ENVELOPE, "round", "tool_call_id", "tool", "input", "input_key"],
    EventType.TOOL_FINISHED: [
        *ENVELOPE,
        *("round", "tool_call_id", "tool", "status", "error_code", "reason", "projection"),
        *("duration_ms", "observation"),
    ],
    EventType.PROTOCOL_CHANGED: [*ENVELOPE, "code", "tool_call_id", "detail", "state"],
    EventType.BUDGET_CHANGED: [*ENVELOPE, "model_calls", "tokens", "run_bytes", "deadline", "exhausted"],
    EventType.RUN_FINISHED: [*ENVELOPE, "outcome", "stop_reason", "result"],
}


def _state(no_gain: int, stop_required: bool, saturation: Any) -> Any:
    return {
        "pending_tool_call_id": None,
        "consecutive_no_gain": no_gain,
        "max_consecutive_no_gain": 3,
        "protocol_violations": 0,
        "max_protocol_violations": 3,
        "stop_required": stop_required,
        "final_opportunity": False,
        "saturation": saturation,
    }


def emit_representative_stream(emitter: RunEventEmitter) -> None:
    """One event of every type (two tool_finished, two protocol_changed, two budget_changed)."""
    emitter.emit(
        RunStarted,
        query="payment-service 02:10Z 起超时",
        previous_turn=None,
        model="scripted: demo",
        limits=RunLimits(max_model_calls=8, max_total_tokens=64000, deadline_s=300.0, max_run_bytes=262144),
        protocol=ProtocolThresholds(max_consecutive_no_gain=3, max_protocol_violations=3),
    )
    emitter.emit(ModelRoundStarted, round=1)
    emitter.emit(
        BudgetChanged,
        model_calls={"used": 1, "limit": 8},
        tokens={"used": 0, "limit": 64000, "estimated": False},
        run_bytes={"used": 120, "limit": 262144},
        deadline={"elapsed_s": 0.004, "limit_s": 300.0},
        exhausted=None,
    )
    emitter.emit(
        ModelRoundFinished,
        round=1,
        duration_ms=12,
        prompt_tokens=812,
        completion_tokens=64,
        usage_estimated=False,
        tool_call_ids=["call-1"],
        has_text=False,
    )
    business = {
        "service": "payment-service",
        "start": "2026-11-30T02:00:00Z",
        "end": "2026-11-30T02:30:00Z",
        "level": "ERROR",
        "contains": None,
        "limit": 50,
    }
    emitter.emit(
        ToolStarted,
        round=1,
        tool_call_id="call-1",
        tool="query_logs",
        input=business,
        input_key='{"contains":null}',
    )
    data = {"entries": [{"message": "连接池耗尽"}], "returned": 1}
    emitter.emit(
        ToolFinished,
        round=1,
        tool_call_id="call-1",
        tool="query_logs",
        status=InvocationStatus.FOUND,
        error_code=None,
        reason=None,
        projection=data,
        duration_ms=3,
        observation={
            "tool_call_id": "call-1",
            "tool": "query_logs",
            "evidence_status": "FOUND",
            "data": data,
            "evaluation_required": True,
            "control": None,
        },
    )
    emitter.emit(
        ToolFinished,
        round=2,
        tool_call_id="call-2",
        tool="query_mysql",
        status=InvocationStatus.ERROR,
        error_code=ErrorCode.POLICY_REJECTED,
        reason="WRITE_STATEMENT",
        projection=None,
        duration_ms=1,
        observation={
            "tool_call_id": "call-2",
            "tool": "query_mysql",
            "evidence_status": "ERROR",
            "error_code": "POLICY_REJECTED",
            "reason": "WRITE_STATEMENT",
            "control": None,
        },
    )
    emitter.emit(
        ProtocolChanged,
        code=ProtocolCode.EVALUATION_RECORDED,
        tool_call_id="call-3",
        detail={"evaluated_tool_call_id": "call-1", "evaluation": Evaluation.GAINED},
        state=_state(0, False, None),
    )
    emitter.emit(
        ProtocolChanged,
        code=ProtocolCode.STOP_REQUIRED,
        tool_call_id=None,
        detail={"cause": StopCause.SATURATION},
        state=_state(3, True, StopReason.INFORMATION_SATURATED),
    )
    emitter.emit(
        BudgetChanged,
        model_calls={"used": 4, "limit": 4},
        tokens={"used": 3000, "limit": 64000, "estimated": True},
        run_bytes={"used": 900, "limit": 262144},
        deadline={"elapsed_s": 0.5, "limit_s": 300.0},
        exhausted=StopReason.MODEL_CALLS_EXHAUSTED,
    )
    emitter.emit(
        RunFinished,
        outcome=Outcome.BUDGET_EXHAUSTED,
        stop_reason=StopReason.MODEL_CALLS_EXHAUSTED,
        result={
            "run_id": "run-0001",
            "session_id": "session-test",
            "outcome": "BUDGET_EXHAUSTED",
            "stop_reason": "MODEL_CALLS_EXHAUSTED",
            "draft": None,
            "progress": {
                "checks": [
                    {
                        "tool_call_id": "call-1",
                        "tool": "query_logs",
                        "evidence_status": "FOUND",
                        "evaluation": "GAINED",
                    }
                ],
                "stop_required": True,
                "saturation": None,
            },
            "usage": {
                "model_calls": 4,
                "prompt_tokens": 2800,
                "completion_tokens": 200,
                "total_tokens": 3000,
            },
            "failure": None,
        },
    )


def test_events_ndjson_is_byte_for_byte_the_contract() -> None:
    out = io.StringIO()
    emitter = RunEventEmitter("run-0001", "session-test", sinks=[_NdjsonSink(out)], clock=lambda: AT)
    emit_representative_stream(emitter)
    assert out.getvalue().splitlines() == GOLDEN


def test_parsing_the_json_gives_back_the_same_bytes() -> None:
    for line in GOLDEN:
        event = parse_event(json.loads(line))
        assert json.dumps(event.to_wire(), ensure_ascii=False, separators=(",", ":")) == line
        assert type(event).__name__ == "".join(part.title() for part in event.type.split("_"))


@pytest.mark.parametrize(
    "scenario", ["evidence-backed-diagnosis", "protocol-violations-saturate", "oversized-query-rejected"]
)
async def test_a_real_run_writes_every_type_with_its_contract_keys_in_order(scenario: str) -> None:
    from agent.scenarios import resolve_scenario

    h = harness(resolve_scenario(scenario))
    result = await h.run()
    assert h.events, "no events"
    for event in h.events:
        assert list(event) == KEYS[event["type"]], event["type"]
    assert [e["seq"] for e in h.events] == list(range(1, len(h.events) + 1))
    assert {(e["run_id"], e["session_id"]) for e in h.events} == {(result.run_id, result.session_id)}
    assert h.events[-1]["type"] == EventType.RUN_FINISHED


async def test_trusted_producers_are_not_validated_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """The hot path builds events directly: a whole run never goes through the pydantic parser."""
    from agent.scenarios import resolve_scenario

    parse_calls = []
    original = run_events._adapter

    def counting() -> Any:
        parse_calls.append(1)
        return original()

    h = harness(resolve_scenario("evidence-backed-diagnosis"))
    monkeypatch.setattr(run_events, "_adapter", counting)
    await h.run()
    assert len(h.events) > 20
    assert parse_calls == []


def test_fields_the_audit_does_not_keep_are_left_out_not_invented() -> None:
    common: dict[str, Any] = {"round": 1, "tool_call_id": "call-1", "tool": "query_logs"}
    finished = ToolFinished(
        "r",
        "s",
        1,
        AT,
        **common,
        status=InvocationStatus.FOUND,
        error_code=None,
        reason=None,
        projection={},
        duration_ms=None,
        observation=None,
    )
    assert "evaluation" not in finished
    assert "evaluation" not in finished.to_wire()
    replayed = ToolFinished(
        "r",
        "s",
        1,
        AT,
        **common,
        status=InvocationStatus.FOUND,
        error_code=None,
        reason=None,
        projection={},
        duration_ms=None,
        observation=None,
        evaluation=Evaluation.NO_GAIN,
    )
    assert list(replayed)[-1] == "evaluation"
    assert replayed["evaluation"] == "NO_GAIN"
    note = ProtocolChanged("r", "s", 2, AT, code=ProtocolCode.SATURATED, tool_call_id=None, detail={})
    assert "state" not in note.to_wire()
    assert len(note) == 8
    started = RunStarted("r", "s", 3, AT, query="q", previous_turn=None, model=None)
    assert list(started)[-3:] == ["query", "previous_turn", "model"]


def test_an_event_reads_as_its_json_object() -> None:
    event = parse_event(json.loads(GOLDEN[4]))
    assert event["type"] == "tool_started"
    assert event.get("tool") == "query_logs"
    assert event.get("nope") is None
    assert dict(event) == json.loads(GOLDEN[4])
    assert event == json.loads(GOLDEN[4])
    with pytest.raises(KeyError, match="evaluation"):
        event["evaluation"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"round": "first"}, "invalid field 'round'"),
        ({"status": "NOT_EXECUTED"}, "invalid field 'status'"),
        ({"tool_call_id": ...}, "missing field 'tool_call_id'"),
        ({"type": "tool_exploded"}, "unknown type 'tool_exploded'"),
        ({"type": ["tool_finished"]}, "unknown type"),
    ],
)
def test_a_foreign_object_that_is_not_an_event_is_refused_with_a_reason(
    change: dict[str, Any], message: str
) -> None:
    data = json.loads(GOLDEN[5])
    for key, value in change.items():
        if value is ...:
            del data[key]
        else:
            data[key] = value
    with pytest.raises(InvalidRunEvent, match=message):
        parse_event(data)


def test_an_absent_nullable_field_reads_as_null() -> None:
    data = json.loads(GOLDEN[3])  # model_round_finished
    for key in ("duration_ms", "prompt_tokens", "completion_tokens"):
        del data[key]
    event = parse_event(data)
    assert isinstance(event, ModelRoundFinished)
    assert event.duration_ms is None
    assert event.prompt_tokens is None
