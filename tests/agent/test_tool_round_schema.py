"""A round's narrowed tool schemas: never wider than the frozen definitions, and as narrow as the round.

The property tests generate instances from the narrowed schema itself (`instances`, which knows
every keyword a narrowed schema uses and refuses any other), so "anything it admits" means anything,
not a few hand-picked calls.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from agent.draft.rules import MAX_BYTES_PER_CHAR, MIN_BYTES_PER_TOKEN
from agent.harness import _evaluation_problem
from agent.haystack_tools import frozen_tools
from agent.model.tool_round_schema import (
    MIN_STRING_CHARS,
    fair_shares,
    round_tool_schema,
)
from agent.progress import CheckRecord
from tools.definitions import MAX_KNOWLEDGE_SOURCE_CHARS, MAX_SQL_BYTES, TOOL_NAMES
from tools.input_models import BUSINESS_INPUTS, envelope_schema
from tools.vocabulary import EvidenceStatus

FORMATS = jsonschema.Draft202012Validator.FORMAT_CHECKER
# What the Agent registers (and a model sees with shaping off): the frozen wire schemas.
WIRE = {tool.name: tool.parameters for tool in frozen_tools()}
# IDs a server may choose: OpenAI's, llama.cpp's, the harness's own, and any usable one.
PENDING_IDS = st.one_of(
    st.none(),
    st.sampled_from(["call_Zx81pQ2", "aR3ZSCTRHdyVAK2gNAWlpmRlMpZrg6A8", "call-r1-1"]),
    st.text(min_size=1, max_size=128).filter(lambda s: not s.endswith(" ")),
)


def _admitted_by_frozen(tool: str, instance: dict[str, Any]) -> None:
    jsonschema.validate(instance, envelope_schema(tool), format_checker=FORMATS)
    jsonschema.validate(instance, WIRE[tool], format_checker=FORMATS)


def _business_refusal(tool: str, business: dict[str, Any]) -> set[str]:
    """The fields the business validator refuses (empty: accepted)."""
    try:
        BUSINESS_INPUTS[tool].model_validate(business)
    except ValidationError as exc:
        return {str(error["loc"][0]) for error in exc.errors(include_input=False)}
    return set()


@pytest.mark.parametrize("tool", TOOL_NAMES)
@pytest.mark.parametrize("strict", [False, True])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), pending=PENDING_IDS, max_tokens=st.integers(16, 8192))
def test_anything_a_round_schema_admits_the_frozen_definition_and_the_harness_accept(
    tool: str, strict: bool, data: st.DataObject, pending: str | None, max_tokens: int
) -> None:
    schema = round_tool_schema(tool, pending, max_tokens, strict=strict)
    instance = data.draw(instances(schema), label="call")
    _admitted_by_frozen(tool, instance)
    # The envelope evaluates exactly what the round has pending, or nothing.
    previous = instance["previous_observation"]
    if pending is None:
        assert previous is None
    else:
        assert _evaluation_problem(previous, CheckRecord(pending, tool, EvidenceStatus.FOUND)) is None
    # No string is ever the reason a call is refused: only the calendar of a timestamp (a date the
    # RFC 3339 shape allows, like year 0001 or 30 February) stays the business validator's to judge.
    assert _business_refusal(tool, instance["input"]) <= {"start", "end"}


@pytest.mark.parametrize("tool", TOOL_NAMES)
def test_without_a_pending_observation_no_evaluation_is_admitted(tool: str) -> None:
    schema = round_tool_schema(tool, None, 4096, strict=False)
    assert schema["properties"]["previous_observation"] == {"type": "null"}
    assert "previous_observation" in schema["required"]
    invented = {"tool_call_id": "call-1", "evaluation": "GAINED"}
    assert not jsonschema.Draft202012Validator(schema).is_valid(_call(tool, previous=invented))
    assert jsonschema.Draft202012Validator(schema).is_valid(_call(tool, previous=None))


@pytest.mark.parametrize("tool", TOOL_NAMES)
def test_a_pending_observation_must_be_evaluated_and_only_it(tool: str) -> None:
    schema = round_tool_schema(tool, "call_found", 4096, strict=False)
    valid = jsonschema.Draft202012Validator(schema).is_valid
    for evaluation in ("GAINED", "NO_GAIN"):
        assert valid(_call(tool, previous={"tool_call_id": "call_found", "evaluation": evaluation}))
    assert not valid(_call(tool, previous=None))
    assert not valid(_call(tool, previous={"tool_call_id": "call_other", "evaluation": "GAINED"}))
    assert not valid(_call(tool, previous={"tool_call_id": "call_found", "evaluation": "MAYBE"}))
    extra = {"tool_call_id": "call_found", "evaluation": "GAINED", "note": "x"}
    assert not valid(_call(tool, previous=extra))


def test_strings_are_bounded_by_the_business_limits_when_max_tokens_allows() -> None:
    limits = {
        ("lookup_knowledge", "query"): 500,
        ("lookup_knowledge", "source"): MAX_KNOWLEDGE_SOURCE_CHARS,
        ("query_logs", "service"): 100,
        ("query_logs", "contains"): 200,
        ("query_mysql", "sql"): MAX_SQL_BYTES // 4,
        ("query_mysql", "database"): 64,
    }
    for (tool, field), limit in limits.items():
        business = round_tool_schema(tool, None, 131_072, strict=False)["properties"]["input"]
        shape = next(s for s in business.get("anyOf", [business]) if field in s["properties"])
        assert _max_chars(shape["properties"][field]) == limit, (tool, field)


@pytest.mark.parametrize("strict", [False, True])
def test_a_round_offers_both_shapes_of_lookup_knowledge_and_no_mixture(strict: bool) -> None:
    """A grammar-constrained model can write a search or a read, never a call that is half of each."""
    valid = jsonschema.Draft202012Validator(
        round_tool_schema("lookup_knowledge", None, 4096, strict=strict)
    ).is_valid
    search = {"query": "etcd 没有 leader", "top_k": 3}
    read = {"source": "etcd/etcdNoLeader.md", "part": 2}
    assert valid({"previous_observation": None, "input": search})
    assert valid({"previous_observation": None, "input": read})
    assert not valid({"previous_observation": None, "input": {**search, **read}})
    assert not valid({"previous_observation": None, "input": {"query": "x", "part": 1}})


@pytest.mark.parametrize("tool", TOOL_NAMES)
@settings(max_examples=60, deadline=None)
@given(max_tokens=st.integers(320, 131_072), pending=PENDING_IDS)
def test_the_longest_call_a_round_admits_fits_max_tokens(
    tool: str, max_tokens: int, pending: str | None
) -> None:
    schema = round_tool_schema(tool, pending, max_tokens, strict=True)
    call = json.dumps({"name": tool, "arguments": _longest(schema)}, ensure_ascii=False, indent=4)
    framed = f"<tool_call>\n{call}\n</tool_call>"
    assert len(framed.encode("utf-8")) <= max_tokens * MIN_BYTES_PER_TOKEN


def test_fair_shares_give_a_short_string_its_limit_and_the_rest_to_the_others() -> None:
    assert fair_shares({"sql": 1000, "database": 64}, 172) == {"database": 64, "sql": 108}
    assert fair_shares({"service": 100, "contains": 200}, 106) == {"service": 53, "contains": 53}
    assert fair_shares({"query": 500}, 10_000) == {"query": 500}
    assert fair_shares({"query": 500, "database": 4}, 0) == {"query": MIN_STRING_CHARS, "database": 4}


@pytest.mark.parametrize("tool", TOOL_NAMES)
def test_the_strict_form_is_in_openais_documented_strict_subset(tool: str) -> None:
    allowed = {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "enum",
        "anyOf",
        "pattern",
        "format",
        "maxLength",
        "minimum",
        "maximum",
    }
    for pending in (None, "call_1"):
        for node in _objects_and_keys(round_tool_schema(tool, pending, 4096, strict=True), allowed):
            assert set(node["required"]) == set(node["properties"])
            assert node["additionalProperties"] is False


# ----------------------------------------------------------------------------------------------- helpers
ZONES = st.sampled_from([UTC, timezone(timedelta(hours=8)), timezone(timedelta(hours=-5, minutes=-30))])


def instances(node: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Every instance `node` admits, for the keywords a narrowed schema uses (any other fails the test)."""
    if "anyOf" in node:
        return st.one_of([instances(option) for option in node["anyOf"]])
    if "enum" in node:
        return st.sampled_from(node["enum"])
    kind = node["type"]
    if kind == "object":
        assert node["additionalProperties"] is False
        props = {name: instances(prop) for name, prop in node["properties"].items()}
        required = {k: v for k, v in props.items() if k in node["required"]}
        return st.fixed_dictionaries(required, optional={k: v for k, v in props.items() if k not in required})
    if kind == "null":
        return st.none()
    if kind == "integer":
        return st.integers(node["minimum"], node["maximum"])
    if kind == "string" and node.get("format") == "date-time":
        moments = st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=ZONES)
        return moments.map(lambda moment: moment.isoformat())
    if kind == "string" and set(node) == {"type", "pattern"}:
        return st.from_regex(node["pattern"], fullmatch=True)
    raise AssertionError(f"a keyword the narrowed schemas do not use: {node}")


