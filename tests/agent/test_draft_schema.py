"""The run-specific Draft schema: what it admits is what the strict parser accepts for that run.

Replies recorded from small local models (behind llama.cpp's server) are checked both ways: the
schema admits a reply only if the parser accepts it, and it never admits a conclusion without FOUND
evidence or an ID the run does not have.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.blank_text import is_blank
from agent.draft.parser import DraftRejected, parse_draft
from agent.draft.rules import RunEvidence, draft_bounds, run_bounds
from agent.draft.schema import final_round_kwargs, run_draft_schema
from tests.support.draft_rules import without_size_bounds

RECORDED = json.loads((Path(__file__).parents[1] / "data" / "recorded_final_rounds.json").read_text("utf-8"))


def valid(schema: dict[str, Any], instance: Any) -> bool:
    return bool(jsonschema.Draft202012Validator(schema).is_valid(instance))


def parses(text: str, statuses: dict[str, str], max_bytes: int = 16_384) -> bool:
    try:
        parse_draft(text, max_bytes, RunEvidence.of(statuses))
    except DraftRejected:
        return False
    return True


def draft(
    conclusion: str | None, analysis: list[dict[str, Any]], missing: list[str] | None = None
) -> dict[str, Any]:
    return {
        "conclusion": conclusion,
        "analysis": analysis,
        "action_plan": [],
        "recommendations": [],
        "limitations": {
            "checked_scope": ["日志"],
            "missing_info": ["trace_id"] if missing is None else missing,
        },
    }


FINDING = {"kind": "FINDING", "statement": "连接池耗尽", "evidence": ["c-found"]}
NEGATIVE_IDS = {
    "kind": "NEGATIVE_OBSERVATION",
    "statement": "无错误",
    "scope": "gateway",
    "evidence": ["c-empty"],
}
NO_EVIDENCE = {"kind": "NEGATIVE_OBSERVATION", "statement": "无", "scope": "全部", "evidence": "NO_EVIDENCE"}


def test_a_found_call_enables_a_conclusion_citing_it() -> None:
    schema = run_draft_schema(RunEvidence.of({"c-found": "FOUND", "c-empty": "EMPTY"}), 16_384)
    assert valid(schema, draft("连接池耗尽导致超时", [FINDING], missing=[]))
    assert valid(schema, draft(None, [FINDING, NEGATIVE_IDS, NO_EVIDENCE]))
    # A concluded Draft may carry negative observations beside its finding (the parser accepts it).
    assert valid(schema, draft("连接池耗尽导致超时", [NO_EVIDENCE, FINDING, NEGATIVE_IDS], missing=[]))
    # A finding may not cite a call that found nothing, nor an invented one.
    assert not valid(schema, draft("x", [{**FINDING, "evidence": ["c-empty"]}]))
    assert not valid(schema, draft("x", [{**FINDING, "evidence": ["call-1"]}]))
    # A conclusion needs a finding.
    assert not valid(schema, draft("x", [], missing=[]))
    assert not valid(schema, draft("x", [NEGATIVE_IDS]))


def test_no_found_call_admits_only_a_null_conclusion() -> None:
    schema = run_draft_schema(RunEvidence.of({"c-empty": "EMPTY"}), 16_384)
    assert schema["properties"]["conclusion"] == {"type": "null"}
    assert valid(schema, draft(None, [NEGATIVE_IDS, NO_EVIDENCE]))
    assert not valid(schema, draft("猜测的根因", [NEGATIVE_IDS]))
    assert not valid(schema, draft(None, [{**FINDING, "evidence": ["c-empty"]}]))
    assert not valid(schema, draft(None, [NEGATIVE_IDS], missing=[]))  # null conclusion says what is missing


def test_zero_calls_admit_only_scoped_no_evidence() -> None:
    schema = run_draft_schema(RunEvidence.of({}), 16_384)
    assert valid(schema, draft(None, [NO_EVIDENCE]))
    assert valid(schema, draft(None, []))
    assert not valid(schema, draft(None, [NEGATIVE_IDS]))
    assert not valid(schema, draft(None, [{k: v for k, v in NO_EVIDENCE.items() if k != "scope"}]))


def test_ids_are_enumerated_from_the_run() -> None:
    evidence = RunEvidence.of(
        {"a": "FOUND", "b": "FOUND", "c": "EMPTY", "d": "FOUND"}, {"a": "GAINED", "d": "NO_GAIN"}
    )
    schema = run_draft_schema(evidence, 16_384)
    with_conclusion, without = schema["anyOf"]
    finding, negative, _ = with_conclusion["properties"]["analysis"]["items"]["anyOf"]
    assert finding["properties"]["evidence"]["items"]["enum"] == ["a", "b"]  # FOUND, not NO_GAIN
    assert negative["properties"]["evidence"]["items"]["enum"] == ["a", "b", "c", "d"]
    assert without["properties"]["analysis"]["items"] == with_conclusion["properties"]["analysis"]["items"]


@pytest.mark.parametrize("max_bytes", [2_048, 4_096, 8_192, 16_384, 65_536])
def test_the_largest_admitted_draft_fits_max_draft_bytes(max_bytes: int) -> None:
    """Every text at its maximum length, in 3-byte characters (the most a BMP character takes)."""
    ids = ["call_" + "x" * 30 + str(i) for i in range(6)]
    evidence = RunEvidence.of(dict.fromkeys(ids, "FOUND"))
    bounds = run_bounds(max_bytes, evidence)
    claim, note = "诊" * bounds.max_text_chars, "断" * bounds.max_note_chars
    finding = {"kind": "FINDING", "statement": claim, "scope": note, "evidence": ids[: bounds.max_cited]}
    notes = [note] * bounds.max_list_items
    largest = {
        "conclusion": claim,
        "analysis": [finding] * bounds.max_analysis,
        "action_plan": notes,
        "recommendations": notes,
        "limitations": {"checked_scope": notes, "missing_info": notes},
    }
    assert valid(run_draft_schema(evidence, max_bytes), largest)
    assert len(json.dumps(largest, ensure_ascii=False).encode("utf-8")) <= max_bytes
    assert parses(json.dumps(largest, ensure_ascii=False), dict.fromkeys(ids, "FOUND"), max_bytes)


@pytest.mark.parametrize("case", RECORDED, ids=lambda c: c["name"])
def test_recorded_final_round_replies(case: dict[str, Any]) -> None:
    """Replies recorded from real final rounds, with the run's schema enforced by the server or not.

    - an enforced reply meets the rules the run's schema states (the server's grammar and the schema
      agree; the size bounds it was sent then were those of its day);
    - the parser accepts exactly what meets the rules within the bytes, and whatever the bounded
      schema admits;
    - the parser's verdict now is the one the recorded run got.
    """
    statuses: dict[str, str] = case["statuses"]
    schema = run_draft_schema(RunEvidence.of(statuses), case["max_draft_bytes"])
    try:
        reply = json.loads(case["reply"])
    except json.JSONDecodeError:
        reply = None
    meets_rules = reply is not None and valid(without_size_bounds(schema), reply)
    accepted = parses(case["reply"], statuses, case["max_draft_bytes"])
    if case["enforced"]:
        assert meets_rules
    assert meets_rules == accepted
    if reply is not None and valid(schema, reply):
        assert accepted
    assert accepted == (case["outcome"] == "DRAFT")


ENFORCED = [c for c in RECORDED if c["enforced"]]


@pytest.mark.parametrize("case", ENFORCED, ids=lambda c: c["name"])
def test_recorded_replies_changed_against_the_run_are_refused_by_schema_and_parser(
    case: dict[str, Any],
) -> None:
    """A recorded Draft with an invented citation, or a conclusion where nothing was FOUND, is out."""
    statuses: dict[str, str] = case["statuses"]
    found = [i for i, s in statuses.items() if s == "FOUND"]
    schema = run_draft_schema(RunEvidence.of(statuses), case["max_draft_bytes"])
    reply = json.loads(case["reply"])
    changed: list[dict[str, Any]] = []
    cited = [item for item in reply["analysis"] if isinstance(item["evidence"], list)]
    if cited:
        invented = json.loads(json.dumps(reply))
        next(i for i in invented["analysis"] if isinstance(i["evidence"], list))["evidence"] = ["call-999"]
        changed.append(invented)
    if not found:
        changed.append({**reply, "conclusion": "编造的根因"})
    assert changed or not statuses  # every recorded situation has something to change
    for draft_ in changed:
        text = json.dumps(draft_, ensure_ascii=False)
        assert not valid(schema, draft_)
        assert not parses(text, statuses, case["max_draft_bytes"])


def test_the_schema_also_fits_the_round_token_limit() -> None:
    """A Draft the schema admits must not need more tokens than the server may generate."""
    evidence = RunEvidence.of({"call-1": "FOUND"})
    roomy = final_round_kwargs(evidence, 16_384, max_tokens=4096)
    tight = final_round_kwargs(evidence, 16_384, max_tokens=384)

    def text_chars(kwargs: dict[str, Any]) -> int:
        schema = kwargs["extra_body"]["response_format"]["json_schema"]["schema"]
        return int(schema["anyOf"][0]["properties"]["conclusion"]["maxLength"])

    assert text_chars(tight) < text_chars(roomy)
    assert text_chars(tight) == draft_bounds(768).max_text_chars  # 384 tokens x 2 bytes
    assert tight["tool_choice"] == "none"


def _pattern_strings(node: Any) -> list[dict[str, Any]]:
    """Every string schema with a `pattern` in a schema tree."""
    found: list[dict[str, Any]] = []
    if isinstance(node, dict):
        if "pattern" in node:
            found.append(node)
        for value in node.values():
            found += _pattern_strings(value)
    elif isinstance(node, list):
        for value in node:
            found += _pattern_strings(value)
    return found


@pytest.mark.parametrize(("max_draft_bytes", "max_tokens"), [(2048, 384), (16_384, 4096), (16_384, 512)])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_schema_sent_to_a_server_bounds_every_pattern_string_itself(
    max_draft_bytes: int, max_tokens: int, data: st.DataObject
) -> None:
    """A grammar built from a string's `pattern` ignores `maxLength` and writes the pattern's characters
    into the JSON as they are (llama.cpp's does): an unbounded `*` let a 270M model write one statement
    until `max_tokens` cut the Draft (MAX_TOKENS on every run), and a `"` in "any character" ended the
    string early (output the server could not parse). So every text the pattern admits fits
    `maxLength`, holds no character JSON escapes, and is one the parser calls non-blank."""
    evidence = RunEvidence.of({"call-1": "FOUND", "call-2": "EMPTY"})
    schema = final_round_kwargs(evidence, max_draft_bytes, max_tokens)["extra_body"]["response_format"]
    strings = _pattern_strings(schema["json_schema"]["schema"])
    assert strings
    node = data.draw(st.sampled_from(strings))
    text = data.draw(st.from_regex(node["pattern"], fullmatch=True))
    assert len(text) <= node["maxLength"]
    assert json.dumps(text, ensure_ascii=False) == f'"{text}"'  # nothing escaped
    assert not is_blank(text)
