"""Spec rule: every normal Analysis item SHALL cite current-Run evidence; without evidence the Agent
stops with `conclusion=null` and describes the missing information — the Draft cannot claim more.

- every ID a FINDING cites is a FOUND invocation of this run that the model did not evaluate NO_GAIN
  (GAINED, or still pending when the Draft came): an EMPTY or ERROR call found nothing and a NO_GAIN
  result was judged useless by the model itself, so they back only a NEGATIVE_OBSERVATION
  (FINDING_CITES_NON_FOUND, FINDING_CITES_NO_GAIN); an unexecuted call backs nothing;
- `statement`, `scope` (and a conclusion, and the one `missing_info` entry a null conclusion needs)
  are non-blank: whitespace, format and zero-width characters count as blank;
- a null conclusion needs a non-empty `limitations.missing_info`.
Each violation fails the run INVALID_DRAFT with a safe, stable `violation` code and no repair round.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.support import RecordingAdapter, failing, harness
from tests.support.spec_scenarios import (
    LOG_DATA,
    as_text,
    call,
    checks,
    draft,
    empty,
    evaluated,
    finding,
    found,
    logs_input,
    scenario,
    text_round,
    tools_round,
)

MYSQL_INPUT = {"sql": "SELECT id FROM payments WHERE status = 'LOCKED' LIMIT 5", "database": "payments"}


def negative(
    statement: str, evidence: Any, scope: str | None = "payment-service 02:00-03:00Z"
) -> dict[str, Any]:
    item: dict[str, Any] = {"kind": "NEGATIVE_OBSERVATION", "statement": statement, "evidence": evidence}
    if scope is not None:
        item["scope"] = scope
    return item


def evidence_run(final: dict[str, Any]) -> Any:
    """t-01 FOUND (logs), t-02 EMPTY (runbook), t-03 ERROR/UNAVAILABLE (MySQL), then `final`."""
    return harness(
        scenario(
            tools_round(call("t-01", "query_logs", logs_input(level="ERROR"))),
            tools_round(
                call("t-02", "lookup_knowledge", {"query": "锁等待"}, evaluated("t-01")),
                call("t-03", "query_mysql", MYSQL_INPUT),
            ),
            text_round(as_text(final)),
            text_round(as_text(draft(missing=["repair round that must never be requested"]))),
        ),
        adapters={
            "query_logs": RecordingAdapter(answer=found(LOG_DATA)),
            "lookup_knowledge": RecordingAdapter(answer=empty()),
            "query_mysql": RecordingAdapter(answer=failing("UNAVAILABLE")),
        },
    )


async def assert_rejected(h: Any, violation: str, detail: str) -> None:
    result = await h.run()
    assert (result.outcome, result.stop_reason, result.draft) == ("FAILED", "INVALID_DRAFT", None)
    assert result.to_json_dict()["failure"] == {
        "code": "INVALID_DRAFT",
        "violation": violation,
        "detail": detail,
    }
    assert h.generator.calls == 3  # no repair round
    assert checks(result) == [("t-01", "FOUND", "GAINED"), ("t-02", "EMPTY", None), ("t-03", "ERROR", None)]


# ------------------------------------------------------------------ item 9 (issue 21 item 5)
@pytest.mark.parametrize(
    ("final", "detail"),
    [
        pytest.param(
            draft(
                "发布后连接池耗尽，MySQL 锁等待加剧。",
                [finding("日志显示连接获取超时。", "t-01"), finding("MySQL 查询确认了锁等待。", "t-03")],
                missing=["锁等待详情"],
            ),
            "analysis[1] is a FINDING citing t-03, which returned ERROR",
            id="conclusion-with-one-finding-on-an-unavailable-call",
        ),
        pytest.param(
            draft(None, [finding("runbook 说明了锁等待。", "t-02")], missing=["锁等待详情"]),
            "analysis[0] is a FINDING citing t-02, which returned EMPTY",
            id="null-conclusion-finding-on-an-empty-call",
        ),
        pytest.param(
            draft(None, [finding("数据库锁等待。", "t-02", "t-03")], missing=["锁等待详情"]),
            "analysis[0] is a FINDING citing t-02, which returned EMPTY",
            id="finding-on-empty-and-error-calls",
        ),
        pytest.param(
            draft(
                "payment-service 连接池 HikariPool-1 耗尽。",
                [finding("payment-service 日志显示 HikariPool-1 耗尽，runbook 也如此描述。", "t-01", "t-02")],
                missing=["锁等待详情"],
            ),
            "analysis[0] is a FINDING citing t-02, which returned EMPTY",
            id="one-found-call-beside-an-empty-one",
        ),
        pytest.param(
            draft(
                "MySQL 锁等待导致超时。",
                [finding("MySQL 确认了锁等待。", "t-03", "t-01")],
                missing=["锁等待详情"],
            ),
            "analysis[0] is a FINDING citing t-03, which returned ERROR",
            id="an-error-call-before-a-found-one",
        ),
    ],
)
async def test_every_id_a_finding_cites_is_found(final: dict[str, Any], detail: str) -> None:
    await assert_rejected(evidence_run(final), "FINDING_CITES_NON_FOUND", detail)


async def test_negative_observations_cite_empty_and_error_calls_beside_findings_on_found_ones() -> None:
    final = draft(
        "连接池耗尽。",
        [
            finding("日志显示连接获取超时。", "t-01"),
            negative("runbook 没有相关条目。", ["t-02"]),
            negative("数据库不可用，未能确认锁等待。", ["t-03"]),
            negative("runbook 与数据库都没有补充。", ["t-02", "t-03"], scope=None),
            negative("未检查网关日志。", "NO_EVIDENCE", scope="api-gateway"),
        ],
        missing=["锁等待详情"],
    )
    h = evidence_run(final)

    result = await h.run()

    assert (result.outcome, result.stop_reason) == ("DRAFT", "COMPLETED")
    assert result.draft is not None
    assert result.draft.model_dump(mode="json") == final


def no_gain_run(final: dict[str, Any]) -> Any:
    """t-01 FOUND, evaluated NO_GAIN; t-02 FOUND, GAINED; t-03 FOUND, still pending; then `final`."""
    return harness(
        scenario(
            tools_round(call("t-01", "query_logs", logs_input(level="INFO"))),
            tools_round(call("t-02", "query_logs", logs_input(level="ERROR"), evaluated("t-01", "NO_GAIN"))),
            tools_round(call("t-03", "lookup_knowledge", {"query": "连接池"}, evaluated("t-02"))),
            text_round(as_text(final)),
        ),
        adapters={
            "query_logs": RecordingAdapter(answer=found(LOG_DATA)),
            "lookup_knowledge": RecordingAdapter(answer=found(LOG_DATA)),
        },
    )


@pytest.mark.parametrize(
    "final",
    [
        pytest.param(
            draft("INFO 日志说明了根因。", [finding("INFO 日志显示流量平稳。", "t-01")], missing=["x"]),
            id="conclusion-resting-only-on-no-gain",
        ),
        pytest.param(
            draft(
                "连接池耗尽。",
                [finding("ERROR 日志显示连接池耗尽。", "t-02"), finding("INFO 日志也是如此。", "t-01")],
                missing=["x"],
            ),
            id="a-no-gain-finding-beside-a-gained-one",
        ),
        pytest.param(
            draft(None, [finding("连接池耗尽。", "t-02", "t-01")], missing=["x"]),
            id="no-gain-cited-beside-gained",
        ),
    ],
)
async def test_a_finding_may_not_rest_on_a_result_the_model_evaluated_no_gain(final: dict[str, Any]) -> None:
    h = no_gain_run(final)

    result = await h.run()

    assert (result.outcome, result.stop_reason, result.draft) == ("FAILED", "INVALID_DRAFT", None)
    assert result.to_json_dict()["failure"] == {
        "code": "INVALID_DRAFT",
        "violation": "FINDING_CITES_NO_GAIN",
        "detail": f"analysis[{len(final['analysis']) - 1}] is a FINDING citing t-01, which the model "
        "evaluated NO_GAIN",
    }
    assert checks(result) == [
        ("t-01", "FOUND", "NO_GAIN"),
        ("t-02", "FOUND", "GAINED"),
        ("t-03", "FOUND", None),
    ]


async def test_gained_and_still_pending_results_back_findings_and_no_gain_backs_a_negative_observation() -> (
    None
):
    final = draft(
        "连接池耗尽。",
        [
            finding("ERROR 日志与 runbook 都指向连接池耗尽。", "t-02", "t-03"),
            negative("INFO 日志没有推进诊断。", ["t-01"]),
        ],
        missing=["锁等待详情"],
    )
    h = no_gain_run(final)

    result = await h.run()

    assert (result.outcome, result.stop_reason) == ("DRAFT", "COMPLETED")
    assert result.draft is not None
    assert result.draft.model_dump(mode="json") == final


# ------------------------------------------------------------------ item 10 (issue 21 item 6)
BLANKS = {
    "spaces": "   ",
    "ideographic-space-newline": "\u3000\n",
    "zero-width-space": "\u200b",
    "word-joiner-and-bom": "\u2060\ufeff",
    "zero-width-joiners-and-spaces": " \u200c\u200d ",
    "variation-selector": "\ufe0f",
    "hangul-filler": "\u3164",
    "tag-characters": "\U000e0041\U000e0042",
    "soft-hyphen": "\u00ad",
}


@pytest.mark.parametrize("blank", list(BLANKS.values()), ids=list(BLANKS))
@pytest.mark.parametrize(
    ("item", "field"),
    [
        pytest.param(lambda b: finding(b, "t-01"), "statement", id="finding-statement"),
        pytest.param(lambda b: negative(b, ["t-02"]), "statement", id="negative-statement"),
        pytest.param(
            lambda b: negative("没有相关条目。", "NO_EVIDENCE", scope=b), "scope", id="no-evidence-scope"
        ),
        pytest.param(lambda b: {**finding("日志。", "t-01"), "scope": b}, "scope", id="finding-scope"),
    ],
)
async def test_statement_and_scope_are_not_blank(item: Any, field: str, blank: str) -> None:
    final = draft(None, [item(blank)], missing=["锁等待详情"])
    await assert_rejected(evidence_run(final), "SCHEMA_MISMATCH", f"`analysis[0].{field}` is blank")


@pytest.mark.parametrize("blank", list(BLANKS.values()), ids=list(BLANKS))
async def test_a_conclusion_of_invisible_characters_is_blank(blank: str) -> None:
    final = draft(blank, [finding("日志显示连接获取超时。", "t-01")], missing=["锁等待详情"])
    await assert_rejected(evidence_run(final), "CONCLUSION_WITHOUT_FOUND_EVIDENCE", "the conclusion is blank")


@pytest.mark.parametrize("blank", list(BLANKS.values()), ids=list(BLANKS))
async def test_a_query_of_invisible_characters_is_blank(blank: str) -> None:
    h = harness(scenario(text_round(as_text(draft(None, [], missing=["x"])))))
    result = await h.run(query=blank)
    assert (result.outcome, result.stop_reason) == ("REJECTED", "QUERY_BLANK")
    assert h.generator.calls == 0


# ------------------------------------------------------------------ item 11
@pytest.mark.parametrize(
    ("missing", "state"),
    [
        ([], "is empty"),
        (["  "], "has only blank entries"),
        (["", "\n"], "has only blank entries"),
        (["\u200b", "\u2060"], "has only blank entries"),
    ],
    ids=["empty", "blank", "blanks", "zero-width"],
)
async def test_a_null_conclusion_says_what_is_missing(missing: list[str], state: str) -> None:
    final = draft(None, [negative("没有锁等待的证据。", ["t-03"])], checked=["payments 库"])
    final["limitations"]["missing_info"] = missing
    detail = f"no conclusion, and limitations.missing_info {state}"
    await assert_rejected(evidence_run(final), "NULL_CONCLUSION_WITHOUT_MISSING_INFO", detail)
