"""Why a Draft was refused, as safe metadata: `failure.detail` says where and what, never the text.

(docs/contracts.md, "DiagnosisDraft", "Execution result")
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent.draft.detail import MAX_DETAIL_CHARS
from agent.draft.parser import DraftRejected, parse_draft
from agent.draft.rules import RunEvidence
from agent.vocabulary import DraftViolation
from console.commands.main import main
from console.presentation import VIOLATION_TEXT

STATUS = {"call-1": "FOUND", "call-2": "EMPTY", "call-7": "ERROR", "call-9": "NOT_EXECUTED"}


def draft(conclusion: str | None = None, analysis: list[Any] | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "conclusion": conclusion,
        "analysis": analysis or [],
        "action_plan": [],
        "recommendations": [],
        "limitations": {"checked_scope": [], "missing_info": ["根因"]},
        **extra,
    }


def finding(*ids: str, **extra: Any) -> dict[str, Any]:
    return {"kind": "FINDING", "statement": "连接池耗尽 SECRET-TEXT", "evidence": list(ids), **extra}


def refused(text: str | None) -> tuple[str, str]:
    with pytest.raises(DraftRejected) as caught:
        parse_draft(text, 16_384, RunEvidence.of(STATUS))
    return caught.value.violation, caught.value.detail


VALID = json.dumps(draft(), ensure_ascii=False)


@pytest.mark.parametrize(
    ("text", "violation", "detail"),
    [
        pytest.param(
            f"```json\n{VALID}\n```", "NOT_A_JSON_OBJECT", "starts with a Markdown code fence", id="fence"
        ),
        pytest.param(
            f"Here is the Draft: {VALID}", "NOT_A_JSON_OBJECT", "prose before the JSON object", id="prose"
        ),
        pytest.param(
            f"{VALID}\n```", "MALFORMED_JSON", "a Markdown code fence after the JSON object", id="tail"
        ),
        pytest.param(
            VALID[:40],
            "MALFORMED_JSON",
            "the JSON object is cut off before its end (unterminated string)",
            id="cut",
        ),
        pytest.param(
            json.dumps(draft(None, [finding("call-1", confidence=0.9)])),
            "SCHEMA_MISMATCH",
            "unknown key `confidence` in analysis[0]",
            id="unknown-key",
        ),
        pytest.param(
            json.dumps({k: v for k, v in draft().items() if k != "action_plan"}),
            "SCHEMA_MISMATCH",
            "missing key `action_plan` at the top level",
            id="missing-key",
        ),
        pytest.param(
            json.dumps(draft(None, [{**finding("call-1"), "kind": "GUESS"}])),
            "SCHEMA_MISMATCH",
            "`analysis[0].kind` is not one of 'FINDING' or 'NEGATIVE_OBSERVATION'",
            id="bad-kind",
        ),
        pytest.param(
            json.dumps(draft(None, [{**finding(), "evidence": 7}])),
            "SCHEMA_MISMATCH",
            '`analysis[0].evidence` is neither a list of tool call IDs nor "NO_EVIDENCE"',
            id="bad-evidence",
        ),
        pytest.param(
            json.dumps(draft("连接池耗尽", [finding("call-1", "call-7")])),
            "FINDING_CITES_NON_FOUND",
            "analysis[0] is a FINDING citing call-7, which returned ERROR",
            id="cites-error",
        ),
        pytest.param(
            json.dumps(draft("连接池耗尽", [{**finding("call-1"), "kind": "NEGATIVE_OBSERVATION"}])),
            "CONCLUSION_WITHOUT_FOUND_EVIDENCE",
            "a conclusion, but no FINDING cites a FOUND call",
            id="conclusion-without-finding",
        ),
        pytest.param(
            json.dumps(draft(None, [finding("call-9")])),
            "UNKNOWN_CITATION",
            "analysis[0] cites call-9, which is not a tool call of this run",
            id="cites-not-executed",
        ),
        pytest.param(
            json.dumps(draft(None, [finding("call-1"), finding("call-44")])),
            "UNKNOWN_CITATION",
            "analysis[1] cites call-44, which is not a tool call of this run",
            id="unknown-citation",
        ),
        pytest.param(
            '{"conclusion": null, "conclusion": "x"}',
            "DUPLICATE_KEY",
            "duplicate key `conclusion`",
            id="duplicate",
        ),
    ],
)
def test_each_kind_of_refusal_says_where_and_why(text: str, violation: str, detail: str) -> None:
    assert refused(text) == (violation, detail)
    assert "SECRET-TEXT" not in detail
    assert "连接池" not in detail


@pytest.mark.parametrize(
    "hostile",
    [
        "conf\x1b[31midence",  # an escape sequence in a key name
        "confidence\nINJECTED",
        "k" * 500,  # a key too long to quote
        "ключ",  # not the plain identifier set
    ],
)
def test_a_hostile_key_name_is_named_by_its_place_not_quoted(hostile: str) -> None:
    violation, detail = refused(json.dumps(draft(None, [finding("call-1", **{hostile: 1})])))
    assert (violation, detail) == ("SCHEMA_MISMATCH", "an unknown key in analysis[0]")


@pytest.mark.parametrize("hostile", ["call-\x1b]0;pwned\x07", "x" * 300, "调用-1"])
def test_a_hostile_citation_is_not_quoted(hostile: str) -> None:
    violation, detail = refused(json.dumps(draft(None, [finding(hostile)])))
    assert violation == "UNKNOWN_CITATION"
    assert detail == "analysis[0] cites an ID that cannot be shown, which is not a tool call of this run"


def test_a_detail_is_one_bounded_line_of_printable_text() -> None:
    many = [finding("call-1", "call-1", "call-1", "c" * 64)] * 3
    _, detail = refused(json.dumps(draft(None, many)))
    assert detail == f"analysis[0] cites {'c' * 64}, which is not a tool call of this run"
    assert len(detail) <= MAX_DETAIL_CHARS
    assert detail.isprintable()


def test_headless_run_prints_why_and_the_json_carries_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    audit = str(tmp_path / "audit.db")
    assert main(["run", "--scenario", "fenced-json-fails-closed", "--audit-db", audit]) == 1
    human = capsys.readouterr().out.splitlines()
    assert "failure: INVALID_DRAFT (NOT_A_JSON_OBJECT)" in human
    meaning = "the text is not only the JSON object (a code fence, prose or another JSON value)"
    assert f"meaning: {meaning}" in human
    assert "why: starts with a Markdown code fence" in human

    assert main(["run", "--scenario", "fenced-json-fails-closed", "--audit-db", audit, "--json"]) == 1
    result = json.loads(capsys.readouterr().out)
    assert result["failure"] == {
        "code": "INVALID_DRAFT",
        "violation": "NOT_A_JSON_OBJECT",
        "detail": "starts with a Markdown code fence",
    }
    assert "连接池耗尽" not in json.dumps(result, ensure_ascii=False)  # the refused text is gone


def test_every_violation_has_words_for_the_result_panel() -> None:
    """The console explains every code the parser can refuse a Draft with (console/presentation.py)."""
    assert set(VIOLATION_TEXT) == set(DraftViolation)
