"""Spec rule: every normal Analysis item SHALL cite current-Run evidence; without evidence the Agent
stops with `conclusion=null` and describes the missing information — the Draft cannot claim more.

- a FINDING must cite at least one FOUND invocation of this run (an EMPTY, ERROR or unexecuted call
  found nothing; it can back only a NEGATIVE_OBSERVATION, which may cite any status);
- `statement` and `scope` are non-blank after stripping whitespace;
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


# ------------------------------------------------------------------ item 9
@pytest.mark.parametrize(
    ("final", "detail"),
    [
        pytest.param(
            draft(
                "发布后连接池耗尽，MySQL 锁等待加剧。",
                [finding("日志显示连接获取超时。", "t-01"), finding("MySQL 查询确认了锁等待。", "t-03")],
                missing=["锁等待详情"],
            ),
            "analysis[1] cites t-03, which returned ERROR",
            id="conclusion-with-one-finding-on-an-unavailable-call",
        ),
        pytest.param(
            draft(None, [finding("runbook 说明了锁等待。", "t-02")], missing=["锁等待详情"]),
            "analysis[0] cites t-02, which returned EMPTY",
            id="null-conclusion-finding-on-an-empty-call",
        ),
        pytest.param(
            draft(None, [finding("数据库锁等待。", "t-02", "t-03")], missing=["锁等待详情"]),
            "analysis[0] cites t-02 (EMPTY), t-03 (ERROR); none returned FOUND",
            id="finding-on-empty-and-error-calls",
        ),
    ],
)
async def test_a_finding_must_cite_found_evidence(final: dict[str, Any], detail: str) -> None:
    await assert_rejected(evidence_run(final), "FINDING_WITHOUT_FOUND_EVIDENCE", detail)


async def test_negative_observations_may_cite_any_status_and_findings_need_one_found() -> None:
    final = draft(
        "连接池耗尽。",
        [
            finding("日志显示连接获取超时，runbook 无补充。", "t-01", "t-02"),
            negative("runbook 没有相关条目。", ["t-02"]),
            negative("数据库不可用，未能确认锁等待。", ["t-03"]),
            negative("未检查网关日志。", "NO_EVIDENCE", scope="api-gateway"),
        ],
        missing=["锁等待详情"],
    )
    h = evidence_run(final)

    result = await h.run()

    assert (result.outcome, result.stop_reason) == ("DRAFT", "COMPLETED")
    assert result.draft is not None and result.draft.model_dump(mode="json") == final


# ------------------------------------------------------------------ item 10
@pytest.mark.parametrize(
    ("item", "field"),
    [
        pytest.param({**finding("   ", "t-01")}, "statement", id="blank-finding-statement"),
        pytest.param(negative("\u3000\n", ["t-02"]), "statement", id="blank-negative-statement"),
        pytest.param(
            negative("没有相关条目。", "NO_EVIDENCE", scope=" \t "), "scope", id="blank-no-evidence-scope"
        ),
        pytest.param({**finding("日志。", "t-01"), "scope": "  "}, "scope", id="blank-finding-scope"),
    ],
)
async def test_statement_and_scope_are_non_blank_after_stripping(item: dict[str, Any], field: str) -> None:
    final = draft(None, [item], missing=["锁等待详情"])
    await assert_rejected(evidence_run(final), "SCHEMA_MISMATCH", f"`analysis[0].{field}` is blank")


# ------------------------------------------------------------------ item 11
@pytest.mark.parametrize(
    ("missing", "state"),
    [([], "is empty"), (["  "], "has only blank entries"), (["", "\n"], "has only blank entries")],
    ids=["empty", "blank", "blanks"],
)
async def test_a_null_conclusion_says_what_is_missing(missing: list[str], state: str) -> None:
    final = draft(None, [negative("没有锁等待的证据。", ["t-03"])], checked=["payments 库"])
    final["limitations"]["missing_info"] = missing
    detail = f"no conclusion, and limitations.missing_info {state}"
    await assert_rejected(evidence_run(final), "NULL_CONCLUSION_WITHOUT_MISSING_INFO", detail)
