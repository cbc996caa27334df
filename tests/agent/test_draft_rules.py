"""Prompt, run-specific schema and parser state one rule set (agent/draft/rules.py).

The property: for any run (its calls, statuses, evaluations and `max_draft_bytes`) and any Draft,
the strict parser accepts the Draft's canonical JSON exactly when it meets the rules the run's schema
states (the schema without its size keywords, validated with `jsonschema`) and fits the configured
bytes; every Draft the bounded schema admits is accepted. Drafts are generated FROM the schema (a
small walker over the keywords the schema uses) and then mutated at every rule: blank and zero-width
text, a text longer than its bound, items past their bound (both accepted when the bytes allow: the
configured limit is the limit), a FINDING citing an EMPTY, ERROR, NO_GAIN or unknown call, a
conclusion without a FINDING, a null conclusion without missing information, an unknown key, a
missing key. The one difference the bounds allow on purpose (text of characters whose canonical JSON
takes more than 3 bytes: outside the BMP, or C0 controls written as 6-byte escapes) is pinned by its
own test.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from agent.blank_text import BLANK_RANGES
from agent.draft.parser import DraftRejected, parse_draft
from agent.draft.rules import (
    FINDING,
    NEGATIVE_OBSERVATION,
    NO_EVIDENCE,
    RunEvidence,
    canonical_text,
    run_bounds,
)
from agent.draft.schema import run_draft_schema
from agent.prompt import system_prompt
from tests.support.draft_rules import without_size_bounds
from tests.support.hypothesis_budget import examples

EXAMPLES = examples(250, long=5_000)
BLANKS = [chr(lo) for lo, _ in BLANK_RANGES if 0x1F < lo <= 0xFFFF] + ["\t", "\n", "\r", " "]
# Any character of the BMP but lone surrogates and the C0 controls JSON writes as 6-byte escapes
# (the characters over 3 bytes are pinned below).
VISIBLE = st.characters(max_codepoint=0xFFFF, exclude_categories=("Cs", "Cc", "Cf", "Zs", "Zl", "Zp"))
ANY_TEXT_CHAR = st.characters(
    max_codepoint=0xFFFF,
    exclude_categories=["Cs"],
    exclude_characters=[chr(c) for c in range(0x20) if chr(c) not in "\t\n\r"],
)


def accepts(draft: Any, evidence: RunEvidence, max_bytes: int) -> bool:
    try:
        parse_draft(canonical_text(draft), max_bytes, evidence)
    except DraftRejected:
        return False
    return True


def admits(schema: dict[str, Any], draft: Any) -> bool:
    return bool(jsonschema.Draft202012Validator(schema).is_valid(draft))


# ------------------------------------------------------------------ runs
@st.composite
def runs(draw: st.DrawFn) -> tuple[RunEvidence, int]:
    ids = draw(
        st.lists(
            st.text(st.characters(min_codepoint=0x21, max_codepoint=0x9FFF), min_size=1, max_size=32)
            | st.sampled_from(["call-1", "call-2", "call_9f8e7d6c5b4a39281706f5e4", "调用-7"]),
            max_size=6,
            unique=True,
        )
    )
    statuses = {i: draw(st.sampled_from(["FOUND", "FOUND", "EMPTY", "ERROR"])) for i in ids}
    evaluations = {
        i: draw(st.sampled_from(["GAINED", "NO_GAIN", None])) for i, s in statuses.items() if s == "FOUND"
    }
    max_bytes = draw(st.sampled_from([2_048, 4_096, 16_384]))
    return RunEvidence.of(statuses, evaluations), max_bytes


# ------------------------------------------------------------------ Drafts from the schema
def texts(schema: dict[str, Any]) -> st.SearchStrategy[str]:
    limit = int(schema.get("maxLength", 40))
    free = st.text(ANY_TEXT_CHAR, max_size=limit) | st.text(ANY_TEXT_CHAR, min_size=limit, max_size=limit)
    if "pattern" not in schema:
        return free

    @st.composite
    def non_blank(draw: st.DrawFn) -> str:
        text = draw(free)
        visible = draw(VISIBLE)
        at = draw(st.integers(0, len(text)))
        return (text[:at] + visible + text[at:])[: max(limit, 1)] if text else visible

    return non_blank().filter(
        lambda t: len(t) <= limit and jsonschema.Draft202012Validator(schema).is_valid(t)
    )


def from_schema(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Instances of the keywords the Draft schema uses; `contains` is met by construction below."""
    if "anyOf" in schema:
        return st.one_of([from_schema(s) for s in schema["anyOf"]])
    if "const" in schema:
        return st.just(schema["const"])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    kind = schema.get("type")
    if isinstance(kind, list):
        return st.one_of([from_schema({**schema, "type": k}) for k in kind])
    if kind == "null":
        return st.none()
    if kind == "string":
        return texts(schema)
    if kind == "array":
        return arrays(schema)
    assert kind == "object", schema
    required = set(schema.get("required", []))
    props = schema["properties"]
    return st.fixed_dictionaries(
        {k: from_schema(v) for k, v in props.items() if k in required},
        optional={k: from_schema(v) for k, v in props.items() if k not in required},
    )