def _call(tool: str, previous: Any) -> dict[str, Any]:
    inputs = {
        "lookup_knowledge": {"query": "payment-service 超时"},
        "query_logs": {
            "service": "payment-service",
            "start": "2026-11-30T02:00:00Z",
            "end": "2026-11-30T03:00:00Z",
        },
        "query_mysql": {"sql": "SELECT 1"},
    }
    return {"previous_observation": previous, "input": inputs[tool]}


def _max_chars(node: dict[str, Any]) -> int:
    string = next(o for o in node.get("anyOf", [node]) if o.get("type") == "string")
    return int(string["pattern"].rsplit(",", 1)[1].split("}")[0])


def _longest(node: dict[str, Any]) -> Any:
    """The instance of `node` with the most UTF-8 bytes: every property, every string at its length
    limit in 3-byte characters, the longest enum value and integer."""
    if "anyOf" in node:
        return max((_longest(o) for o in node["anyOf"]), key=lambda v: len(json.dumps(v, ensure_ascii=False)))
    if "enum" in node:
        return max(node["enum"], key=lambda v: len(json.dumps(v, ensure_ascii=False).encode("utf-8")))
    kind = node["type"]
    if kind == "object":
        return {name: _longest(prop) for name, prop in node["properties"].items()}
    if kind == "null":
        return None
    if kind == "integer":
        return -(10 ** (len(str(node["maximum"])) - 1)) if node["minimum"] < 0 else node["maximum"]
    if "format" in node:
        return "2026-11-30T02:00:00." + "1" * 14 + "+08:00"  # as long as the definition allows (40)
    return "连" * _max_chars(node)


def _objects_and_keys(node: Any, allowed: set[str]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    if isinstance(node, dict):
        assert set(node) <= allowed, set(node) - allowed
        if node.get("type") == "object":
            found.append(node)
        for key in ("properties",):
            for child in node.get(key, {}).values():
                found += _objects_and_keys(child, allowed)
        for child in node.get("anyOf", []):
            found += _objects_and_keys(child, allowed)
    return found


assert MAX_BYTES_PER_CHAR == 3  # `_longest` writes 3-byte characters: the rate the fitting assumes
