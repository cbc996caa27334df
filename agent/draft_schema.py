"""The Draft schema of ONE run, for a server that enforces it on the round where no tool may be called.

The generic DiagnosisDraft schema lets a model write a conclusion with nothing found, or cite IDs it
invented; a grammar-constrained server then happily produces Drafts the strict parser rejects. This
schema is built from what the run actually has:
- `conclusion` may be a string only if some call returned FOUND, and then the analysis consists of
  FINDINGs (each citing FOUND calls only), so a concluded Draft always has FOUND-backed findings;
- FINDING evidence is an enum of this run's FOUND call IDs; NEGATIVE_OBSERVATION evidence an enum of
  this run's call IDs, or "NO_EVIDENCE" with a scope;
- a null conclusion says at least one thing that is missing;
- item counts and string lengths are derived from `max_draft_bytes`, and from the round's token
  limit: a Draft the schema admits must also fit in `max_tokens` (at a conservative 2 UTF-8 bytes
  per token), or the server would cut it and the run would fail as MAX_TOKENS.
Every Draft it admits is one the strict parser accepts (it is narrower than the contract, never
wider); the parser still checks everything, since not every server enforces a schema.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

# A CJK character is 3 UTF-8 bytes; the bounds assume every character may be one.
_BYTES_PER_CHAR = 3
_FIXED_OVERHEAD_BYTES = 200  # keys, brackets and separators of the five top-level fields
_ITEM_OVERHEAD_BYTES = 80  # {"kind":"NEGATIVE_OBSERVATION","statement":"","scope":"","evidence":[]}
_MAX_CITED_PER_ITEM = 4
# Fewer bytes per token than any tokenizer we measured spends on Chinese text in JSON (about 1.9
# for SmolLM2, 3 for Gemma and GPT-4o): a token limit of N carries a Draft of at least 2N bytes.
_MIN_BYTES_PER_TOKEN = 2


@dataclass(frozen=True)
class DraftBounds:
    """How many items and characters a Draft may use so that it fits `max_draft_bytes`."""

    max_analysis: int
    max_list_items: int
    max_text_chars: int
    max_cited: int


def draft_bounds(max_draft_bytes: int, call_ids: Sequence[str] = ()) -> DraftBounds:
    max_analysis = min(8, max(3, max_draft_bytes // 1536))
    max_list_items = min(5, max(2, max_draft_bytes // 4096))
    max_cited = max(1, min(_MAX_CITED_PER_ITEM, len(call_ids)))
    id_bytes = max((len(i.encode("utf-8")) for i in call_ids), default=0) + 3
    overhead = _FIXED_OVERHEAD_BYTES + max_analysis * (_ITEM_OVERHEAD_BYTES + max_cited * id_bytes)
    strings = 1 + 2 * max_analysis + 4 * max_list_items
    text_chars = (max_draft_bytes - overhead) // (_BYTES_PER_CHAR * strings)
    return DraftBounds(max_analysis, max_list_items, min(500, max(8, text_chars)), max_cited)


def run_draft_schema(
    found_ids: Sequence[str], call_ids: Sequence[str], max_draft_bytes: int
) -> dict[str, Any]:
    """The JSON schema of an acceptable Draft for a run with these canonical invocations.

    `call_ids` are every canonical invocation of the run (any status); `found_ids` those that
    returned FOUND.
    """
    all_ids = _unique(call_ids)
    found = [i for i in _unique(found_ids) if i in all_ids]
    bounds = draft_bounds(max_draft_bytes, all_ids)
    text = {"type": "string", "minLength": 1, "maxLength": bounds.max_text_chars}

    def strings(min_items: int = 0) -> dict[str, Any]:
        return {"type": "array", "items": text, "minItems": min_items, "maxItems": bounds.max_list_items}

    def cited(ids: list[str]) -> dict[str, Any]:
        return {
            "type": "array",
            "items": {"type": "string", "enum": ids},
            "minItems": 1,
            "maxItems": min(bounds.max_cited, len(ids)),
        }

    negative_items: list[dict[str, Any]] = [
        _item("NEGATIVE_OBSERVATION", text, {"const": "NO_EVIDENCE"}, scoped=True),
    ]
    if all_ids:
        negative_items.insert(0, _item("NEGATIVE_OBSERVATION", text, cited(all_ids), scoped=True))

    def draft(conclusion: dict[str, Any], items: list[dict[str, Any]], min_items: int) -> dict[str, Any]:
        analysis = {
            "type": "array",
            "items": items[0] if len(items) == 1 else {"anyOf": items},
            "minItems": min_items,
            "maxItems": bounds.max_analysis,
        }
        return {
            "type": "object",
            "properties": {
                "conclusion": conclusion,
                "analysis": analysis,
                "action_plan": strings(),
                "recommendations": strings(),
                "limitations": {
                    "type": "object",
                    "properties": {
                        "checked_scope": strings(),
                        "missing_info": strings(1 if conclusion.get("type") == "null" else 0),
                    },
                    "required": ["checked_scope", "missing_info"],
                    "additionalProperties": False,
                },
            },
            "required": ["conclusion", "analysis", "action_plan", "recommendations", "limitations"],
            "additionalProperties": False,
        }

    no_conclusion = draft({"type": "null"}, negative_items, 0)
    if not found:
        return no_conclusion
    finding = _item("FINDING", text, cited(found), scoped=False)
    with_conclusion = draft(text, [finding], 1)
    no_conclusion = draft({"type": "null"}, [finding, *negative_items], 0)
    return {"anyOf": [with_conclusion, no_conclusion]}


def draft_response_format(schema: dict[str, Any]) -> dict[str, Any]:
    """The OpenAI `response_format` carrying a run's Draft schema.

    `strict` stays false: OpenAI's strict mode rejects a root `anyOf` and length keywords, while
    servers that constrain generation with a grammar (llama.cpp, vLLM) enforce the schema either way.
    """
    return {
        "type": "json_schema",
        "json_schema": {"name": "DiagnosisDraft", "strict": False, "schema": schema},
    }


def final_round_kwargs(
    found_ids: Sequence[str], call_ids: Sequence[str], max_draft_bytes: int, max_tokens: int | None = None
) -> dict[str, Any]:
    """The per-call generation kwargs of the round where no tool may be called.

    The schema travels in `extra_body`, not as `response_format`: Haystack sends any
    `response_format` through the OpenAI client's parse endpoint, which refuses non-strict tools and
    raises instead of returning a reply cut at the token limit. `tool_choice: "none"` keeps the tool
    list (so a server's cached prompt prefix stays valid) while saying no tool may be called.
    """
    limit = max_draft_bytes if max_tokens is None else min(max_draft_bytes, max_tokens * _MIN_BYTES_PER_TOKEN)
    schema = run_draft_schema(found_ids, call_ids, limit)
    return {"tool_choice": "none", "extra_body": {"response_format": draft_response_format(schema)}}


def _item(kind: str, text: dict[str, Any], evidence: dict[str, Any], *, scoped: bool) -> dict[str, Any]:
    properties: dict[str, Any] = {"kind": {"const": kind}, "statement": text}
    if scoped:
        properties["scope"] = text
    properties["evidence"] = evidence
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


def _unique(ids: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(ids))
