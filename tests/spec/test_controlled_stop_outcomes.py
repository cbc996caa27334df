"""Spec requirement: Diagnosis execution SHALL preserve controlled stop outcomes.

Every "#### Scenario:" of this requirement, end to end through the real Haystack Agent.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from haystack.components.agents import Agent

from tests.support import RecordingAdapter, harness
from tests.support.spec_scenarios import (
    LOG_DATA,
    NULL_DRAFT,
    STOP_REQUIRED,
    ExplodingHook,
    as_text,
    assert_single_finish,
    call,
    checks,
    draft,
    empty,
    evaluated,
    finding,
    found,
    logs_input,
    scenario,
    seen,
    started_tools,
    text_round,
    tools_round,
)
from tools.adapter import AdapterResult, ToolRequest


async def test_model_ignores_stop_required() -> None:
    logs = RecordingAdapter(answer=empty())
    h = harness(
        scenario(
            tools_round(call("t-01", "query_logs", logs_input("account-service", level="ERROR"))),
            tools_round(call("t-02", "query_logs", logs_input("account-service", level="WARN"))),
            tools_round(call("t-03", "query_logs", logs_input("account-service", level="INFO"))),
            text_round(as_text(draft(missing=["spare round that must never be requested"]))),
            settings={"protocol": {"max_consecutive_no_gain": 2}},
        ),
        adapters={"query_logs": logs},
    )

    result = await h.run()

    assert seen(h, 2)[1]["control"] == STOP_REQUIRED
    assert (result.outcome, result.stop_reason) == ("CONTROLLED_STOP", "INFORMATION_SATURATED")
    assert result.draft is None
    assert result.failure is None
    assert result.exit_code == 10
    assert result.progress is not None
    assert result.progress.model_dump() == {
        "checks": [
            {"tool_call_id": "t-01", "tool": "query_logs", "evidence_status": "EMPTY", "evaluation": None},
            {"tool_call_id": "t-02", "tool": "query_logs", "evidence_status": "EMPTY", "evaluation": None},
        ],
        "stop_required": True,
        "saturation": "INFORMATION_SATURATED",
    }
    assert [r.tool_call_id for r in logs.requests] == ["t-01", "t-02"]
    assert started_tools(h) == [("t-01", "query_logs"), ("t-02", "query_logs")]
    assert h.generator.calls == 3
    assert len(h.generator.received) == 3
    stopped = [e for e in h.of_type("protocol_changed") if e["code"] == "COLLECTION_STOPPED"]
    assert [e["detail"] for e in stopped] == [{"tool_call_ids": ["t-03"]}]
    assert_single_finish(h, result)


async def test_model_ignores_stop_required_after_protocol_violations() -> None:
    logs = RecordingAdapter(answer=found(LOG_DATA))
    h = harness(
        scenario(
            tools_round(call("t-01", "query_logs", logs_input(level="WARN"))),
            tools_round(call("t-02", "query_logs", logs_input("order-service"), omit_previous=True)),
            tools_round(call("t-03", "query_logs", logs_input("order-service"), evaluated("t-02"))),
            tools_round(call("t-04", "query_logs", logs_input("order-service"), evaluated("t-01"))),
            text_round(NULL_DRAFT),
            settings={"protocol": {"max_protocol_violations": 2}},
        ),
        adapters={"query_logs": logs},
    )

    result = await h.run()

    assert seen(h, 2)[1]["control"]["code"] == "INVALID_PROGRESS_PROTOCOL"
    assert seen(h, 3)[2] == {
        "tool_call_id": "t-03",
        "tool": "query_logs",
        "evidence_status": "NOT_EXECUTED",
        "control": STOP_REQUIRED,
    }
    assert (result.outcome, result.stop_reason) == ("CONTROLLED_STOP", "PROGRESS_PROTOCOL_VIOLATED")
    assert result.draft is None
    assert checks(result) == [("t-01", "FOUND", None)]
    assert result.progress is not None
    assert result.progress.saturation == "PROGRESS_PROTOCOL_VIOLATED"
    assert [r.tool_call_id for r in logs.requests] == ["t-01"]
    assert h.generator.calls == 4


async def test_unclassified_framework_failure(agent_runs: list[Agent]) -> None:
    exploding = ExplodingHook()
    logs = RecordingAdapter(answer=found(LOG_DATA))
    h = harness(
        scenario(
            tools_round(call("t-01", "query_logs", logs_input(level="ERROR"))),
            text_round(NULL_DRAFT),
        ),
        adapters={"query_logs": logs},
        extra_hooks={"before_tool": [exploding]},
    )

    result = await h.run()

    assert (result.outcome, result.stop_reason) == ("FAILED", "AGENT_ERROR")
    # No safe progress is fabricated.
    assert result.draft is None
    assert result.progress is None
    assert result.failure is not None
    assert result.failure.code == "AGENT_ERROR"
    assert "hunter2" not in json.dumps(result.to_json_dict()) + json.dumps(h.events, ensure_ascii=False)
    # No retry.
    assert exploding.calls == 1
    assert h.generator.calls == 1
    assert len(agent_runs) == 1
    assert result.exit_code == 1
    assert_single_finish(h, result)


async def test_unclassified_framework_failure_at_exit() -> None:
    h = harness(scenario(text_round(NULL_DRAFT)), extra_hooks={"on_exit": [ExplodingHook()]})

    result = await h.run()

    assert (result.outcome, result.stop_reason) == ("FAILED", "AGENT_ERROR")
    assert result.draft is None
    assert result.progress is None
    assert h.generator.calls == 1


async def test_unclassified_framework_failure_before_a_model_round() -> None:
    logs = RecordingAdapter(answer=found(LOG_DATA))
    h = harness(
        scenario(
            tools_round(call("t-01", "query_logs", logs_input(level="ERROR"))),
            text_round(NULL_DRAFT),
        ),
        adapters={"query_logs": logs},
        extra_hooks={"before_llm": [ExplodingHook(on_call=2)]},
    )

    result = await h.run()

    assert h.generator.calls == 1
    assert len(h.generator.received) == 1  # round 2 never reached the model
    assert (result.outcome, result.stop_reason) == ("FAILED", "AGENT_ERROR")
    assert result.progress is None
    assert result.usage.model_calls == 1


async def test_adapter_crash_is_a_tool_error_not_a_framework_failure() -> None:
    def crash(_request: ToolRequest) -> AdapterResult:
        raise RuntimeError("boom at 10.0.0.7")

    logs = RecordingAdapter(answer=crash)
    h = harness(
        scenario(tools_round(call("t-01", "query_logs", logs_input())), text_round(NULL_DRAFT)),
        adapters={"query_logs": logs},
    )

    result = await h.run()

    assert seen(h, 1)[0]["error_code"] == "BACKEND_ERROR"
    assert (result.outcome, result.stop_reason) == ("DRAFT", "COMPLETED")
    assert "10.0.0.7" not in json.dumps(h.events)


INVALID_FINALS = [
    pytest.param("", "EMPTY_OUTPUT", "the text is empty", id="empty"),
    pytest.param(None, "EMPTY_OUTPUT", "the model's last round returned no text", id="no-text"),
    pytest.param("  \n ", "EMPTY_OUTPUT", "the text is blank", id="blank"),
    pytest.param(
        '{"conclusion": null, "analysis": [',
        "MALFORMED_JSON",
        "the JSON object is cut off before its end (expecting value)",
        id="truncated",
    ),
    pytest.param('["t-01"]', "NOT_A_JSON_OBJECT", "starts with `[`: a JSON array, not an object", id="array"),
    pytest.param(
        as_text({**draft(), "confidence": "LEAKED-MARKER"}),
        "SCHEMA_MISMATCH",
        "unknown key `confidence` at the top level",
        id="extra-key",
    ),
    pytest.param(
        as_text(
            {
                **draft(),
                "analysis": [{"kind": "FINDING", "statement": "LEAKED-MARKER", "evidence": "NO_EVIDENCE"}],
            }
        ),
        "SCHEMA_MISMATCH",
        "`analysis[0]`: FINDING needs a non-empty list of tool call IDs",
        id="finding-without-ids",
    ),
    pytest.param(
        '{"conclusion": null, "conclusion": "LEAKED-MARKER", "analysis": [], "action_plan": [],'
        ' "recommendations": [], "limitations": {"checked_scope": [], "missing_info": []}}',
        "DUPLICATE_KEY",
        "duplicate key `conclusion`",
        id="duplicate-key",
    ),
    pytest.param(
        as_text(draft(None, [finding("LEAKED-MARKER", "t-77")])),
        "UNKNOWN_CITATION",
        "analysis[0] cites t-77, which is not a tool call of this run",
        id="unknown-id",
    ),
]


@pytest.mark.parametrize(("text", "violation", "detail"), INVALID_FINALS)
async def test_invalid_final_draft_after_verified_checks(
    text: str | None, violation: str, detail: str
) -> None:
    logs = RecordingAdapter(answer=found(LOG_DATA))
    kb = RecordingAdapter(answer=empty())
    h = harness(
        scenario(
            tools_round(call("t-01", "query_logs", logs_input(level="ERROR"))),
            tools_round(call("t-02", "lookup_knowledge", {"query": "支付超时"}, evaluated("t-01"))),
            text_round(text),
            text_round(as_text(draft(missing=["repair round that must never be requested"]))),
        ),
        adapters={"query_logs": logs, "lookup_knowledge": kb},
    )

    result = await h.run()

    assert (result.outcome, result.stop_reason, result.draft) == ("FAILED", "INVALID_DRAFT", None)
    # Why, as safe metadata: where and what, never the refused text.
    assert result.to_json_dict()["failure"] == {
        "code": "INVALID_DRAFT",
        "violation": violation,
        "detail": detail,
    }
    assert result.progress is not None
    assert result.progress.model_dump() == {
        "checks": [
            {
                "tool_call_id": "t-01",
                "tool": "query_logs",
                "evidence_status": "FOUND",
                "evaluation": "GAINED",
            },
            {
                "tool_call_id": "t-02",
                "tool": "lookup_knowledge",
                "evidence_status": "EMPTY",
                "evaluation": None,
            },
        ],
        "stop_required": False,
        "saturation": None,
    }
    # No repair round, and the discarded text is nowhere in the result or the run_finished event.
    assert h.generator.calls == 3
    assert len(h.generator.received) == 3
    assert "LEAKED-MARKER" not in json.dumps(result.to_json_dict(), ensure_ascii=False)
    assert "LEAKED-MARKER" not in json.dumps(h.of_type("run_finished"), ensure_ascii=False)
    assert_single_finish(h, result)


@pytest.mark.parametrize(("text", "violation", "detail"), INVALID_FINALS)
async def test_invalid_final_draft_without_verified_checks(
    text: str | None, violation: str, detail: str
) -> None:
    h = harness(
        scenario(
            text_round(text),
            text_round(as_text(draft(missing=["repair round that must never be requested"]))),
        )
    )

    result = await h.run()

    assert (result.outcome, result.stop_reason) == ("FAILED", "INVALID_DRAFT")
    # Why, as safe metadata: where and what, never the refused text.
    assert result.to_json_dict()["failure"] == {
        "code": "INVALID_DRAFT",
        "violation": violation,
        "detail": detail,
    }
    # Nothing is fabricated: no Draft (not even a no-conclusion one) and no progress.
    assert result.draft is None
    assert result.progress is None
    assert h.generator.calls == 1
    assert len(h.generator.received) == 1


@pytest.mark.parametrize(
    "first_round",
    [
        pytest.param(tools_round(call("x-1", "page_oncall", {"team": "payment"})), id="unknown-tool-only"),
        pytest.param(
            tools_round(call("t-1", "query_logs", {"service": "payment-service"})), id="invalid-input-only"
        ),
    ],
)
async def test_invalid_final_draft_without_verified_checks_after_unexecuted_calls(
    first_round: dict[str, Any],
) -> None:
    logs = RecordingAdapter(answer=found(LOG_DATA))
    h = harness(scenario(first_round, text_round("我无法给出结论。")), adapters={"query_logs": logs})

    result = await h.run()

    assert logs.requests == []
    assert (result.outcome, result.stop_reason) == ("FAILED", "INVALID_DRAFT")
    assert result.draft is None
    assert result.progress is None


async def test_invalid_final_draft_with_deeply_nested_json_fails_closed() -> None:
    text = '{"conclusion": ' + "[" * 3000 + "]" * 3000 + "}"
    h = harness(scenario(text_round(text)))

    result = await h.run()

    assert (result.outcome, result.stop_reason) == ("FAILED", "INVALID_DRAFT")
    assert len(h.of_type("run_finished")) == 1


async def test_invalid_final_draft_that_is_not_utf8_encodable_fails_closed() -> None:
    text = as_text(draft(action_plan=["\ud800"]))
    h = harness(scenario(text_round(text)))

    result = await h.run()

    assert (result.outcome, result.stop_reason) == ("FAILED", "INVALID_DRAFT")
    assert len(h.of_type("run_finished")) == 1
