"""Spec requirement: Insufficient evidence SHALL terminate without a fabricated conclusion.

Every "#### Scenario:" of this requirement, end to end through the real Haystack Agent.
"""

from __future__ import annotations

from tests.support import RecordingAdapter, harness
from tests.support.spec_scenarios import (
    DOC_DATA,
    LOG_DATA,
    NULL_DRAFT,
    STOP_REQUIRED,
    WINDOW,
    as_text,
    call,
    checks,
    draft,
    empty,
    evaluated,
    finding,
    found,
    last_user_text,
    logs_input,
    protocol_codes,
    scenario,
    seen,
    started_tools,
    text_round,
    tools_round,
)


async def test_tool_finds_no_evidence() -> None:
    """Demo logs: account-service has no ERROR lines in the window; the equivalent retry is refused."""
    business = {"service": "account-service", **WINDOW, "level": "ERROR"}
    same_business = {
        "level": "ERROR",
        "limit": 10,
        "end": WINDOW["end"],
        "start": WINDOW["start"],
        "service": "account-service",
    }  # reordered, default made explicit: equivalent
    final = draft(
        None,
        [
            {
                "kind": "NEGATIVE_OBSERVATION",
                "statement": "该时间窗内没有 ERROR 日志。",
                "scope": "account-service 2026-11-30T02:00Z-03:00Z ERROR",
                "evidence": ["sso-1"],
            }
        ],
        action_plan=["向客户索取失败请求的 trace_id"],
        checked=["account-service 02:00-03:00Z ERROR 日志"],
        missing=["失败请求的 trace_id", "IdP 侧日志"],
    )
    h = harness(
        scenario(
            tools_round(call("sso-1", "query_logs", business)),
            tools_round(call("sso-2", "query_logs", same_business)),
            text_round(as_text(final)),
            query="企业客户 ent-40215 在 2026-11-30 02:00-03:00 UTC SSO 登录失败，请排查 account-service。",
        )
    )

    result = await h.run()

    assert seen(h, 1) == [
        {"tool_call_id": "sso-1", "tool": "query_logs", "evidence_status": "EMPTY", "control": None}
    ]
    assert seen(h, 2)[1] == {
        "tool_call_id": "sso-2",
        "tool": "query_logs",
        "evidence_status": "NOT_EXECUTED",
        "control": {"code": "DUPLICATE_CALL"},
    }
    assert started_tools(h) == [("sso-1", "query_logs")]
    assert ("DUPLICATE_CALL", "sso-2") in protocol_codes(h)
    assert (result.outcome, result.stop_reason) == ("DRAFT", "COMPLETED")
    assert result.draft is not None
    assert result.draft.conclusion is None
    assert result.draft.model_dump(mode="json") == final
    assert checks(result) == [("sso-1", "EMPTY", None)]


async def test_tool_finds_no_evidence_so_a_conclusion_is_refused() -> None:
    logs = RecordingAdapter(answer=empty())
    h = harness(
        scenario(
            tools_round(call("t-01", "query_logs", logs_input("account-service", level="ERROR"))),
            text_round(as_text(draft("IdP 证书过期导致 SSO 失败。", [finding("没有错误日志。", "t-01")]))),
        ),
        adapters={"query_logs": logs},
    )

    result = await h.run()

    assert (result.outcome, result.stop_reason, result.draft) == ("FAILED", "INVALID_DRAFT", None)
    assert result.failure is not None
    assert result.failure.violation == "FINDING_CITES_NON_FOUND"
    assert checks(result) == [("t-01", "EMPTY", None)]


async def test_no_bounded_tool_query_is_possible() -> None:
    missing = ["受影响的企业或用户", "发生问题的时间范围", "涉及的服务", "具体的错误信息"]
    final = draft(action_plan=["请补充企业、时间范围、服务和报错后再诊断"], missing=missing)
    h = harness(scenario(text_round(as_text(final)), query="线上好像有点问题，帮忙看一下。"))

    result = await h.run()

    assert (result.outcome, result.stop_reason) == ("DRAFT", "COMPLETED")
    assert result.draft is not None
    assert result.draft.conclusion is None
    assert result.draft.limitations.missing_info == missing
    assert result.draft.limitations.checked_scope == []
    assert h.generator.calls == 1
    assert result.usage.model_calls == 1
    assert h.of_type("tool_started") == []
    assert result.progress is not None
    assert result.progress.model_dump() == {"checks": [], "stop_required": False, "saturation": None}


