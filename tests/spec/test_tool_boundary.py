"""Spec requirement: Evidence Tools SHALL execute through the Harness boundary.

Every "#### Scenario:" of this requirement, end to end through the real Haystack Agent.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from tests.support import RecordingAdapter, failing, harness, tool_messages_seen_by_model
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
from tools.adapter import AdapterResult, ToolError, ToolRequest
from tools.definitions import TOOL_NAMES
from tools.input_models import LookupKnowledgeInput, QueryLogsInput


async def test_framework_requests_first_rag_evidence() -> None:
    kb = RecordingAdapter(answer=found(DOC_DATA))
    h = harness(
        scenario(
            tools_round(
                call("rag-7", "lookup_knowledge", {"query": "网关 504 upstream timeout", "top_k": 2})
            ),
            text_round(as_text(draft("上游超时。", [finding("runbook 描述了 504 的上游超时。", "rag-7")]))),
        ),
        adapters={"lookup_knowledge": kb},
    )

    result = await h.run()

    assert (result.outcome, result.stop_reason) == ("DRAFT", "COMPLETED")
    [request] = kb.requests
    assert request.tool_call_id == "rag-7"
    assert request.tool == "lookup_knowledge"
    assert request.run_id == result.run_id
    assert request.session_id == result.session_id
    assert request.session_id == h.use_case.session_id
    # Only the unwrapped business input: no envelope, no previous_observation.
    assert isinstance(request.input, LookupKnowledgeInput)
    assert request.input.model_dump() == {"query": "网关 504 upstream timeout", "top_k": 2}
    assert [(e["run_id"], e["tool_call_id"], e["input"]) for e in h.of_type("tool_started")] == [
        (result.run_id, "rag-7", {"query": "网关 504 upstream timeout", "top_k": 2})
    ]
    assert seen(h, 1) == [
        {
            "tool_call_id": "rag-7",
            "tool": "lookup_knowledge",
            "evidence_status": "FOUND",
            "data": DOC_DATA,
            "evaluation_required": True,
            "control": None,
        }
    ]
    assert checks(result) == [("rag-7", "FOUND", None)]


async def test_framework_requests_first_rag_evidence_without_a_call_id() -> None:
    """A provider that sends no tool call ID gets one deterministic ID shared by model, adapter and audit."""
    kb = RecordingAdapter(answer=found(DOC_DATA))
    h = harness(
        scenario(tools_round(call(None, "lookup_knowledge", {"query": "支付超时"})), text_round(NULL_DRAFT)),
        adapters={"lookup_knowledge": kb},
    )

    result = await h.run()

    assert result.outcome == "DRAFT"
    [request] = kb.requests
    assigned = request.tool_call_id
    assert assigned
    assert [c.id for c in h.generator.received[1][2].tool_calls] == [assigned]
    assert [o["tool_call_id"] for o in seen(h, 1)] == [assigned]
    assert started_tools(h) == [(assigned, "lookup_knowledge")]


async def test_model_continues_after_a_non_empty_result() -> None:
    logs = RecordingAdapter(answer=found(LOG_DATA))
    h = harness(
        scenario(
            tools_round(call("t-01", "query_logs", logs_input(level="ERROR"))),
            tools_round(call("t-02", "query_logs", logs_input("api-gateway"), evaluated("t-01", "GAINED"))),
            tools_round(
                call("t-03", "query_logs", logs_input("order-service"), evaluated("t-02", "NO_GAIN"))
            ),
            text_round(as_text(draft("连接池耗尽。", [finding("支付服务日志。", "t-01")]))),
        ),
        adapters={"query_logs": logs},
    )

    result = await h.run()

    assert (result.outcome, result.stop_reason) == ("DRAFT", "COMPLETED")
    assert [(r.tool_call_id, r.input.service) for r in logs.requests] == [  # type: ignore[attr-defined]
        ("t-01", "payment-service"),
        ("t-02", "api-gateway"),
        ("t-03", "order-service"),
    ]
    assert all(isinstance(r.input, QueryLogsInput) for r in logs.requests)
    assert checks(result) == [
        ("t-01", "FOUND", "GAINED"),
        ("t-02", "FOUND", "NO_GAIN"),
        ("t-03", "FOUND", None),
    ]
    assert [o["control"] for o in seen(h, 3)] == [None, None, None]
    recorded = [e["detail"] for e in h.of_type("protocol_changed") if e["code"] == "EVALUATION_RECORDED"]
    assert recorded == [
        {"evaluated_tool_call_id": "t-01", "evaluation": "GAINED"},
        {"evaluated_tool_call_id": "t-02", "evaluation": "NO_GAIN"},
    ]


@pytest.mark.parametrize(
    ("previous", "invalid_field"),
    [
        pytest.param(evaluated("t-99"), "previous_observation.tool_call_id", id="other-call"),
        pytest.param(evaluated("t-01", "MAYBE"), "previous_observation.evaluation", id="bad-evaluation"),
        pytest.param({"tool_call_id": "t-01"}, "previous_observation.evaluation", id="no-evaluation"),
        pytest.param({**evaluated("t-01"), "confidence": 0.9}, "previous_observation", id="extra-key"),
        pytest.param("t-01 GAINED", "previous_observation", id="not-an-object"),
    ],
)
async def test_model_continues_after_a_non_empty_result_only_with_an_exact_evaluation(
    previous: Any, invalid_field: str
) -> None:
    logs = RecordingAdapter(answer=found(LOG_DATA))
    h = harness(
        scenario(
            tools_round(call("t-01", "query_logs", logs_input(level="ERROR"))),
            tools_round(call("t-02", "query_logs", logs_input("api-gateway"), previous)),
            text_round(NULL_DRAFT),
        ),
        adapters={"query_logs": logs},
    )

    result = await h.run()

    assert [r.tool_call_id for r in logs.requests] == ["t-01"]
    assert seen(h, 2)[1] == {
        "tool_call_id": "t-02",
        "tool": "query_logs",
        "evidence_status": "NOT_EXECUTED",
        "control": {
            "code": "INVALID_PROGRESS_PROTOCOL",
            "invalid_field": invalid_field,
            "expected_tool_call_id": "t-01",
        },
    }
    assert checks(result) == [("t-01", "FOUND", None)]
    assert result.outcome == "DRAFT"


async def test_model_continues_after_an_empty_result_without_evaluating_it() -> None:
    logs = RecordingAdapter(answer=empty())
    h = harness(
        scenario(
            tools_round(call("t-01", "query_logs", logs_input(level="ERROR"))),
            tools_round(call("t-02", "query_logs", logs_input("api-gateway"))),
            text_round(NULL_DRAFT),
        ),
        adapters={"query_logs": logs},
    )

    result = await h.run()

    assert [r.tool_call_id for r in logs.requests] == ["t-01", "t-02"]
    assert seen(h, 1) == [
        {"tool_call_id": "t-01", "tool": "query_logs", "evidence_status": "EMPTY", "control": None}
    ]
    assert checks(result) == [("t-01", "EMPTY", None), ("t-02", "EMPTY", None)]


@pytest.mark.parametrize("omit_previous", [True, False], ids=["field-absent", "field-null"])
async def test_model_omits_required_progress_field(omit_previous: bool) -> None:
    logs = RecordingAdapter(answer=found(LOG_DATA))
    h = harness(
        scenario(
            tools_round(call("t-01", "query_logs", logs_input(level="ERROR"))),
            tools_round(
                call("t-02", "query_logs", logs_input("api-gateway"), None, omit_previous=omit_previous)
            ),
            tools_round(call("t-03", "query_logs", logs_input("api-gateway"), evaluated("t-01"))),
            text_round(
                as_text(
                    draft("连接池耗尽。", [finding("支付服务日志。", "t-01"), finding("网关日志。", "t-03")])
                )
            ),
        ),
        adapters={"query_logs": logs},
    )

    result = await h.run()

    repair = {
        "tool_call_id": "t-02",
        "tool": "query_logs",
        "evidence_status": "NOT_EXECUTED",
        "control": {
            "code": "INVALID_PROGRESS_PROTOCOL",
            "missing_field": "previous_observation",
            "expected_tool_call_id": "t-01",
        },
    }
    assert seen(h, 2)[1] == repair
    # The business tool did not run for t-02; the repaired call t-03 did, with its own ID.
    assert [r.tool_call_id for r in logs.requests] == ["t-01", "t-03"]
    assert started_tools(h) == [("t-01", "query_logs"), ("t-03", "query_logs")]
    assert ("INVALID_PROGRESS_PROTOCOL", "t-02") in protocol_codes(h)
    assert (result.outcome, result.stop_reason) == ("DRAFT", "COMPLETED")
    assert checks(result) == [("t-01", "FOUND", "GAINED"), ("t-03", "FOUND", None)]


async def test_model_omits_required_progress_field_and_cannot_cite_the_unexecuted_call() -> None:
    logs = RecordingAdapter(answer=found(LOG_DATA))
    h = harness(
        scenario(
            tools_round(call("t-01", "query_logs", logs_input(level="ERROR"))),
            tools_round(call("t-02", "query_logs", logs_input("api-gateway"), omit_previous=True)),
            text_round(as_text(draft("网关超时。", [finding("网关日志。", "t-02")]))),
        ),
        adapters={"query_logs": logs},
    )

    result = await h.run()

    assert (result.outcome, result.stop_reason) == ("FAILED", "INVALID_DRAFT")
    assert result.failure is not None
    assert result.failure.violation == "UNKNOWN_CITATION"


async def test_tool_execution_fails() -> None:
    logs = RecordingAdapter(answer=failing("TIMEOUT"))
    final = draft(
        None,
        [
            {
                "kind": "NEGATIVE_OBSERVATION",
                "statement": "日志查询超时，未能确认。",
                "scope": "payment-service 02:00-03:00Z",
                "evidence": ["t-01"],
            }
        ],
        checked=["payment-service 日志（超时）"],
        missing=["日志内容"],
    )
    h = harness(
        scenario(
            tools_round(call("t-01", "query_logs", logs_input(level="ERROR"))),
            text_round(as_text(final)),
        ),
        adapters={"query_logs": logs},
    )

    result = await h.run()

    assert seen(h, 1) == [
        {
            "tool_call_id": "t-01",
            "tool": "query_logs",
            "evidence_status": "ERROR",
            "error_code": "TIMEOUT",
            "control": None,
        }
    ]
    assert len(logs.requests) == 1  # no automatic retry
    assert h.generator.calls == 2
    [finished] = h.of_type("tool_finished")
    assert (finished["tool_call_id"], finished["status"], finished["error_code"]) == (
        "t-01",
        "ERROR",
        "TIMEOUT",
    )
    assert (result.outcome, result.stop_reason) == ("DRAFT", "COMPLETED")
    assert result.draft is not None
    assert result.draft.model_dump(mode="json") == final
    assert checks(result) == [("t-01", "ERROR", None)]


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        pytest.param(failing("UNAVAILABLE"), {"error_code": "UNAVAILABLE"}, id="tool-error"),
        pytest.param(
            lambda _r: (_ for _ in ()).throw(ToolError("POLICY_REJECTED", "WRITE_STATEMENT")),
            {"error_code": "POLICY_REJECTED", "reason": "WRITE_STATEMENT"},
            id="tool-error-reason",
        ),
        pytest.param(
            lambda _r: (_ for _ in ()).throw(ConnectionError("mysql://admin:s3cr3t@db-7 refused")),
            {"error_code": "BACKEND_ERROR"},
            id="raw-exception",
        ),
    ],
)
async def test_tool_execution_fails_with_only_a_stable_code(
    answer: Callable[[ToolRequest], AdapterResult], expected: dict[str, str]
) -> None:
    mysql = RecordingAdapter(answer=answer)
    h = harness(
        scenario(
            tools_round(
                call(
                    "db-1", "query_mysql", {"sql": "SELECT id FROM payments LIMIT 5", "database": "payments"}
                )
            ),
            text_round(NULL_DRAFT),
        ),
        adapters={"query_mysql": mysql},
    )

    result = await h.run()

    assert seen(h, 1) == [
        {
            "tool_call_id": "db-1",
            "tool": "query_mysql",
            "evidence_status": "ERROR",
            **expected,
            "control": None,
        }
    ]
    assert len(mysql.requests) == 1
    assert "s3cr3t" not in json.dumps(h.events, ensure_ascii=False)
    assert result.outcome == "DRAFT"


async def test_tool_execution_fails_when_mysql_is_not_configured() -> None:
    """Embedded defaults: query_mysql has no adapter, so the boundary answers UNAVAILABLE."""
    h = harness(
        scenario(
            tools_round(call("db-1", "query_mysql", {"sql": "SELECT 1", "database": None})),
            tools_round(call("db-2", "query_mysql", {"sql": "SELECT 1", "database": None})),
            text_round(NULL_DRAFT),
        )
    )

    result = await h.run()

    assert seen(h, 1) == [
        {
            "tool_call_id": "db-1",
            "tool": "query_mysql",
            "evidence_status": "ERROR",
            "error_code": "UNAVAILABLE",
            "control": None,
        }
    ]
    # The model repeating the failed call is not a retry either: it is refused as an equivalent call.
    assert seen(h, 2)[1] == {
        "tool_call_id": "db-2",
        "tool": "query_mysql",
        "evidence_status": "NOT_EXECUTED",
        "control": {"code": "DUPLICATE_CALL"},
    }
    assert started_tools(h) == [("db-1", "query_mysql")]
    assert checks(result) == [("db-1", "ERROR", None)]


async def test_unknown_tool_is_requested() -> None:
    adapters: dict[str, RecordingAdapter] = {name: RecordingAdapter() for name in TOOL_NAMES}
    h = harness(
        scenario(
            tools_round(call("x-1", "restart_service", {"service": "payment-service"})),
            text_round(as_text(draft(action_plan=["诊断助手不能重启服务"], missing=["尚未收集证据"]))),
        ),
        adapters=adapters,
    )

    result = await h.run()

    [observation] = seen(h, 1)
    assert observation == {
        "tool_call_id": "x-1",
        "tool": "restart_service",
        "evidence_status": "NOT_EXECUTED",
        "control": {"code": "UNKNOWN_TOOL"},
    }
    raw = tool_messages_seen_by_model(h.generator, 1)[0].tool_call_result.result
    assert not any(name in raw for name in TOOL_NAMES)  # the tool list is not leaked
    assert all(adapter.requests == [] for adapter in adapters.values())
    assert h.of_type("tool_started") == []
    assert h.of_type("tool_finished") == []
    assert ("UNKNOWN_TOOL", "x-1") in protocol_codes(h)
    assert (result.outcome, result.stop_reason) == ("DRAFT", "COMPLETED")
    assert checks(result) == []


async def test_unknown_tool_is_requested_between_registered_tools() -> None:
    logs = RecordingAdapter(answer=found(LOG_DATA))
    kb = RecordingAdapter(answer=found(DOC_DATA))
    h = harness(
        scenario(
            tools_round(
                call("t-1", "query_logs", logs_input(level="ERROR")),
                call("x-2", "run_shell", {"cmd": "kubectl rollout restart"}),
                call("t-3", "lookup_knowledge", {"query": "支付超时"}),
            ),
            text_round(
                as_text(draft("连接池耗尽。", [finding("日志。", "t-1"), finding("重启结果。", "x-2")]))
            ),
        ),
        adapters={"query_logs": logs, "lookup_knowledge": kb},
    )

    result = await h.run()

    # Results come back in call order, the unknown one answered by the harness itself.
    assert [(o["tool_call_id"], o["evidence_status"], o["control"]) for o in seen(h, 1)] == [
        ("t-1", "FOUND", None),
        ("x-2", "NOT_EXECUTED", {"code": "UNKNOWN_TOOL"}),
        ("t-3", "FOUND", None),
    ]
    assert started_tools(h) == [("t-1", "query_logs"), ("t-3", "lookup_knowledge")]
    # No canonical evidence record exists for the unknown tool: citing it fails the Draft.
    assert (result.outcome, result.stop_reason) == ("FAILED", "INVALID_DRAFT")
    assert result.failure is not None
    assert result.failure.violation == "UNKNOWN_CITATION"
    assert checks(result) == [("t-1", "FOUND", None), ("t-3", "FOUND", None)]