@st.composite
def arrays(draw: st.DrawFn, schema: dict[str, Any]) -> list[Any]:
    low, high = schema.get("minItems", 0), schema["maxItems"]
    items = draw(st.lists(from_schema(schema["items"]), min_size=low, max_size=high))
    contains = schema.get("contains")
    if contains is not None:
        meets = jsonschema.Draft202012Validator(contains).is_valid
        if not any(meets(i) for i in items):
            wanted = draw(from_schema(schema["items"]).filter(meets))
            if len(items) >= high:
                items[draw(st.integers(0, len(items) - 1))] = wanted
            else:
                items.insert(draw(st.integers(0, len(items))), wanted)
    return items


# ------------------------------------------------------------------ mutations
def _texts_of(draft: dict[str, Any]) -> list[tuple[Any, Any, bool]]:
    """(container, key, is a claim) of every text a mutation may change."""
    places: list[tuple[Any, Any, bool]] = []
    if draft["conclusion"] is not None:
        places.append((draft, "conclusion", True))
    for item in draft["analysis"]:
        places.append((item, "statement", True))
        if item.get("scope") is not None:
            places.append((item, "scope", False))
    for name in ("action_plan", "recommendations"):
        places += [(draft[name], i, False) for i in range(len(draft[name]))]
    limitations = draft["limitations"]
    for name in ("checked_scope", "missing_info"):
        places += [(limitations[name], i, False) for i in range(len(limitations[name]))]
    return places


