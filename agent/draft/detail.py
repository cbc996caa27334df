"""Why a Draft was refused, in words that carry none of the model's text.

The spec discards an invalid Draft, so an operator or trainer cannot read it; `violation` alone
(e.g. SCHEMA_MISMATCH) does not say what to fix in the prompt or the model settings. A detail says
where and what: "starts with a Markdown code fence", "unknown key `confidence` in analysis[0]",
"analysis[1] is a FINDING citing call-7, which returned ERROR". It is built only from the parser's
own words, JSON positions, schema names, and key names or tool call IDs that pass a narrow
character set; anything else the model wrote is named by its place, never quoted.
It is bounded and holds no control text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tools.vocabulary import Evaluation, EvidenceStatus

if TYPE_CHECKING:
    from agent.draft.rules import RunEvidence

MAX_DETAIL_CHARS = 240
# A key name or tool call ID may be quoted only if it is short and plain: it came from the model.
_SAFE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,39}$")
_SAFE_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")
_FENCES = ("```", "~~~")
_EXPECTED_TYPE = {
    "string_type": "a string",
    "list_type": "a list",
    "dict_type": "an object",
    "model_type": "an object",
    "model_attributes_type": "an object",
}


def bounded(detail: str) -> str:
    """One line of plain text, at most MAX_DETAIL_CHARS characters."""
    clean = "".join(ch if ch.isprintable() else " " for ch in detail)
    clean = " ".join(clean.split())
    return clean if len(clean) <= MAX_DETAIL_CHARS else clean[: MAX_DETAIL_CHARS - 1] + "…"


def name(key: Any) -> str | None:
    """`key` quoted, if it is a plain identifier; else None (the caller says "a key")."""
    return f"`{key}`" if isinstance(key, str) and _SAFE_NAME.match(key) else None


def call_id(value: Any) -> str:
    return str(value) if isinstance(value, str) and _SAFE_ID.match(value) else "an ID that cannot be shown"


def not_an_object(text: str) -> str:
    """The text does not start with `{`: what it starts with instead."""
    start = text.lstrip()
    if start.startswith(_FENCES):
        return "starts with a Markdown code fence"
    if start.startswith("["):
        return "starts with `[`: a JSON array, not an object"
    if start.startswith('"'):
        return "starts with a JSON string, not an object"
    if "{" in start:
        return "prose before the JSON object"
    return "no JSON object: the text is prose"


def malformed(text: str, exc: json.JSONDecodeError) -> str:
    """Where the JSON breaks. `exc.msg` is one of the json module's fixed phrases, never the text."""
    if exc.msg == "Extra data":
        rest = text[exc.pos :].lstrip()
        if rest.startswith(_FENCES):
            return "a Markdown code fence after the JSON object"
        return f"text after the JSON object (line {exc.lineno}, column {exc.colno})"
    phrase = exc.msg.lower().removesuffix(" starting at").removesuffix(" at")
    if exc.pos >= len(text.rstrip()) or phrase == "unterminated string":
        return f"the JSON object is cut off before its end ({phrase})"
    return f"invalid JSON at line {exc.lineno}, column {exc.colno}: {phrase}"


def duplicate_key(key: str) -> str:
    quoted = name(key)
    return f"duplicate key {quoted}" if quoted else "a key appears twice in one object"


def _path(loc: Sequence[Any]) -> tuple[str, bool]:
    """`analysis[0].evidence` from a pydantic location; union member tags are dropped (the flag says
    whether there were any). A part that is neither an index nor a plain key ends the path."""
    text, tagged = "", False
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        elif isinstance(part, str) and _SAFE_NAME.match(part):
            text += f".{part}" if text else part
        else:
            tagged = True
            if not (isinstance(part, str) and ("[" in part or "'" in part)):
                break
    return text, tagged


def schema_mismatch(errors: Sequence[Any]) -> str:
    """The first schema error of pydantic's list, in the operator's words."""
    if not errors:
        return "the object does not match the Draft schema"
    error = errors[0]
    kind, loc = str(error.get("type", "")), tuple(error.get("loc", ()))
    path, tagged = _path(loc)
    where = f"`{path}`" if path else "the object"
    if kind in ("extra_forbidden", "missing"):
        parent, _ = _path(loc[:-1])
        key = name(loc[-1]) if loc else None
        scope = f" in {parent}" if parent else " at the top level"
        if kind == "missing":
            return f"missing key {key}{scope}" if key else f"a missing key{scope}"
        return f"unknown key {key}{scope}" if key else f"an unknown key{scope}"
    if kind == "value_error":
        message = str((error.get("ctx") or {}).get("error", ""))
        if message == "must not be blank":
            return f"{where} is blank"
        return f"{where}: {message}" if message else f"{where} is not valid"
    if kind == "string_too_short":
        return f"{where} is empty"
    if kind == "literal_error" and not tagged:
        expected = str((error.get("ctx") or {}).get("expected", ""))
        return f"{where} is not one of {expected}"
    if kind in _EXPECTED_TYPE and (not tagged or isinstance(loc[-1], int)):
        return f"{where} is not {_EXPECTED_TYPE[kind]}"
    if tagged and path.endswith("evidence"):
        return f'{where} is neither a list of tool call IDs nor "NO_EVIDENCE"'
    if tagged:
        return f"{where} matches none of its allowed forms"
    return f"{where} is not valid ({kind})" if _SAFE_NAME.match(kind) else f"{where} is not valid"


def finding_cites(index: int, cited: str, evidence: RunEvidence) -> str:
    """analysis[i] is a FINDING citing a call that found nothing, or one the model called useless."""
    if (
        evidence.evaluation_of(cited) == Evaluation.NO_GAIN
        and evidence.status_of(cited) == EvidenceStatus.FOUND
    ):
        return f"analysis[{index}] is a FINDING citing {call_id(cited)}, which the model evaluated NO_GAIN"
    return (
        f"analysis[{index}] is a FINDING citing {call_id(cited)}, which returned {evidence.status_of(cited)}"
    )


def unknown_citation(index: int, cited: str) -> str:
    return f"analysis[{index}] cites {call_id(cited)}, which is not a tool call of this run"
