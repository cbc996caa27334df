"""The tool schemas of ONE model round: the frozen definitions, narrowed to what this round allows.

A server that constrains generation (llama.cpp's grammar, OpenAI's and vLLM's strict functions) writes
only what the request's tool schemas admit. The frozen schemas (`tools.wire_schema`) admit, on every
round, an evaluation of any ID and strings of any length and character: a small model then evaluates
a call that never happened, or writes `"service": "1000…"` until `max_tokens` cuts the reply. So each
round's request carries the frozen definitions narrowed by the progress ledger and the token limit:

- nothing pending: `previous_observation` is null;
- a FOUND observation pending: `previous_observation` is required, its `tool_call_id` is that one ID
  and its `evaluation` GAINED or NO_GAIN;
- every string is bounded by its business input's own limit (`sql`, bounded in UTF-8 bytes, by the
  characters that always fit them), holds no control character, quote or backslash (so a grammar
  writes it without escapes and the business validator never refuses it for its characters), and the
  strings of one call together fit `max_tokens`, so a call the server is told to write is one it can
  finish (at the conservative rates below, shared fairly between the call's strings);
- what the frozen definition already says stays: names, types, enums, integer ranges, RFC 3339
  `date-time`, no other keys.

Every instance a narrowed schema admits is one the frozen definition admits
(`tests/agent/test_tool_round_schema.py` generates them), so the Agent's tools stay the frozen three; only
the request's copy of their parameters is narrower. The `strict` form (OpenAI's strict functions)
lists every property as required, optional ones nullable, as that mode demands.
"""

from __future__ import annotations

import json
from typing import Any

from agent.budget import utf8_len
from agent.draft.rules import MAX_BYTES_PER_CHAR, PLAIN_CHAR, token_byte_limit
from agent.model.server_kind import TOOL_CALL_CLOSE, TOOL_CALL_OPEN
from tools.definitions import MAX_SQL_BYTES, ToolName
from tools.input_models import envelope_schema
from tools.vocabulary import Evaluation

