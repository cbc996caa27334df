"""Property fuzzing of every parser that reads text a model, a file or a caller controls.

Each property says what may come out: a typed rejection or a valid value, never another exception, and
a valid value that keeps the contract's promises. Each runs ~200 examples; under the `long` Hypothesis
profile, 10,000 (`pytest --hypothesis-profile long tests/resilience/test_fuzz.py`).
"""

from __future__ import annotations

import json
import re
import string
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from agent.blank_text import is_blank
from agent.contracts import DiagnosisDraft, PreviousTurn
from agent.draft.parser import DraftRejected, parse_draft
from agent.draft.rules import RunEvidence
from agent.scenarios import Scenario, ScenarioError, parse_scenario
from tests.support.hypothesis_budget import examples
from tests.support.raising import returned_or_raised
from tools.adapter import ToolError
from tools.boundary import ToolBoundary
from tools.definitions import MAX_SQL_BYTES, TOOL_NAMES, ToolName
from tools.input_models import BUSINESS_INPUTS, QueryMysqlInput
from tools.logs.logql import MAX_CONTAINS_CHARS, build_logql
from tools.unicode_text import is_encodable

DEFAULT = settings(
    max_examples=examples(200, long=10_000),
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)

# --- shared strategies -----------------------------------------------------------------------------------

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=40),
    st.sampled_from(
        ["", " ", "\x00", "\ud800", "NO_EVIDENCE", "FINDING", "call-1", "GAINED", "2026-11-30T02:00:00Z"]
    ),
)
json_like = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=12), children, max_size=5)
    ),
    max_leaves=25,
)


def rarely(draw: st.DrawFn, one_in: int = 10) -> bool:
    """True about once in `one_in` draws. Hypothesis favours small indices, so the common case is first."""
    return draw(st.sampled_from([False] * (one_in - 1) + [True]))


words = st.sampled_from(["连接池耗尽", "orders", "payment-service", "x"]) | st.text(
    min_size=1, max_size=20
).filter(str.strip)


def perturb(draw: st.DrawFn, value: Any) -> Any:
    """One change at one random place of a valid value: a value replaced, a key dropped or added."""
    if isinstance(value, dict) and value and not rarely(draw, 4):
        key = draw(st.sampled_from(sorted(value)))
        out = dict(value)
        action = draw(st.sampled_from(["descend", "replace", "drop", "add"]))
        if action == "descend":
            out[key] = perturb(draw, value[key])
        elif action == "replace":
            out[key] = draw(json_like)
        elif action == "drop":
            del out[key]
        else:
            out[draw(st.text(max_size=6))] = draw(json_like)
        return out
    if isinstance(value, list) and value and not rarely(draw, 4):
        index = draw(st.integers(0, len(value) - 1))
        return [perturb(draw, item) if i == index else item for i, item in enumerate(value)]
    return draw(json_like)


