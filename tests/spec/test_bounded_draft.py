"""Spec requirement: Diagnosis output SHALL be a bounded DiagnosisDraft.

Every "#### Scenario:" of this requirement, end to end through the real Haystack Agent.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from haystack.components.agents import Agent

from tests.support import RecordingAdapter, harness
from tests.support.spec_scenarios import (
    DOC_DATA,
    LOG_DATA,
    as_text,
    call,
    checks,
    draft,
    evaluated,
    finding,
    found,
    logs_input,
    scenario,
    text_round,
    tools_round,
)


async def test_supported_draft_is_returned() -> None:
    ids = ["call_AbC-09:x", "调用-日志-2"]
    final = {
        "conclusion": "payment-service v2.14.0 发布后连接池耗尽。",
        "analysis": [
            {"kind": "FINDING", "statement": "runbook 指向连接池耗尽。", "evidence": [ids[0]]},
            {
                "kind": "FINDING",
                "statement": "ERROR 日志持续出现连接获取超时。",
                "evidence": [ids[1], ids[0]],
                "scope": "payment-service 02:00-03:00Z",
            },
            {
                "kind": "NEGATIVE_OBSERVATION",
                "statement": "未查询数据库锁等待。",
                "scope": "MySQL payments 库",
                "evidence": "NO_EVIDENCE",
            },
        ],
        "action_plan": ["回滚到 v2.13.4", "观察 HikariPool-1 等待线程"],
        "recommendations": ["复盘事务边界"],
        "limitations": {
            "checked_scope": ["runbook", "payment-service ERROR 日志"],
            "missing_info": ["锁等待详情"],
        },
    }
    kb = RecordingAdapter(answer=found(DOC_DATA))
    logs = RecordingAdapter(answer=found(LOG_DATA))
    h = harness(
        scenario(
            tools_round(call(ids[0], "lookup_knowledge", {"query": "支付超时"})),
            tools_round(call(ids[1], "query_logs", logs_input(level="ERROR"), evaluated(ids[0]))),
            text_round(json.dumps(final, ensure_ascii=False, indent=2)),
        ),
        adapters={"lookup_knowledge": kb, "query_logs": logs},
    )

    result = await h.run()

    assert (result.outcome, result.stop_reason, result.failure) == ("DRAFT", "COMPLETED", None)
    assert result.draft is not None
    assert result.draft.model_dump(mode="json") == final
    assert result.to_json_dict()["draft"] == final
    assert [item.evidence for item in result.draft.analysis] == [[ids[0]], [ids[1], ids[0]], "NO_EVIDENCE"]
    assert [r.tool_call_id for r in kb.requests + logs.requests] == ids
    assert result.exit_code == 0


async def test_supported_draft_at_the_byte_limit_is_returned_and_one_byte_more_fails() -> None:
    text = as_text(draft(checked=["范围"], missing=["x"]))
    limit = len(text.encode())
    ok = harness(scenario(text_round(text)), settings_overrides={"budget": {"max_draft_bytes": limit}})
    too_large = harness(
        scenario(text_round(text)), settings_overrides={"budget": {"max_draft_bytes": limit - 1}}
    )

    accepted = await ok.run()
    rejected = await too_large.run()

    assert (accepted.outcome, accepted.stop_reason) == ("DRAFT", "COMPLETED")
    assert (rejected.outcome, rejected.stop_reason, rejected.draft) == ("FAILED", "DRAFT_TOO_LARGE", None)
    assert rejected.to_json_dict()["failure"] == {
        "code": "DRAFT_TOO_LARGE",
        "violation": "DRAFT_TOO_LARGE",
        "detail": f"the text is {limit} UTF-8 bytes; the limit is {limit - 1}",
    }
    assert too_large.generator.calls == 1


@pytest.mark.parametrize(
    ("wrap", "violation", "detail"),
    [
        pytest.param(
            lambda j: f"```json\n{j}\n```",
            "NOT_A_JSON_OBJECT",
            "starts with a Markdown code fence",
            id="markdown-fence",
        ),
        pytest.param(
            lambda j: f"以下是诊断结果：\n{j}",
            "NOT_A_JSON_OBJECT",
            "prose before the JSON object",
            id="explanatory-prefix",
        ),
        pytest.param(
            lambda j: f"Here is the draft: {j}",
            "NOT_A_JSON_OBJECT",
            "prose before the JSON object",
            id="english-prefix",
        ),
        pytest.param(
            lambda j: f"{j}\n以上是我的诊断。",
            "MALFORMED_JSON",
            "text after the JSON object (line 2, column 1)",
            id="explanatory-suffix",
        ),
        pytest.param(
            lambda j: f"{j}\n```",
            "MALFORMED_JSON",
            "a Markdown code fence after the JSON object",
            id="trailing-fence",
        ),
    ],
)
async def test_model_returns_prose_around_json(
    wrap: Callable[[str], str], violation: str, detail: str, agent_runs: list[Agent]
) -> None:
    valid = as_text(draft("连接池耗尽。", [finding("连接获取超时。", "t-01")]))
    logs = RecordingAdapter(answer=found(LOG_DATA))
    h = harness(
        scenario(
            tools_round(call("t-01", "query_logs", logs_input(level="ERROR"))),
            text_round(wrap(valid)),
            text_round(valid),  # a "second chance" that must never be requested
        ),
        adapters={"query_logs": logs},
    )

    result = await h.run()

    assert (result.outcome, result.stop_reason, result.draft) == ("FAILED", "INVALID_DRAFT", None)
    assert result.to_json_dict()["failure"] == {
        "code": "INVALID_DRAFT",
        "violation": violation,
        "detail": detail,
    }
    assert h.generator.calls == 2 and len(h.generator.received) == 2
    assert len(agent_runs) == 1
    assert checks(result) == [("t-01", "FOUND", None)]
    assert result.exit_code == 1