@st.composite
def mutated(draw: st.DrawFn, draft: dict[str, Any], evidence: RunEvidence, max_bytes: int) -> dict[str, Any]:
    draft = json.loads(json.dumps(draft))
    bounds = run_bounds(max_bytes, evidence)
    places = _texts_of(draft)
    findings = [item for item in draft["analysis"] if item["kind"] == FINDING]
    choices = [
        "extra-key",
        "missing-key",
        "too-many-items",
        "conclusion-without-finding",
        "blank-missing-info",
    ]
    if places:
        choices += ["blank-text", "too-long-text", "zero-width-text"]
    if findings:
        choices += ["finding-cites-other"]
    if draft["analysis"]:
        choices += ["swap-kind"]
    choice = draw(st.sampled_from(choices))
    if choice in ("blank-text", "zero-width-text", "too-long-text"):
        container, key, claim = draw(st.sampled_from(places))
        if choice == "too-long-text":
            limit = bounds.max_text_chars if claim else bounds.max_note_chars
            container[key] = container[key] + draw(VISIBLE) * (limit + 1 - len(container[key]))
        else:
            alphabet = ["\u200b", "\u2060", "\ufeff", "\u200c"] if choice == "zero-width-text" else BLANKS
            container[key] = "".join(draw(st.lists(st.sampled_from(alphabet), min_size=0, max_size=4)))
    elif choice == "finding-cites-other":
        ids = [*evidence.calls, "call-unknown"]
        draw(st.sampled_from(findings))["evidence"].append(draw(st.sampled_from(ids)))
    elif choice == "extra-key":
        target = draw(st.sampled_from([draft, draft["limitations"], *draft["analysis"]]))
        target["confidence"] = 0.9
    elif choice == "missing-key":
        target = draw(st.sampled_from([draft, draft["limitations"], *draft["analysis"]]))
        del target[draw(st.sampled_from(sorted(target)))]
    elif choice == "too-many-items":
        name = draw(st.sampled_from(["analysis", "action_plan", "recommendations", "missing_info"]))
        filler: Any = {
            "kind": NEGATIVE_OBSERVATION,
            "statement": "未检查",
            "scope": "网关",
            "evidence": NO_EVIDENCE,
        }
        if name != "analysis":
            filler = "补充"
        target = draft["limitations"]["missing_info"] if name == "missing_info" else draft[name]
        limit = bounds.max_analysis if name == "analysis" else bounds.max_list_items
        target.extend([filler] * (limit + 1 - len(target)))
    elif choice == "conclusion-without-finding":
        draft["conclusion"] = draw(VISIBLE)
        draft["analysis"] = [item for item in draft["analysis"] if item["kind"] != FINDING]
    elif choice == "blank-missing-info":
        draft["conclusion"] = None
        draft["limitations"]["missing_info"] = draw(st.lists(st.sampled_from(BLANKS), max_size=2))
    else:  # swap-kind: a negative observation presented as a finding, or back
        item = draw(st.sampled_from(draft["analysis"]))
        item["kind"] = NEGATIVE_OBSERVATION if item["kind"] == FINDING else FINDING
    return draft


@st.composite
def cases(draw: st.DrawFn) -> tuple[RunEvidence, int, Any, bool]:
    evidence, max_bytes = draw(runs())
    schema = run_draft_schema(evidence, max_bytes)
    draft = draw(from_schema(schema))
    changed = draw(st.booleans())
    if changed:
        draft = draw(mutated(draft, evidence, max_bytes))
    return evidence, max_bytes, draft, changed


def check_parser_accepts_what_meets_the_rules_within_the_bytes(case: tuple[Any, ...]) -> None:
    evidence, max_bytes, draft, changed = case
    schema = run_draft_schema(evidence, max_bytes)
    admitted = admits(schema, draft)
    meets_rules = admits(without_size_bounds(schema), draft)
    fits = len(canonical_text(draft).encode("utf-8")) <= max_bytes
    event(f"{'mutated' if changed else 'from the schema'}, {'admitted' if admitted else 'refused'}")
    if not changed:
        # The generator is honest about the schema, which fits the bytes.
        assert admitted
        assert fits
    accepted = accepts(draft, evidence, max_bytes)
    assert accepted == (meets_rules and fits)
    if admitted:
        assert accepted


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_the_parser_accepts_exactly_the_drafts_that_meet_the_rules_within_the_bytes(
    case: tuple[Any, ...],
) -> None:
    check_parser_accepts_what_meets_the_rules_within_the_bytes(case)


@settings(max_examples=100, deadline=None)
@given(runs(), st.integers(min_value=16, max_value=4096))
def test_the_schema_sent_to_a_server_is_narrowed_to_its_token_limit_never_widened(
    run: tuple[RunEvidence, int], max_tokens: int
) -> None:
    evidence, max_bytes = run
    wide, narrow = run_bounds(max_bytes, evidence), run_bounds(max_bytes, evidence, max_tokens)
    assert narrow.max_text_chars <= wide.max_text_chars
    assert narrow.max_analysis <= wide.max_analysis
    assert narrow.max_list_items <= wide.max_list_items
    assert narrow.max_cited <= wide.max_cited


