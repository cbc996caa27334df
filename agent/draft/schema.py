"""The Draft schema of ONE run, for a server that enforces it on the round where no tool may be called.

The generic DiagnosisDraft schema lets a model write a conclusion with nothing found, or cite IDs it
invented; a grammar-constrained server then happily produces Drafts the strict parser rejects. This
schema is built from the Draft rules (agent/draft/rules.py) and what the run actually has:
- `conclusion` may be a string only if some call may back a FINDING (FOUND, not evaluated NO_GAIN),
  and then the analysis `contains` a FINDING; NEGATIVE_OBSERVATIONs may stand beside it;
- FINDING evidence is an enum of those IDs; NEGATIVE_OBSERVATION evidence an enum of every executed
  call, or "NO_EVIDENCE" with a scope;
- a null conclusion `contains` a non-blank `missing_info` entry; statement, scope and conclusion match
  the non-blank pattern;
- item counts and string lengths are the run's `DraftBounds`, so whatever it admits fits the bytes.
Every Draft it admits is one the parser accepts; without its size keywords it admits exactly the
Drafts that meet the parser's rules (tests/agent/test_draft_rules.py proves both on generated Drafts;
the one pinned exception is text of characters whose JSON takes more than 3 bytes, see
agent/draft/rules.py). The parser itself checks only the configured bytes, so a Draft beyond these
bounds but within `max_draft_bytes` (from a server that does not enforce them) is still accepted. The
schema sent to a server is also fitted to the round's `max_tokens` (a Draft the server is told to
produce must be one it may finish), which only narrows it, and then every non-blank string carries
its length bound inside its `pattern` (a grammar built from a pattern ignores `maxLength`: llama.cpp's
does). A server whose grammar ignores `contains` or `pattern` may produce a Draft outside the schema:
the parser still checks everything.
"""

from __future__ import annotations

from typing import Any

from agent.draft.rules import (
    FINDING,
    NEGATIVE_OBSERVATION,
    NO_EVIDENCE,
    NON_BLANK_TEXT_PATTERN,
    RunEvidence,
    bounded_non_blank_pattern,
    run_bounds,
)


def run_draft_schema(
    evidence: RunEvidence, max_draft_bytes: int, max_tokens: int | None = None
) -> dict[str, Any]:
    """The JSON schema of an acceptable Draft for a run with these executed calls."""
    bounds = run_bounds(max_draft_bytes, evidence, max_tokens)

    def non_blank(max_chars: int) -> dict[str, Any]:
        # Sent to a server (a token limit given): the bound inside the pattern, which a grammar honours.
        pattern = NON_BLANK_TEXT_PATTERN if max_tokens is None else bounded_non_blank_pattern(max_chars)
        return {"type": "string", "maxLength": max_chars, "pattern": pattern}

    text = {"type": "string", "maxLength": bounds.max_note_chars}
    statement = non_blank(bounds.max_text_chars)
    scope = non_blank(bounds.max_note_chars)
    optional_scope = {**scope, "type": ["string", "null"]}
    non_blank_entry = non_blank(bounds.max_note_chars)

    def strings(**extra: Any) -> dict[str, Any]:
        return {"type": "array", "items": text, "maxItems": bounds.max_list_items, **extra}

    def cited(ids: list[str]) -> dict[str, Any]:
        return {
            "type": "array",
            "items": {"type": "string", "enum": ids},
            "minItems": 1,
            "maxItems": bounds.max_cited,
        }

    findable, citable = evidence.finding_citable(), evidence.negative_citable()
    items: list[dict[str, Any]] = []
    if findable:
        items.append(_item(FINDING, statement, optional_scope, cited(findable), scope_required=False))
    if citable:
        items.append(
            _item(NEGATIVE_OBSERVATION, statement, optional_scope, cited(citable), scope_required=False)
        )
    items.append(_item(NEGATIVE_OBSERVATION, statement, scope, {"const": NO_EVIDENCE}, scope_required=True))
    analysis_items = items[0] if len(items) == 1 else {"anyOf": items}

    def draft(
        conclusion: dict[str, Any], analysis: dict[str, Any], missing_info: dict[str, Any]
    ) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": {
                "conclusion": conclusion,
                "analysis": {
                    "type": "array",
                    "items": analysis_items,
                    "maxItems": bounds.max_analysis,
                    **analysis,
                },
                "action_plan": strings(),
                "recommendations": strings(),
                "limitations": {
                    "type": "object",
                    "properties": {"checked_scope": strings(), "missing_info": strings(**missing_info)},
                    "required": ["checked_scope", "missing_info"],
                    "additionalProperties": False,
                },
            },
            "required": ["conclusion", "analysis", "action_plan", "recommendations", "limitations"],
            "additionalProperties": False,
        }

    no_conclusion = draft({"type": "null"}, {}, {"minItems": 1, "contains": non_blank_entry})
    if not findable:
        return no_conclusion
    has_finding = {
        "contains": {"type": "object", "properties": {"kind": {"const": FINDING}}, "required": ["kind"]}
    }
    with_conclusion = draft(statement, {"minItems": 1, **has_finding}, {})
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
    evidence: RunEvidence, max_draft_bytes: int, max_tokens: int | None = None
) -> dict[str, Any]:
    """The per-call generation kwargs of the round where no tool may be called.

    The schema travels in `extra_body`, not as `response_format`: Haystack sends any
    `response_format` through the OpenAI client's parse endpoint, which refuses non-strict tools and
    raises instead of returning a reply cut at the token limit. `tool_choice: "none"` keeps the tool
    list (so a server's cached prompt prefix stays valid) while saying no tool may be called.
    """
    schema = run_draft_schema(evidence, max_draft_bytes, max_tokens)
    return {"tool_choice": "none", "extra_body": {"response_format": draft_response_format(schema)}}


def _item(
    kind: str,
    statement: dict[str, Any],
    scope: dict[str, Any],
    evidence: dict[str, Any],
    *,
    scope_required: bool,
) -> dict[str, Any]:
    required = ["kind", "statement", "evidence", *(["scope"] if scope_required else [])]
    return {
        "type": "object",
        "properties": {"kind": {"const": kind}, "statement": statement, "scope": scope, "evidence": evidence},
        "required": required,
        "additionalProperties": False,
    }
