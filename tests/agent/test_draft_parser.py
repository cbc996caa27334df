"""Strict DiagnosisDraft parsing: every violation code, and what a valid Draft keeps.

(docs/contracts.md, "DiagnosisDraft")
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent.draft.parser import DraftRejected, parse_draft
from agent.draft.rules import RunEvidence

STATUS = {"t-found": "FOUND", "t-empty": "EMPTY", "t-error": "ERROR", "调用:7": "FOUND"}
LIMIT = 16_384


EVIDENCE = RunEvidence.of(STATUS)


def draft(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "conclusion": None,
        "analysis": [],
        "action_plan": [],
        "recommendations": [],
        "limitations": {"checked_scope": [], "missing_info": []},
    }
    return {**base, **overrides}


def text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def rejected(raw: str | None, max_bytes: int = LIMIT) -> DraftRejected:
    with pytest.raises(DraftRejected) as caught:
        parse_draft(raw, max_bytes, EVIDENCE)
    return caught.value


FINDING = {"kind": "FINDING", "statement": "连接池耗尽", "evidence": ["t-found"]}
NO_EVIDENCE = {
    "kind": "NEGATIVE_OBSERVATION",
    "statement": "没有 ERROR",
    "scope": "order-service 日志",
    "evidence": "NO_EVIDENCE",
}


def test_valid_draft_keeps_exact_citation_strings() -> None:
    value = draft(
        conclusion="连接池耗尽导致超时。",
        analysis=[
            {"kind": "FINDING", "statement": "日志", "evidence": ["调用:7"]},
            {"kind": "NEGATIVE_OBSERVATION", "statement": "runbook 无相关条目", "evidence": ["t-empty"]},
            {"kind": "FINDING", "statement": "runbook", "evidence": ["t-found"], "scope": "runbook"},
            {
                "kind": "NEGATIVE_OBSERVATION",
                "statement": "数据库不可用",
                "scope": "payments",
                "evidence": ["t-error"],
            },
            NO_EVIDENCE,
        ],
        action_plan=["回滚"],
        recommendations=["复盘"],
        limitations={"checked_scope": ["日志"], "missing_info": ["锁等待"]},
    )

    parsed = parse_draft(text(value), LIMIT, EVIDENCE)

    assert parsed.model_dump(mode="json") == value
    assert parsed.cited_ids() == ["调用:7", "t-empty", "t-found", "t-error"]
    # A concluded Draft may carry NEGATIVE_OBSERVATIONs (cited or scoped NO_EVIDENCE) beside its FINDINGs.


def test_no_conclusion_without_any_evidence_is_valid() -> None:
    limitations = {"checked_scope": [], "missing_info": ["时间范围"]}
    parsed = parse_draft(text(draft(analysis=[NO_EVIDENCE], limitations=limitations)), LIMIT, EVIDENCE)

    assert parsed.conclusion is None
    assert parsed.cited_ids() == []


@pytest.mark.parametrize("raw", [None, "", " ", "\n\t  \n", "\u200b", "\ufeff\u2060 "])
def test_empty_output(raw: str | None) -> None:
    error = rejected(raw)

    assert (error.violation, error.too_large) == ("EMPTY_OUTPUT", False)


def test_draft_too_large_counts_utf8_bytes_not_characters() -> None:
    raw = text(draft(action_plan=["回滚" * 2], limitations={"checked_scope": [], "missing_info": ["根因"]}))
    size = len(raw.encode("utf-8"))
    assert len(raw) < size

    assert parse_draft(raw, size, EVIDENCE).action_plan == ["回滚" * 2]
    error = rejected(raw, max_bytes=size - 1)
    assert (error.violation, error.too_large) == ("DRAFT_TOO_LARGE", True)
    assert len(raw) <= size - 1  # the character count alone would have let it through


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(f"```json\n{text(draft())}\n```", id="fence"),
        pytest.param(f"以下是结果：{text(draft())}", id="prefix"),
        pytest.param(f"[{text(draft())}]", id="array"),
        pytest.param('"just a string"', id="string"),
        pytest.param("null", id="null"),
    ],
)
def test_not_a_json_object(raw: str) -> None:
    assert rejected(raw).violation == "NOT_A_JSON_OBJECT"


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(text(draft())[:-1], id="truncated"),
        pytest.param(f"{text(draft())} 以上。", id="suffix"),
        pytest.param(f"{text(draft())}\n```", id="closing-fence"),
        pytest.param("{'conclusion': None}", id="python-literal"),
        pytest.param(text(draft()) + text(draft()), id="two-objects"),
    ],
)
def test_malformed_json(raw: str) -> None:
    assert rejected(raw).violation == "MALFORMED_JSON"


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(
            '{"conclusion": null, "conclusion": "x", "analysis": [], "action_plan": [],'
            ' "recommendations": [], "limitations": {"checked_scope": [], "missing_info": []}}',
            id="top-level",
        ),
        pytest.param(
            '{"conclusion": null, "analysis": [], "action_plan": [], "recommendations": [],'
            ' "limitations": {"checked_scope": [], "missing_info": [], "missing_info": ["x"]}}',
            id="nested",
        ),
    ],
)
def test_duplicate_key(raw: str) -> None:
    assert rejected(raw).violation == "DUPLICATE_KEY"


@pytest.mark.parametrize(
    "value",
    [
        pytest.param({k: v for k, v in draft().items() if k != "limitations"}, id="missing-limitations"),
        pytest.param({**draft(), "confidence": 0.9}, id="extra-top-level-key"),
        pytest.param(draft(analysis=[{**FINDING, "severity": "high"}]), id="extra-item-key"),
        pytest.param(
            draft(limitations={"checked_scope": [], "missing_info": [], "notes": []}), id="extra-limit-key"
        ),
        pytest.param(draft(analysis=[{**FINDING, "kind": "HYPOTHESIS"}]), id="unknown-kind"),
        pytest.param(draft(analysis=[{**FINDING, "evidence": "NO_EVIDENCE"}]), id="finding-no-evidence"),
        pytest.param(draft(analysis=[{**FINDING, "evidence": []}]), id="finding-empty-evidence"),
        pytest.param(draft(analysis=[{**FINDING, "evidence": [""]}]), id="blank-id"),
        pytest.param(draft(analysis=[{**FINDING, "evidence": ["t-found", 7]}]), id="non-string-id"),
        pytest.param(draft(analysis=[{**FINDING, "statement": ""}]), id="blank-statement"),
        pytest.param(draft(analysis=[{**FINDING, "statement": " \u3000\n"}]), id="whitespace-statement"),
        pytest.param(draft(analysis=[{**NO_EVIDENCE, "scope": "  "}]), id="whitespace-scope"),
        pytest.param(
            draft(analysis=[{k: v for k, v in NO_EVIDENCE.items() if k != "scope"}]),
            id="no-evidence-without-scope",
        ),
        pytest.param(draft(analysis=[{**NO_EVIDENCE, "scope": ""}]), id="no-evidence-blank-scope"),
        pytest.param(draft(analysis=[{**NO_EVIDENCE, "evidence": []}]), id="negative-empty-evidence"),
        pytest.param(draft(conclusion=1), id="conclusion-not-text"),
        pytest.param(draft(action_plan="回滚"), id="action-plan-not-list"),
        pytest.param(draft(recommendations=[None]), id="recommendation-not-text"),
        pytest.param(draft(analysis={"kind": "FINDING"}), id="analysis-not-list"),
    ],
)
def test_schema_mismatch(value: dict[str, Any]) -> None:
    assert rejected(text(value)).violation == "SCHEMA_MISMATCH"


@pytest.mark.parametrize(
    "analysis",
    [
        pytest.param([{**FINDING, "evidence": ["t-other-run"]}], id="finding"),
        pytest.param([{**FINDING, "evidence": ["t-found", "T-FOUND"]}], id="case-differs"),
        pytest.param([{**NO_EVIDENCE, "evidence": ["t-never"]}], id="negative-observation"),
    ],
)
def test_unknown_citation(analysis: list[dict[str, Any]]) -> None:
    assert rejected(text(draft(analysis=analysis))).violation == "UNKNOWN_CITATION"


@pytest.mark.parametrize(
    ("conclusion", "analysis"),
    [
        pytest.param("根因是连接池耗尽", [], id="no-analysis"),
        pytest.param("根因是连接池耗尽", [NO_EVIDENCE], id="only-no-evidence"),
        pytest.param(
            "根因是连接池耗尽", [{**NO_EVIDENCE, "evidence": ["t-found"]}], id="found-only-negative"
        ),
        pytest.param("   ", [FINDING], id="blank-conclusion"),
    ],
)
def test_conclusion_without_found_evidence(conclusion: str, analysis: list[dict[str, Any]]) -> None:
    assert rejected(text(draft(conclusion=conclusion, analysis=analysis))).violation == (
        "CONCLUSION_WITHOUT_FOUND_EVIDENCE"
    )


@pytest.mark.parametrize("conclusion", [None, "根因是连接池耗尽"], ids=["no-conclusion", "conclusion"])
@pytest.mark.parametrize(
    "evidence",
    [["t-empty"], ["t-error"], ["t-empty", "t-error"], ["t-found", "t-empty"], ["t-error", "t-found"]],
    ids=["empty", "error", "empty-and-error", "found-beside-empty", "error-beside-found"],
)
def test_a_finding_cites_only_found_calls(conclusion: str | None, evidence: list[str]) -> None:
    """One FOUND call beside an EMPTY one no longer carries the FINDING: every cited ID must be FOUND."""
    value = draft(
        conclusion=conclusion,
        analysis=[FINDING, {**FINDING, "evidence": evidence}],
        limitations={"checked_scope": [], "missing_info": ["锁等待"]},
    )
    assert rejected(text(value)).violation == "FINDING_CITES_NON_FOUND"


@pytest.mark.parametrize("conclusion", [None, "根因是连接池耗尽"], ids=["no-conclusion", "conclusion"])
def test_a_finding_may_not_cite_a_result_the_model_evaluated_no_gain(conclusion: str | None) -> None:
    evidence = RunEvidence.of(
        {"t-gained": "FOUND", "t-no-gain": "FOUND", "t-pending": "FOUND"},
        {"t-gained": "GAINED", "t-no-gain": "NO_GAIN"},
    )
    limitations = {"checked_scope": [], "missing_info": ["锁等待"]}
    on_no_gain = draft(
        conclusion=conclusion,
        analysis=[{**FINDING, "evidence": ["t-gained", "t-no-gain"]}],
        limitations=limitations,
    )
    with pytest.raises(DraftRejected) as caught:
        parse_draft(text(on_no_gain), LIMIT, evidence)
    assert caught.value.violation == "FINDING_CITES_NO_GAIN"
    detail = "analysis[0] is a FINDING citing t-no-gain, which the model evaluated NO_GAIN"
    assert caught.value.detail == detail

    # GAINED and still pending (never judged) back a FINDING; NO_GAIN backs a NEGATIVE_OBSERVATION.
    honest = draft(
        conclusion=conclusion,
        analysis=[
            {**FINDING, "evidence": ["t-gained", "t-pending"]},
            {"kind": "NEGATIVE_OBSERVATION", "statement": "其余日志无帮助", "evidence": ["t-no-gain"]},
        ],
        limitations=limitations,
    )
    assert parse_draft(text(honest), LIMIT, evidence).cited_ids() == ["t-gained", "t-pending", "t-no-gain"]


@pytest.mark.parametrize("missing", [[], [" "], ["", "\t"]], ids=["empty", "blank", "blanks"])
def test_null_conclusion_without_missing_info(missing: list[str]) -> None:
    value = draft(analysis=[NO_EVIDENCE], limitations={"checked_scope": ["日志"], "missing_info": missing})
    assert rejected(text(value)).violation == "NULL_CONCLUSION_WITHOUT_MISSING_INFO"


def test_violation_carries_no_model_text() -> None:
    error = rejected(text({**draft(), "secret": "LEAKED-MARKER"}))

    assert error.violation == "SCHEMA_MISMATCH"
    assert "LEAKED-MARKER" not in str(error)
    assert error.__cause__ is None


def test_deeply_nested_json_is_rejected() -> None:
    raw = '{"conclusion": ' + "[" * 3000 + "]" * 3000 + "}"

    assert rejected(raw).violation in {"MALFORMED_JSON", "SCHEMA_MISMATCH"}


def test_text_that_is_not_utf8_encodable_is_rejected() -> None:
    raw = text(draft(action_plan=["\ud800"]))

    assert isinstance(rejected(raw), DraftRejected)
