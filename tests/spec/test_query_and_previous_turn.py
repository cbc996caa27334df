"""Spec requirement: Diagnosis input SHALL contain only current Query and optional PreviousTurn.

Every "#### Scenario:" of this requirement, end to end through the real Haystack Agent.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent.contracts import PreviousTurn
from tests.support import RecordingAdapter, harness
from tests.support.spec_scenarios import (
    DOC_DATA,
    NULL_DRAFT,
    QUERY,
    as_text,
    call,
    draft,
    finding,
    found,
    scenario,
    text_round,
    tools_round,
)


async def test_follow_up_diagnosis_has_a_safe_previous_turn() -> None:
    first_query = "2026-11-30 02:00-03:00 UTC payment-service 超时，请诊断。"
    follow_up = "回滚到 v2.13.4 之后还有超时吗？"
    first_draft = draft(
        "payment-service 连接池耗尽。",
        [finding("日志显示连接获取超时。", "kb-1")],
        checked=["runbook"],
        missing=["数据库锁等待详情"],
    )
    kb = RecordingAdapter(answer=found(DOC_DATA))
    h = harness(
        scenario(
            tools_round(call("kb-1", "lookup_knowledge", {"query": "支付超时 连接池"})),
            text_round(as_text(first_draft)),
            text_round(as_text(draft(checked=[], missing=["回滚后的时间窗口"]))),
        ),
        adapters={"lookup_knowledge": kb},
    )
    first = await h.run(first_query)
    assert first.outcome == "DRAFT"
    assert first.draft is not None
    previous = PreviousTurn(
        query=first_query, conclusion=first.draft.conclusion, limitations=first.draft.limitations
    )

    second = await h.run(follow_up, previous)

    assert (second.outcome, second.stop_reason) == ("DRAFT", "COMPLETED")
    assert second.session_id == first.session_id
    assert second.run_id != first.run_id
    round_one = h.generator.received[2]
    # Exactly the system prompt and one user message: no history, no prior tool call or result.
    assert [m.role.value for m in round_one] == ["system", "user"]
    assert round_one[0].text == h.generator.received[0][0].text
    expected_turn = {
        "query": first_query,
        "conclusion": "payment-service 连接池耗尽。",
        "limitations": {"checked_scope": ["runbook"], "missing_info": ["数据库锁等待详情"]},
    }
    assert round_one[1].text == json.dumps(
        {"query": follow_up, "previous_turn": expected_turn}, ensure_ascii=False, separators=(",", ":")
    )
    transcript = " ".join(m.text or "" for m in round_one)
    assert "kb-1" not in transcript
    assert "支付超时 runbook" not in transcript
    assert first_draft["analysis"][0]["statement"] not in transcript
    started = [e for e in h.of_type("run_started") if e["run_id"] == second.run_id]
    assert started[0]["previous_turn"] == expected_turn
    assert started[0]["query"] == follow_up


async def test_follow_up_diagnosis_cannot_cite_previous_run_evidence() -> None:
    kb = RecordingAdapter(answer=found(DOC_DATA))
    h = harness(
        scenario(
            tools_round(call("kb-1", "lookup_knowledge", {"query": "支付超时 连接池"})),
            text_round(as_text(draft("连接池耗尽。", [finding("runbook 命中。", "kb-1")]))),
            text_round(as_text(draft("连接池耗尽。", [finding("上一轮的证据。", "kb-1")]))),
        ),
        adapters={"lookup_knowledge": kb},
    )
    first = await h.run()
    assert first.outcome == "DRAFT"

    second = await h.run(
        "还在超时吗？",
        {
            "query": QUERY,
            "conclusion": "连接池耗尽。",
            "limitations": {"checked_scope": [], "missing_info": []},
        },
    )

    assert (second.outcome, second.stop_reason) == ("FAILED", "INVALID_DRAFT")
    assert second.failure is not None
    assert second.failure.violation == "UNKNOWN_CITATION"
    assert second.progress is None
    assert second.draft is None


@pytest.mark.parametrize(
    "previous_turn",
    [
        pytest.param(
            {
                "query": "上一轮",
                "conclusion": None,
                "limitations": {"checked_scope": [], "missing_info": []},
                "messages": [{"role": "tool", "content": "raw tool result"}],
            },
            id="history-attached",
        ),
        pytest.param(
            {
                "query": "上一轮",
                "conclusion": None,
                "limitations": {"checked_scope": [], "missing_info": []},
                "tool_results": ["raw"],
            },
            id="raw-tool-results",
        ),
        pytest.param({"query": "上一轮", "conclusion": None}, id="no-limitations"),
        pytest.param(
            {"query": "", "conclusion": None, "limitations": {"checked_scope": [], "missing_info": []}},
            id="blank-query",
        ),
        pytest.param(
            {"query": "上一轮", "conclusion": 42, "limitations": {"checked_scope": [], "missing_info": []}},
            id="conclusion-not-text",
        ),
        pytest.param("上一轮的完整对话记录……", id="free-text-summary"),
    ],
)
async def test_follow_up_diagnosis_rejects_anything_but_a_frozen_previous_turn(previous_turn: Any) -> None:
    h = harness(scenario(text_round(NULL_DRAFT)))

    result = await h.run(QUERY, previous_turn)

    assert (result.outcome, result.stop_reason) == ("REJECTED", "PREVIOUS_TURN_INVALID")
    assert result.failure is not None
    assert result.failure.code == "PREVIOUS_TURN_INVALID"
    assert h.generator.calls == 0
    assert h.generator.received == []
    assert [e["type"] for e in h.events] == ["run_finished"]


async def test_follow_up_diagnosis_rejects_an_oversized_previous_turn() -> None:
    turn = {
        "query": "上一轮",
        "conclusion": "结" * 100,
        "limitations": {"checked_scope": [], "missing_info": []},
    }
    h = harness(
        scenario(text_round(NULL_DRAFT)), settings_overrides={"budget": {"max_previous_turn_bytes": 300}}
    )

    result = await h.run(QUERY, turn)

    assert (result.outcome, result.stop_reason) == ("REJECTED", "PREVIOUS_TURN_TOO_LARGE")
    assert h.generator.calls == 0
    assert h.generator.received == []


async def test_query_exceeds_configured_context_budget() -> None:
    query = "支付超时请诊断原因谢谢你们啊"  # 14 characters, 42 UTF-8 bytes
    assert len(query) < 40 < len(query.encode())
    h = harness(scenario(text_round(NULL_DRAFT)), settings_overrides={"budget": {"max_query_bytes": 40}})

    result = await h.run(query)

    assert (result.outcome, result.stop_reason) == ("REJECTED", "QUERY_TOO_LARGE")
    assert result.failure is not None
    assert result.failure.code == "QUERY_TOO_LARGE"
    assert result.draft is None
    assert result.progress is None
    assert result.usage.model_dump() == {
        "model_calls": 0,
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "total_tokens": 0,
    }
    assert h.generator.calls == 0
    assert h.generator.received == []
    assert [e["type"] for e in h.events] == ["run_finished"]
    assert result.exit_code == 2


async def test_query_at_the_byte_limit_reaches_the_model_verbatim() -> None:
    query = "  支付超时请诊断原因谢谢你 \n"  # 40 UTF-8 bytes, surrounding whitespace included
    assert len(query.encode()) == 40
    h = harness(scenario(text_round(NULL_DRAFT)), settings_overrides={"budget": {"max_query_bytes": 40}})

    result = await h.run(query)

    assert result.outcome == "DRAFT"
    assert json.loads(h.generator.received[0][1].text or "") == {"query": query, "previous_turn": None}
    assert h.of_type("run_started")[0]["query"] == query


@pytest.mark.parametrize("query", ["", "   ", "\n\t "])
async def test_blank_query_is_rejected_before_any_model_call(query: str) -> None:
    h = harness(scenario(text_round(NULL_DRAFT)))

    result = await h.run(query)

    assert (result.outcome, result.stop_reason) == ("REJECTED", "QUERY_BLANK")
    assert h.generator.calls == 0
    assert h.generator.received == []


async def test_query_and_previous_turn_beyond_the_input_budget_are_rejected() -> None:
    turn: dict[str, Any] = {
        "query": "上一轮" * 20,
        "conclusion": None,
        "limitations": {"checked_scope": [], "missing_info": []},
    }
    h = harness(
        scenario(text_round(NULL_DRAFT)),
        settings_overrides={
            "budget": {"max_query_bytes": 200, "max_previous_turn_bytes": 400, "max_input_bytes": 300}
        },
    )

    result = await h.run("支付超时" * 10, turn)

    assert (result.outcome, result.stop_reason) == ("REJECTED", "INPUT_TOO_LARGE")
    assert h.generator.calls == 0


async def test_query_that_is_not_utf8_encodable_is_rejected_not_crashed() -> None:
    h = harness(scenario(text_round(NULL_DRAFT)))

    result = await h.run("payment-service 超时 \udcff")

    assert result.outcome == "REJECTED"
    assert h.generator.calls == 0