async def test_no_bounded_tool_query_is_possible_and_no_conclusion_may_be_invented() -> None:
    h = harness(
        scenario(
            text_round(
                as_text(
                    draft(
                        "数据库主从切换导致故障。",
                        [
                            {
                                "kind": "NEGATIVE_OBSERVATION",
                                "statement": "未检查。",
                                "scope": "全部",
                                "evidence": "NO_EVIDENCE",
                            }
                        ],
                    )
                )
            ),
            query="线上好像有点问题，帮忙看一下。",
        )
    )

    result = await h.run()

    assert (result.outcome, result.stop_reason, result.draft) == ("FAILED", "INVALID_DRAFT", None)
    assert result.failure is not None
    assert result.failure.violation == "CONCLUSION_WITHOUT_FOUND_EVIDENCE"
    assert result.progress is None


async def test_harness_requires_stop() -> None:
    """Two EMPTY results saturate the no-gain counter: STOP_REQUIRED, then one final Draft."""
    logs = RecordingAdapter(answer=empty())
    final = draft(
        None,
        [
            {
                "kind": "NEGATIVE_OBSERVATION",
                "statement": "两个窗口都没有错误日志。",
                "scope": "order-service 02:00-03:00Z ERROR/WARN",
                "evidence": ["t-01", "t-02"],
            }
        ],
        checked=["order-service ERROR 日志", "order-service WARN 日志"],
        missing=["受影响订单 ID"],
    )
    h = harness(
        scenario(
            tools_round(call("t-01", "query_logs", logs_input("order-service", level="ERROR"))),
            tools_round(
                call("t-02", "query_logs", logs_input("order-service", level="WARN")),
                call("t-03", "query_logs", logs_input("order-service", level="INFO")),
            ),
            text_round(as_text(final)),
            settings={"protocol": {"max_consecutive_no_gain": 2}},
        ),
        adapters={"query_logs": logs},
    )

    result = await h.run()

    assert seen(h, 2)[1:] == [
        {"tool_call_id": "t-02", "tool": "query_logs", "evidence_status": "EMPTY", "control": STOP_REQUIRED},
        {
            "tool_call_id": "t-03",
            "tool": "query_logs",
            "evidence_status": "NOT_EXECUTED",
            "control": STOP_REQUIRED,
        },
    ]
    assert [r.tool_call_id for r in logs.requests] == ["t-01", "t-02"]
    assert h.generator.received[2][-1].role.value == "tool"  # told once, in the observation
    assert (result.outcome, result.stop_reason) == ("DRAFT", "COMPLETED_AFTER_STOP_REQUIRED")
    assert result.draft is not None
    assert result.draft.model_dump(mode="json") == final
    assert checks(result) == [("t-01", "EMPTY", None), ("t-02", "EMPTY", None)]
    assert result.progress is not None
    assert result.progress.stop_required is True
    assert result.progress.saturation == "INFORMATION_SATURATED"
    assert h.generator.calls == 3
    assert result.exit_code == 0


async def test_harness_requires_stop_after_a_no_gain_evaluation() -> None:
    logs = RecordingAdapter(answer=found(LOG_DATA))
    h = harness(
        scenario(
            tools_round(call("t-01", "query_logs", logs_input(level="INFO"))),
            tools_round(call("t-02", "query_logs", logs_input(level="ERROR"), evaluated("t-01", "NO_GAIN"))),
            text_round(NULL_DRAFT),
            settings={"protocol": {"max_consecutive_no_gain": 1}},
        ),
        adapters={"query_logs": logs},
    )

    result = await h.run()

    assert seen(h, 2)[1] == {
        "tool_call_id": "t-02",
        "tool": "query_logs",
        "evidence_status": "NOT_EXECUTED",
        "control": STOP_REQUIRED,
    }
    assert [r.tool_call_id for r in logs.requests] == ["t-01"]
    assert (result.outcome, result.stop_reason) == ("DRAFT", "COMPLETED_AFTER_STOP_REQUIRED")
    assert checks(result) == [("t-01", "FOUND", "NO_GAIN")]


async def test_harness_requires_stop_before_the_last_budgeted_round() -> None:
    kb = RecordingAdapter(answer=found(DOC_DATA))
    h = harness(
        scenario(
            tools_round(call("t-01", "lookup_knowledge", {"query": "支付超时"})),
            text_round(as_text(draft("连接池耗尽。", [finding("runbook。", "t-01")]))),
            settings={"budget": {"max_model_calls": 2}},
        ),
        adapters={"lookup_knowledge": kb},
    )

    result = await h.run()

    assert last_user_text(h, 1) == '{"control":{"code":"STOP_REQUIRED"}}'
    assert (result.outcome, result.stop_reason) == ("DRAFT", "COMPLETED_AFTER_STOP_REQUIRED")
    assert result.progress is not None
    assert (result.progress.stop_required, result.progress.saturation) == (True, None)
    assert h.generator.calls == 2