def valid_or_perturbed(valid: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Half valid values, half valid values broken in exactly one place: both sides of every check."""

    @st.composite
    def build(draw: st.DrawFn) -> Any:
        value = draw(valid)
        return value if draw(st.booleans()) else perturb(draw, value)

    return build()


def _mutate(draw: st.DrawFn, text: str) -> str:
    """Ways a model spoils a right answer: fences, prefixes, truncation, doubled keys, junk."""
    how = draw(st.sampled_from(["fence", "prefix", "suffix", "truncate", "bom", "dupkey", "splice"]))
    if how == "fence":
        return f"```json\n{text}\n```"
    if how == "prefix":
        return draw(st.sampled_from(["Here is the Draft: ", " ", "\n", "\ufeff"])) + text
    if how == "suffix":
        return text + draw(st.sampled_from(["", " ", "\n", "}", " trailing", "\x00"]))
    if how == "truncate":
        return text[: draw(st.integers(0, len(text)))]
    if how == "bom":
        return "\ufeff" + text
    if how == "dupkey":
        return text.replace('{"conclusion"', '{"conclusion": null, "conclusion"', 1)
    at = draw(st.integers(0, len(text)))
    return text[:at] + draw(st.text(max_size=8)) + text[at:]


# --- 1. the Draft parser ---------------------------------------------------------------------------------

KNOWN_CALLS = {"call-1": "FOUND", "call-2": "EMPTY", "call-3": "ERROR"}
VIOLATIONS = {
    "EMPTY_OUTPUT", "INVALID_ENCODING", "DRAFT_TOO_LARGE", "NOT_A_JSON_OBJECT", "MALFORMED_JSON",
    "DUPLICATE_KEY", "SCHEMA_MISMATCH", "UNKNOWN_CITATION", "CONCLUSION_WITHOUT_FOUND_EVIDENCE",
    "FINDING_CITES_NON_FOUND", "FINDING_CITES_NO_GAIN", "NULL_CONCLUSION_WITHOUT_MISSING_INFO",
}  # fmt: skip
ids = st.sampled_from([*KNOWN_CALLS, "call-4"])  # call-4 is not an invocation of this run
limitations = st.fixed_dictionaries(
    {"checked_scope": st.lists(words, max_size=3), "missing_info": st.lists(words, max_size=3)}
)


def draft_dicts(cited: st.SearchStrategy[str]) -> st.SearchStrategy[dict[str, Any]]:
    findings = st.fixed_dictionaries(
        {"kind": st.just("FINDING"), "statement": words, "evidence": st.lists(cited, min_size=1, max_size=3)},
        optional={"scope": words},
    )
    negatives = st.fixed_dictionaries(
        {
            "kind": st.just("NEGATIVE_OBSERVATION"),
            "statement": words,
            "evidence": st.just("NO_EVIDENCE"),
            "scope": words,
        }
    ) | st.fixed_dictionaries(
        {
            "kind": st.just("NEGATIVE_OBSERVATION"),
            "statement": words,
            "evidence": st.lists(cited, min_size=1, max_size=2),
        },
        optional={"scope": words},
    )
    return st.fixed_dictionaries(
        {
            "conclusion": st.none() | words,
            "analysis": st.lists(findings | negatives, max_size=4),
            "action_plan": st.lists(words, max_size=3),
            "recommendations": st.lists(words, max_size=3),
            "limitations": limitations,
        }
    )


drafts = draft_dicts(ids)
honest_drafts = draft_dicts(st.sampled_from(list(KNOWN_CALLS)))  # cites only this run's invocations


@st.composite
def spoiled(draw: st.DrawFn) -> str:
    return _mutate(draw, json.dumps(draw(drafts), ensure_ascii=False))


draft_texts = st.one_of(
    honest_drafts.map(json.dumps),
    valid_or_perturbed(drafts).map(lambda d: json.dumps(d, ensure_ascii=False)),
    valid_or_perturbed(drafts).map(json.dumps),
    spoiled(),
    st.text(max_size=200),
    json_like.map(json.dumps),
    st.integers(1, 5000).map(lambda n: "[" * n + "]" * n),
    st.integers(1, 5000).map(lambda n: '{"conclusion": ' * n),
)


def check_draft(text: str, max_bytes: int) -> None:
    draft = returned_or_raised(
        lambda: parse_draft(text, max_bytes, RunEvidence.of(KNOWN_CALLS)), DraftRejected
    )
    if isinstance(draft, DraftRejected):
        assert draft.violation in VIOLATIONS, draft.violation
        return
    assert isinstance(draft, DiagnosisDraft)
    assert all(cited in KNOWN_CALLS for cited in draft.cited_ids()), draft
    if draft.conclusion is not None:
        assert not is_blank(draft.conclusion)
        assert any(item.kind == "FINDING" for item in draft.analysis), draft
    else:
        assert any(not is_blank(entry) for entry in draft.limitations.missing_info), draft
    for item in draft.analysis:
        assert not is_blank(item.statement), item
        assert item.scope is None or not is_blank(item.scope), item
        if item.kind == "FINDING":
            assert all(KNOWN_CALLS.get(i) == "FOUND" for i in item.evidence), item
    assert is_encodable(draft.model_dump_json())  # it can be stored, printed and sent
    assert DiagnosisDraft.model_validate_json(draft.model_dump_json()) == draft


@DEFAULT
@given(draft_texts, st.sampled_from([16_384, 64]))
def test_draft_parser_rejects_or_accepts_only_valid_drafts(text: str, max_bytes: int) -> None:
    check_draft(text, max_bytes)


# --- 2. the tool envelope's business input --------------------------------------------------------------

short = words.filter(lambda w: len(w) <= 100)
printable = st.text(st.characters(blacklist_categories=("Cc", "Cs")), min_size=1, max_size=30)
VALID_INPUTS = {
    "lookup_knowledge": st.fixed_dictionaries({"query": printable}, optional={"top_k": st.integers(1, 5)}),
    "query_logs": st.fixed_dictionaries(
        {
            "service": printable,
            "start": st.sampled_from(["2026-11-30T02:00:00Z", "2026-11-30T02:00:00.123+08:00"]),
            "end": st.sampled_from(["2026-11-30T03:00:00+08:00", "2026-11-30T03:00:00Z"]),
        },
        optional={
            "level": st.sampled_from(["ERROR", "WARN", "INFO", "DEBUG", None]),
            "contains": st.none() | printable,
            "limit": st.integers(1, 200),
        },
    ),
    "query_mysql": st.fixed_dictionaries({"sql": words}, optional={"database": st.none() | words}),
}
EDGE_INPUTS = {
    "lookup_knowledge": st.fixed_dictionaries({"query": st.text(max_size=600), "top_k": st.integers(-1, 7)}),
    "query_logs": st.fixed_dictionaries(
        {
            "service": st.text(max_size=120),
            "start": st.sampled_from(
                ["2026-11-30T02:00:00", "yesterday", "2026-13-40T99:00:00Z", "", "2026-11-30"]
            ),
            "end": st.sampled_from(["2026-11-30 03:00:00Z", "2026-11-30T03:00:00+25:00", "24:00"]),
            "contains": st.text(max_size=220),
            "limit": st.integers(-1, 300),
        }
    ),
    "query_mysql": st.fixed_dictionaries(
        {
            "sql": st.integers(3990, 4010).map(lambda n: "SELECT '" + "é" * (n // 2) + "'"),
            "database": st.text(max_size=70),
        }
    ),
}


def business_inputs(tool: str) -> st.SearchStrategy[Any]:
    return st.one_of(VALID_INPUTS[tool], valid_or_perturbed(VALID_INPUTS[tool]), EDGE_INPUTS[tool], json_like)


def check_input(tool: str, raw: Any) -> None:
    model = returned_or_raised(lambda: ToolBoundary.validate_input(tool, raw), ToolError)
    if isinstance(model, ToolError):
        assert (model.code, model.reason) == ("INVALID_INPUT", None)
        return
    assert isinstance(model, BUSINESS_INPUTS[tool])
    assert type(model).model_validate(model.model_dump()) == model  # what is executed validates again
    if tool == ToolName.QUERY_MYSQL:
        assert isinstance(model, QueryMysqlInput)
        assert len(model.sql.encode("utf-8")) <= MAX_SQL_BYTES
    else:
        texts = [v for v in model.model_dump().values() if isinstance(v, str)]
        assert all(ch.isprintable() or ch == " " or ord(ch) >= 128 for text in texts for ch in text), texts


tool_and_input = st.sampled_from(TOOL_NAMES).flatmap(
    lambda tool: st.tuples(st.just(tool), business_inputs(tool))
)


@DEFAULT
@given(tool_and_input)
def test_envelope_input_is_invalid_input_or_a_valid_model(case: tuple[str, Any]) -> None:
    check_input(*case)


# --- 3. PreviousTurn -------------------------------------------------------------------------------------

valid_turns = st.fixed_dictionaries(
    {"query": words, "conclusion": st.none() | words, "limitations": limitations}
)
previous_turns = st.one_of(valid_or_perturbed(valid_turns), json_like)


def check_previous_turn(value: Any) -> None:
    try:
        turn = PreviousTurn.model_validate(value)
    except ValidationError:
        return
    assert isinstance(turn, PreviousTurn)
    assert turn.query
    assert isinstance(turn.limitations.checked_scope, list)
    assert PreviousTurn.model_validate(turn.model_dump()) == turn


@DEFAULT
@given(previous_turns)
def test_previous_turn_is_a_validation_error_or_valid(value: Any) -> None:
    check_previous_turn(value)


# --- 4. the scenario loader ------------------------------------------------------------------------------


tool_calls = st.fixed_dictionaries(
    {"name": st.sampled_from(TOOL_NAMES) | words},
    optional={
        "id": st.none() | words,
        "arguments": st.fixed_dictionaries({"previous_observation": st.none(), "input": json_like}),
    },
)
rounds = st.fixed_dictionaries(
    {},
    optional={
        "text": st.none() | words,
        "tool_calls": st.lists(tool_calls, max_size=2),
        "usage": st.fixed_dictionaries({}, optional={"prompt_tokens": st.integers(0, 10**6)}),
        "delay_ms": st.integers(0, 600_000),
    },
)
scenarios = st.fixed_dictionaries(
    {"name": short, "rounds": st.lists(rounds, min_size=1, max_size=3)},
    optional={
        "title": words,
        "description": words,
        "query": words,
        "settings": st.dictionaries(words, json_like, max_size=2),
        "previous_turn": st.none() | valid_turns,
    },
)


YAML_ODDITIES = [
    "a: &a [*a]",
    "settings: &s {x: *s}\nname: n\nrounds: [{text: hi}]",
    "!!python/object:os.system {}",
    "name: !!binary aGk=\nrounds: [{}]",
    "%YAML 1.1\n---\nname: n\nrounds: [{}]",
    "--- a\n--- b",
    "? [a]\n: b",
    "name: n\nrounds: [{delay_ms: 1e9}]",
    "name: n\nname: m\nrounds: [{}]",
    "\t",
    "name: 'unterminated",
    "a: &x &x &x ",
    "rounds: [{text: !!float 1}]\nname: x",
    "name: x\nrounds: [{text: 2001-12-14}]",
]


def _yaml_dump(value: Any) -> str:
    try:
        return yaml.safe_dump(value, allow_unicode=True)
    except yaml.YAMLError:
        return json.dumps(value)


scenario_texts = st.one_of(
    valid_or_perturbed(scenarios).map(_yaml_dump),
    valid_or_perturbed(scenarios).map(lambda v: json.dumps(v, ensure_ascii=False)),
    st.text(max_size=200),
    st.text(alphabet="[]{}:-,&*!|>'\" \n\tab1", max_size=80),
    st.sampled_from(YAML_ODDITIES),
    json_like.map(_yaml_dump),
)


def check_scenario(text: str) -> None:
    scenario = returned_or_raised(lambda: parse_scenario(text), ScenarioError)
    if isinstance(scenario, ScenarioError):
        assert str(scenario).startswith("<scenario>: ")
        return
    assert isinstance(scenario, Scenario)
    assert scenario.rounds


@DEFAULT
@given(scenario_texts)
def test_scenario_loader_answers_scenario_error_or_a_scenario(text: str) -> None:
    check_scenario(text)


SURROGATE_KEYS = st.builds(
    lambda head, low, tail: head + chr(low) + tail,
    st.text(string.ascii_lowercase, max_size=3),
    st.integers(0xD800, 0xDFFF),
    st.text(string.ascii_lowercase, max_size=3),
)
# Where a key can sit in a scenario or a case: top level, a settings section or limit, a round, a call.
KEY_PLACES = [
    lambda k: {k: 1, "name": "x", "query": "q", "rounds": [{"text": "a"}]},
    lambda k: {"name": "x", "query": "q", "settings": {k: {}}, "rounds": [{"text": "a"}]},
    lambda k: {"name": "x", "query": "q", "settings": {"budget": {k: 1}}, "rounds": [{"text": "a"}]},
    lambda k: {"name": "x", "query": "q", "rounds": [{"text": "a", k: 1}]},
    lambda k: {"name": "x", "rounds": [{"tool_calls": [{"id": "c", "name": "t", k: {}}]}]},
    lambda k: {"name": "x", "query": "q", "expect": {k: "DRAFT"}, "scenario": "payment-timeout"},
]


@DEFAULT
@given(SURROGATE_KEYS, st.sampled_from(KEY_PLACES))
def test_a_key_that_is_not_text_is_a_typed_error_in_scenarios_and_cases(
    tmp_path_factory: pytest.TempPathFactory, key: str, place: Any
) -> None:
    """A `\\udXXX` escape in a key anywhere: the loader names where, and never fails to encode its own
    message (pydantic's validators echo keys) with a UnicodeEncodeError instead."""
    from console.evaluation.cases import EvalCaseError, load_case_file

    text = json.dumps(place(key))
    with pytest.raises(ScenarioError, match="is not valid Unicode text"):
        parse_scenario(text)
    case = tmp_path_factory.mktemp("case") / "case.yaml"
    case.write_text(text, encoding="utf-8")
    with pytest.raises(EvalCaseError, match="is not valid Unicode text"):
        load_case_file(case)


def alias_chain(links: int) -> str:
    """A scenario whose scripted call's arguments are a chain of anchors, each two aliases of the one
    before: a few hundred bytes that expand to 2**links values once serialised."""
    lines = ["name: bomb", "query: q", "rounds:", "- tool_calls:", "  - id: c", "    name: lookup_knowledge"]
    lines += ["    arguments:", "      a0: &a0 [x, x]"]
    lines += [f"      a{i}: &a{i} [*a{i - 1}, *a{i - 1}]" for i in range(1, links)]
    return "\n".join([*lines, '- text: "{}"', ""])


@pytest.mark.parametrize(
    "text",
    [
        alias_chain(20),
        "name: x\nquery: &q q\ntitle: *q\nrounds: [{text: a}]\n",
        "name: x\nbase: &b {text: a}\nrounds: [{<<: *b}]\n",
    ],
    ids=["expanding-chain", "one-alias", "merge-key"],
)
def test_yaml_aliases_are_refused_before_anything_expands_them(
    text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A scenario or case file is hostile input: an alias shares one object, so a short chain of them
    is gigabytes once a run serialises the arguments. Refused by the loader, with the line, exit 3."""
    from console.commands.main import main
    from console.evaluation.cases import EvalCaseError, load_case_file

    with pytest.raises(ScenarioError, match=r"YAML aliases are not allowed in a scenario \(line \d+\)"):
        parse_scenario(text)
    case = tmp_path / "case.yaml"
    case.write_text(text, encoding="utf-8")
    with pytest.raises(EvalCaseError, match="YAML aliases are not allowed in a case"):
        load_case_file(case)
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(text, encoding="utf-8")
    assert main(["run", "--scenario", str(scenario), "--audit-db", str(tmp_path / "a.db"), "--json"]) == 3
    assert "YAML aliases are not allowed" in capsys.readouterr().err


@pytest.mark.parametrize(
    "text", ["[" * 1000, "{a: " * 1000, "- " * 1000 + "x"], ids=["flow-seq", "flow-map", "block-seq"]
)
def test_deeply_nested_yaml_is_a_scenario_error(text: str) -> None:
    with pytest.raises(ScenarioError):
        parse_scenario(text)


# --- 5. the SQL guard: its fuzzing lives with its generator, in tests/tools/test_sql_guard.py ---------------


# --- 6. the LogQL builder --------------------------------------------------------------------------------

SELECTORS = {
    "payment-service": '{app="payment-service", namespace="prod"}',
    "gateway": '{job=~"gateway|edge", msg="a |= \\"b\\" }"}',
    "支付": '{app="支付"}',
}
_GO_SIMPLE_ESCAPES = {
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
    '"': '"',
}


def go_unquote(text: str, at: int) -> tuple[str, int]:
    """Decode the double-quoted Go string literal starting at `at` (strconv.Unquote rules, which Loki's
    lexer applies); returns the value and the index after the closing quote.
    Independent of tools.logs.logql."""
    assert text[at] == '"', text[at:]
    out: list[str] = []
    i = at + 1
    while True:
        ch = text[i]
        if ch == '"':
            return "".join(out), i + 1
        assert ch != "\n", "a raw newline ends a Go string literal"
        if ch != "\\":
            out.append(ch)
            i += 1
            continue
        kind = text[i + 1]
        if kind in _GO_SIMPLE_ESCAPES:
            out.append(_GO_SIMPLE_ESCAPES[kind])
            i += 2
        elif kind in "xuU":
            width = {"x": 2, "u": 4, "U": 8}[kind]
            out.append(chr(int(text[i + 2 : i + 2 + width], 16)))
            i += 2 + width
        elif kind in string.octdigits:
            out.append(chr(int(text[i + 1 : i + 4], 8)))
            i += 4
        else:
            raise AssertionError(f"invalid escape \\{kind}")


def parse_pipeline(query: str, selector: str, level_label: str) -> tuple[list[str], list[str]]:
    """The stages after the selector: (level patterns, line-filter strings). Anything else fails."""
    assert query.startswith(selector), (query, selector)
    rest, i = query[len(selector) :], 0
    levels: list[str] = []
    filters: list[str] = []
    while i < len(rest):
        if rest[i] == " ":
            i += 1
        elif rest.startswith("|~ ", i):
            value, i = go_unquote(rest, i + 3)
            filters.append(value)
        elif rest.startswith(f"| {level_label}=~", i):
            value, i = go_unquote(rest, i + len(f"| {level_label}=~"))
            levels.append(value)
        else:
            raise AssertionError(f"unexpected text after the selector: {rest[i:]!r}")
    return levels, filters


logql_cases = st.tuples(
    st.sampled_from(list(SELECTORS)) | st.text(max_size=10),
    st.none() | st.sampled_from(["ERROR", "WARN", "INFO", "DEBUG"]) | st.text(max_size=6),
    st.none()
    | st.text(max_size=MAX_CONTAINS_CHARS + 20)
    | st.sampled_from(['"} |= "', '\\"', "`", "\\x41", '|~ ".*"']),
    st.sampled_from(["level", "detected_level"]),
)


def check_logql(service: str, level: str | None, contains: str | None, level_label: str) -> None:
    query = returned_or_raised(
        lambda: build_logql(SELECTORS, service, level, contains, level_label), ToolError
    )
    if isinstance(query, ToolError):
        assert query.code == "INVALID_INPUT"
        return
    levels, filters = parse_pipeline(query, SELECTORS[service], level_label)
    assert len(levels) == (level is not None)
    assert len(filters) == (contains is not None)
    if contains is not None:
        # The one line filter finds `contains` in any case and nothing else (Python's `re` reads
        # RE2's escapes of metacharacters alike).
        (pattern,) = filters
        assert pattern.startswith("(?i)")
        assert re.fullmatch(pattern, contains) is not None
        upper = "".join(ch.upper() if len(ch.upper()) == 1 else ch for ch in contains)
        assert re.fullmatch(pattern, upper) is not None
        assert re.fullmatch(pattern, contains + "x") is None
    assert all(pattern.startswith("(?i)") for pattern in levels)


@DEFAULT
@given(logql_cases)
def test_logql_has_one_selector_and_one_exact_line_filter(
    case: tuple[str, str | None, str | None, str],
) -> None:
    check_logql(*case)


def test_the_independent_logql_decoder_reads_go_escapes() -> None:
    """The oracle itself: Go escapes decode as strconv.Unquote would."""
    assert go_unquote('"a\\"b\\\\c\\x41\\u00e9\\101"', 0) == ('a"b\\cAéA', 23)