@pytest.mark.parametrize("max_bytes", [2_048, 4_096, 16_384])
@pytest.mark.parametrize("wide", ["\x01", "\U0001f525"], ids=["c0-control", "outside-the-bmp"])
def test_pinned_exception_characters_over_3_bytes_pass_the_bounds_and_fail_the_byte_limit(
    max_bytes: int, wide: str
) -> None:
    """The bounds budget 3 bytes a character (any BMP character). U+0001 is written `\\u0001` (6
    bytes), U+1F525 takes 4: a Draft made of them meets every schema keyword and the parser's byte
    check refuses it (but for the one-item Draft of 2 KiB, whose margin holds 4-byte characters);
    the same Draft of CJK characters fits and is accepted."""
    call = "c" * 38
    evidence = RunEvidence.of({call: "EMPTY"})
    bounds = run_bounds(max_bytes, evidence)

    def largest(filler: str) -> dict[str, Any]:
        claim = "x" + filler * (bounds.max_text_chars - 1)
        note = "x" + filler * (bounds.max_note_chars - 1)
        evidence_ = [call] * bounds.max_cited
        item = {"kind": NEGATIVE_OBSERVATION, "statement": claim, "scope": note, "evidence": evidence_}
        notes = [note] * bounds.max_list_items
        return {
            "conclusion": None,
            "analysis": [item] * bounds.max_analysis,
            "action_plan": notes,
            "recommendations": notes,
            "limitations": {"checked_scope": notes, "missing_info": notes},
        }

    schema = run_draft_schema(evidence, max_bytes)
    over, cjk = largest(wide), largest("诊")
    assert admits(schema, over)
    assert admits(schema, cjk)
    if len(canonical_text(over).encode("utf-8")) > max_bytes:  # what the bounds cannot promise
        with pytest.raises(DraftRejected) as caught:
            parse_draft(canonical_text(over), max_bytes, evidence)
        assert caught.value.violation == "DRAFT_TOO_LARGE"
    else:  # a small Draft's margin may still hold it
        assert wide == "\U0001f525"
        assert max_bytes == 2_048
        assert parse_draft(canonical_text(over), max_bytes, evidence).analysis
    assert parse_draft(canonical_text(cjk), max_bytes, evidence).analysis


def test_the_prompt_states_the_rules_the_parser_checks() -> None:
    """The prompt's Draft section is written from the same names and limits (agent/prompt.py)."""
    bounds = run_bounds(16_384)
    prompt = system_prompt(bounds)
    for needed in (
        f"T=非空白文本，≤{bounds.max_text_chars} 字",
        f"S=非空白文本，≤{bounds.max_note_chars} 字",
        f"≤{bounds.max_analysis} 项",
        f"1-{bounds.max_cited} 个 A 类 ID",
        f"列表 ≤{bounds.max_list_items} 项",
        f'"kind": "{FINDING}"',
        f'"kind": "{NEGATIVE_OBSERVATION}"',
        f'"{NO_EVIDENCE}"',
        "evidence_status=FOUND 且未评估为 NO_GAIN",  # FINDING_CITES_NON_FOUND / FINDING_CITES_NO_GAIN
        "EMPTY、ERROR 或评估为 NO_GAIN 的结果只能由 NEGATIVE_OBSERVATION 引用",
        "未执行的调用（NOT_EXECUTED，如 DUPLICATE_CALL）不能引用",  # UNKNOWN_CITATION
        "conclusion 非 null 时至少一条 FINDING",  # CONCLUSION_WITHOUT_FOUND_EVIDENCE
        "为 null 时 missing_info 至少一条非空白",  # NULL_CONCLUSION_WITHOUT_MISSING_INFO
        "零宽字符都算空白",  # SCHEMA_MISMATCH on blank text
    ):
        assert needed in prompt, needed
    # The old prompt let a NEGATIVE_OBSERVATION cite a call that was not executed.
    assert "EMPTY/ERROR/未执行的调用只用于 NEGATIVE_OBSERVATION" not in prompt