# A call is fitted at the rates the run's Draft schema is (agent.draft.rules): a character may be 3
# UTF-8 bytes (Han), a token carries at least 2 bytes. Beside its strings a call is measured as a model
# writes it: a frame around it (the template's tags, or a fenced block the server's grammar allows as
# well), JSON indented by 4, and this much more whitespace per key (a grammar allows up to ~22 bytes
# per gap).
CALL_FRAME = TOOL_CALL_OPEN + "{call}\n" + TOOL_CALL_CLOSE
WHITESPACE_SLACK_PER_KEY = 6
# No string shorter than this, however small `max_tokens` is: below ~320 tokens a call may not fit.
MIN_STRING_CHARS = 8
# A character is at most 4 UTF-8 bytes: this many always fit `sql`'s byte limit.
_BYTE_BOUNDED_CHARS: dict[tuple[str, str], int] = {(ToolName.QUERY_MYSQL, "sql"): MAX_SQL_BYTES // 4}


def round_tool_schema(
    tool: str, pending_call_id: str | None, max_tokens: int, *, strict: bool
) -> dict[str, Any]:
    """The parameters schema of `tool` for a round whose pending FOUND observation is `pending_call_id`."""
    business = envelope_schema(tool)["properties"]["input"]
    previous: dict[str, Any] = (
        {"type": "null"}
        if pending_call_id is None
        else _closed(
            {
                "tool_call_id": {"type": "string", "enum": [pending_call_id]},
                "evaluation": {"type": "string", "enum": [e.value for e in Evaluation]},
            }
        )
    )
    # A business input of several shapes (lookup_knowledge: a search or a read) keeps them apart.
    shapes = [
        _narrowed_shape(tool, shape, previous, max_tokens, strict)
        for shape in business.get("anyOf", [business])
    ]
    return _closed(
        {"previous_observation": previous, "input": shapes[0] if len(shapes) == 1 else {"anyOf": shapes}},
        ["previous_observation", "input"],
    )


def _narrowed_shape(
    tool: str, business: dict[str, Any], previous: dict[str, Any], max_tokens: int, strict: bool
) -> dict[str, Any]:
    fields: dict[str, dict[str, Any]] = {}
    free_strings: dict[str, int] = {}
    for name, node in business["properties"].items():
        value, nullable = _value_and_nullable(node)
        fields[name] = _field(value, nullable)
        if value.get("type") == "string" and "format" not in value and "enum" not in value:
            free_strings[name] = _BYTE_BOUNDED_CHARS.get((tool, name), value.get("maxLength", 0))
    overhead = _skeleton_bytes(tool, previous, fields)
    budget_chars = max(0, token_byte_limit(max_tokens) - overhead) // MAX_BYTES_PER_CHAR
    for name, chars in fair_shares(free_strings, budget_chars).items():
        fields[name] = _bounded_string(chars, nullable="anyOf" in fields[name])
    return _closed(fields, list(fields) if strict else list(business.get("required", [])))


def fair_shares(limits: dict[str, int], total: int) -> dict[str, int]:
    """Split `total` characters between strings: each gets an equal share, capped at its own limit,
    and what a short one leaves goes to the others; never below `MIN_STRING_CHARS` (or its limit)."""
    shares: dict[str, int] = {}
    left, open_ = total, sorted(limits, key=lambda name: limits[name])
    while open_:
        share = left // len(open_)
        name = open_[0]
        if limits[name] <= share:
            shares[name] = limits[name]
            left -= limits[name]
            open_.pop(0)
            continue
        for name in open_:
            shares[name] = share
        break
    return {name: min(limits[name], max(MIN_STRING_CHARS, chars)) for name, chars in shares.items()}


def _value_and_nullable(node: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """A business property's one non-null shape, and whether null is allowed too."""
    options = node.get("anyOf", [node])
    (value,) = [option for option in options if option != {"type": "null"}]
    return value, len(options) > 1


def _field(value: dict[str, Any], nullable: bool) -> dict[str, Any]:
    """A business property as the frozen definition constrains it, without what costs tokens only."""
    if "enum" in value:
        return {
            "type": ["string", "null"] if nullable else "string",
            "enum": [*value["enum"], *[None] * nullable],
        }
    if value.get("type") == "string":
        kept = {
            "type": "string",
            **({"format": value["format"], "maxLength": value["maxLength"]} if "format" in value else {}),
        }
        return {"anyOf": [kept, {"type": "null"}]} if nullable else kept
    return {k: value[k] for k in ("type", "minimum", "maximum") if k in value}


def _bounded_string(chars: int, *, nullable: bool) -> dict[str, Any]:
    bounded = {"type": "string", "pattern": f"^{PLAIN_CHAR}{{1,{chars}}}$"}
    return {"anyOf": [bounded, {"type": "null"}]} if nullable else bounded


def _skeleton_bytes(tool: str, previous: dict[str, Any], fields: dict[str, dict[str, Any]]) -> int:
    """UTF-8 bytes of the longest call of `tool`, counting every free string as empty (or null)."""
    arguments = {
        "previous_observation": _longest_value(previous),
        "input": {k: _longest_value(f) for k, f in fields.items()},
    }
    call = json.dumps({"name": tool, "arguments": arguments}, ensure_ascii=False, indent=4)
    keys = 4 + len(fields) + (2 if previous.get("type") == "object" else 0)
    return utf8_len(CALL_FRAME.format(call=call)) + WHITESPACE_SLACK_PER_KEY * keys


def _longest_value(field: dict[str, Any]) -> Any:
    """The value of `field` with the most bytes, a free string counted without its characters."""
    if "enum" in field:
        return max(field["enum"], key=lambda value: utf8_len(json.dumps(value, ensure_ascii=False)))
    if "anyOf" in field:
        return max((_longest_value(o) for o in field["anyOf"]), key=lambda v: len(json.dumps(v)))
    kind = field.get("type")
    if kind == "object":
        return {name: _longest_value(prop) for name, prop in field["properties"].items()}
    if kind == "integer":
        return max(field["minimum"], field["maximum"], key=lambda n: len(str(n)))
    if kind == "string":
        return "0" * field.get("maxLength", 0) if "format" in field else ""
    return None


def _closed(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties) if required is None else required,
        "additionalProperties": False,
    }
