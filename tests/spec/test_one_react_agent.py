"""Spec requirement: Diagnosis execution SHALL use one framework ReactAgent.

Every "#### Scenario:" of this requirement, end to end through the real Haystack Agent.
"""

from __future__ import annotations

from haystack.components.agents import Agent

from agent.model.call import GuardedChatGenerator
from tests.support import RecordingAdapter, harness
from tests.support.spec_scenarios import (
    LOG_DATA,
    NULL_DRAFT,
    as_text,
    assert_single_finish,
    call,
    checks,
    draft,
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
from tools.definitions import TOOL_NAMES


async def test_diagnosis_needs_tool_evidence(agent_runs: list[Agent]) -> None:
    final = draft(
        "payment-service 数据库连接池 HikariPool-1 耗尽导致支付超时。",
        [
            finding("payment-service 在 02:10Z 后持续报 HikariPool-1 连接获取超时。", "logs-02"),
            finding("runbook 将该症状归因于连接池耗尽。", "kb-01"),
        ],
        action_plan=["检查长事务与锁等待"],
        checked=["runbook 检索", "payment-service 02:00-03:00Z ERROR 日志"],
    )
    h = harness(
        scenario(
            tools_round(
                call(
                    "kb-01",
                    "lookup_knowledge",
                    {"query": "payment-service 支付超时 连接池耗尽 HikariPool", "top_k": 2},
                )
            ),
            tools_round(
                call(
                    "logs-02",
                    "query_logs",
                    logs_input(level="ERROR", contains="HikariPool-1", limit=5),
                    evaluated("kb-01"),
                )
            ),
            text_round(as_text(final)),
        )
    )

    result = await h.run()

    assert (result.outcome, result.stop_reason, result.failure) == ("DRAFT", "COMPLETED", None)
    assert result.draft is not None
    assert result.draft.model_dump(mode="json") == final
    # One Agent, invoked once, holding exactly the three frozen tools and the scripted model.
    assert len(agent_runs) == 1
    assert [getattr(t, "name", type(t).__name__) for t in agent_runs[0].tools] == list(TOOL_NAMES)
    generator = agent_runs[0].chat_generator
    assert isinstance(generator, GuardedChatGenerator)
    assert generator.inner is h.generator  # wrapped only to classify model errors
    assert h.generator.calls == 3
    assert len(h.generator.received) == 3
    # The framework loop carried the tool actions: the final round sees the whole ReAct transcript.
    assert [m.role.value for m in h.generator.received[2]] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
    ]
    kb, logs = seen(h, 2)
    assert kb == seen(h, 1)[0]
    assert kb["tool_call_id"] == "kb-01"
    assert kb["evidence_status"] == "FOUND"
    assert kb["evaluation_required"] is True
    assert kb["control"] is None
    assert kb["data"]["documents"]
    assert len(kb["data"]["documents"]) <= 2
    assert logs["tool_call_id"] == "logs-02"
    assert logs["evidence_status"] == "FOUND"
    assert {e["message"] for e in logs["data"]["entries"]} == {
        "HikariPool-1 - Connection is not available, request timed out after 30000ms"
    }
    assert started_tools(h) == [("kb-01", "lookup_knowledge"), ("logs-02", "query_logs")]
    assert checks(result) == [("kb-01", "FOUND", "GAINED"), ("logs-02", "FOUND", None)]
    assert len(h.of_type("run_started")) == 1
    assert_single_finish(h, result)


async def test_agent_execution_fails(agent_runs: list[Agent]) -> None:
    """The model call throws (the script has no second round): fail closed, no retry of anything."""
    logs = RecordingAdapter(answer=found(LOG_DATA))
    h = harness(
        scenario(tools_round(call("t-01", "query_logs", logs_input(level="ERROR")))),
        adapters={"query_logs": logs},
    )

    result = await h.run()

    assert (result.outcome, result.stop_reason, result.draft) == ("FAILED", "MODEL_ERROR", None)
    assert result.to_json_dict()["failure"] == {"code": "MODEL_ERROR", "detail": "ScriptExhausted"}
    # Exactly one attempt at round 2 (it raised): no second attempt, no second Agent.
    assert len(h.generator.received) == 2
    assert h.generator.calls == 1
    assert len(agent_runs) == 1
    assert [r.tool_call_id for r in logs.requests] == ["t-01"]
    assert result.usage.model_calls == 2
    # The one completed check is the only progress published.
    assert checks(result) == [("t-01", "FOUND", None)]
    assert_single_finish(h, result)


async def test_agent_execution_fails_with_invalid_structured_output(agent_runs: list[Agent]) -> None:
    logs = RecordingAdapter(answer=found(LOG_DATA))
    h = harness(
        scenario(
            tools_round(call("t-01", "query_logs", logs_input(level="ERROR"))),
            text_round("诊断结论：payment-service 连接池耗尽（见 t-01）。"),
            text_round(as_text(draft(missing=["spare round that must never be requested"]))),
        ),
        adapters={"query_logs": logs},
    )

    result = await h.run()

    assert (result.outcome, result.stop_reason, result.draft) == ("FAILED", "INVALID_DRAFT", None)
    assert result.to_json_dict()["failure"] == {
        "code": "INVALID_DRAFT",
        "violation": "NOT_A_JSON_OBJECT",
        "detail": "no JSON object: the text is prose",
    }
    assert h.generator.calls == 2
    assert len(h.generator.received) == 2
    assert len(agent_runs) == 1
    assert len(logs.requests) == 1
    assert_single_finish(h, result)


async def test_agent_execution_fails_before_any_check_publishes_no_progress() -> None:
    """A second run on the same use case finds the script exhausted at its first round."""
    h = harness(scenario(text_round(NULL_DRAFT)))
    first = await h.run()
    assert first.outcome == "DRAFT"

    second = await h.run()

    assert (second.outcome, second.stop_reason) == ("FAILED", "MODEL_ERROR")
    assert second.progress is None
    assert second.draft is None
    assert second.run_id != first.run_id
    assert second.session_id == first.session_id
    assert len(h.generator.received) == 2
    assert h.generator.calls == 1
