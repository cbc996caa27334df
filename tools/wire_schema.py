"""The tool schemas as the model receives them: the contract, without what costs tokens and adds nothing.

Every round resends the tool list, and on a small local model it was half of the first round's
prompt. Pydantic adds a `title` to every property and turns class docstrings (written for engineers)
into `description`s; `anyOf [X, {"type": "null"}]` says what `"type": [X, "null"]` (or a `null` in
the enum) says in half the tokens, and an enum needs no `"type": "string"`. String length bounds are
enforced by the business-input validation anyway (a too-long value is INVALID_INPUT), so the model
need not reread them every round. What constrains a value's shape (types, enums, formats, integer
ranges, required keys, no extra keys) stays, so a grammar-constrained server still generates only
well-formed calls.
"""

from __future__ import annotations

from typing import Any, cast

_DROPPED = frozenset({"title", "description", "minLength", "maxLength"})


def wire_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` in its compact model-facing form (the validators keep every original bound)."""
    return cast("dict[str, Any]", _strip(schema))  # a dict strips to a dict


def _strip(node: Any) -> Any:
    if isinstance(node, list):
        return [_strip(item) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "properties" and isinstance(value, dict):
            out[key] = {name: _strip(prop) for name, prop in value.items()}  # property names stay
        elif key in _DROPPED or (key == "default" and value is None):
            continue
        else:
            out[key] = _strip(value)
    if out.get("type") == "string" and "enum" in out:
        del out["type"]  # the enum already says it
    return _nullable_as_type_list(out)


def _nullable_as_type_list(node: dict[str, Any]) -> dict[str, Any]:
    """`{"anyOf": [{"type": T, ...}, {"type": "null"}]}` -> `{"type": [T, "null"], ...}`."""
    options = node.get("anyOf")
    if not isinstance(options, list) or len(options) != 2 or {"type": "null"} not in options:
        return node
    (other,) = [o for o in options if o != {"type": "null"}]
    merged = {k: v for k, v in node.items() if k != "anyOf"}
    if set(other) == {"enum"}:
        return {**merged, "enum": [*other["enum"], None]}
    if not isinstance(other.get("type"), str):
        return node
    return {**merged, **other, "type": [other["type"], "null"]}
