"""Spec requirement: Every model round SHALL be controlled by RunContext.

Every "#### Scenario:" of this requirement, end to end through the real Haystack Agent.
"""

from __future__ import annotations

from tests.support import RecordingAdapter, harness
from tests.support.spec_scenarios import (
    DOC_DATA,
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
    last_user_text,
    logs_input,
    protocol_codes,
    scenario,
    started_tools,
    text_round,
    tools_round,
)


async def test_react_performs_two_model_rounds() -> None:
    logs = RecordingAdapter(answer=found(LOG_DATA))
    h = harness(
        scenario(
            tools_round(call("t-01", "query_logs", logs_input(level="ERROR")), prompt=700, completion=30),
            text_round(
                as_text(draft("连接池耗尽。", [finding("连接获取超时。", "t-01")])),
                prompt=900,
                completion=120,
            ),
        ),
        adapters={"query_logs": logs},
    )

    result = await h.run()

    assert (result.outcome, result.stop_reason) == ("DRAFT", "COMPLETED")
    assert result.usage.model_dump() == {
        "model_calls": 2,
        "prompt_tokens": 1600,
        "completion_tokens": 150,
        "total_tokens": 1750,
    }
    assert h.generator.calls == 2
    assert len(h.generator.received) == 2
    assert [e["round"] for e in h.of_type("model_round_started")] == [1, 2]
    assert [
        (e["round"], e["prompt_tokens"], e["completion_tokens"], e["tool_call_ids"], e["has_text"])
        for e in h.of_type("model_round_finished")
    ] == [(1, 700, 30, ["t-01"], False), (2, 900, 120, [], True)]
    gauge = h.of_type("budget_changed")[-1]
    assert gauge["model_calls"] == {"used": 2, "limit": 8}
    assert gauge["tokens"]["used"] == 1750
    assert gauge["exhausted"] is None
    assert len(logs.requests) == 1


async def test_model_call_budget_is_exhausted() -> None:
    kb = RecordingAdapter(answer=found(DOC_DATA))
    logs = RecordingAdapter(answer=found(LOG_DATA))
    h = harness(
        scenario(
            tools_round(call("t-01", "lookup_knowledge", {"query": "支付失败率升高"})),
            tools_round(call("t-02", "query_logs", logs_input(level="ERROR"), evaluated("t-01"))),
            text_round(as_text(draft(missing=["spare round that must never be requested"]))),
            settings={"budget": {"max_model_calls": 2}},
        ),
        adapters={"lookup_knowledge": kb, "query_logs": logs},
    )

    result = await h.run()

    assert (result.outcome, result.stop_reason) == ("BUDGET_EXHAUSTED", "MODEL_CALLS_EXHAUSTED")
    assert result.draft is None
    assert result.failure is None
    assert result.exit_code == 11
    # Before the last permitted round the model was told to stop, with nothing else in that message.
    assert last_user_text(h, 1) == '{"control":{"code":"STOP_REQUIRED"}}'
    assert h.generator.received[1][-1].role.value == "user"
    # The model asked for a tool anyway: nothing executed and no further round reached the model.
    assert h.generator.calls == 2
    assert len(h.generator.received) == 2
    assert [r.tool_call_id for r in kb.requests] == ["t-01"]
    assert logs.requests == []
    assert started_tools(h) == [("t-01", "lookup_knowledge")]
    assert result.usage.model_calls == 2
    assert [e["round"] for e in h.of_type("model_round_started")] == [1, 2]
    assert checks(result) == [("t-01", "FOUND", None)]
    assert result.progress is not None
    assert result.progress.stop_required is True
    assert result.progress.saturation is None
    assert ("COLLECTION_STOPPED", None) in protocol_codes(h)
    assert h.of_type("budget_changed")[-1]["exhausted"] == "MODEL_CALLS_EXHAUSTED"
    assert_single_finish(h, result)


async def test_model_call_budget_is_exhausted_by_tokens() -> None:
    logs = RecordingAdapter(answer=found(LOG_DATA))
    h = harness(
        scenario(
            tools_round(call("t-01", "query_logs", logs_input(level="ERROR")), prompt=950, completion=50),
            text_round(NULL_DRAFT),
            settings={"budget": {"max_total_tokens": 1000}},
        ),
        adapters={"query_logs": logs},
    )

    result = await h.run()

    assert (result.outcome, result.stop_reason) == ("BUDGET_EXHAUSTED", "TOKENS_EXHAUSTED")
    # The refused round never reached the chat generator.
    assert h.generator.calls == 1
    assert len(h.generator.received) == 1
    assert result.usage.model_dump() == {
        "model_calls": 1,
        "prompt_tokens": 950,
        "completion_tokens": 50,
        "total_tokens": 1000,
    }
    assert [e["round"] for e in h.of_type("model_round_started")] == [1]
    # Round 1 itself spent the budget, so its tool call never ran either (nothing after exhaustion).
    assert checks(result) == []
    assert logs.requests == []
    assert result.draft is None
