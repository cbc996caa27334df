"""The tool schemas as the model receives them: the contract, without pydantic's decoration.

Pydantic adds a `title` to every property and turns class docstrings (written for engineers, in
English) into `description`s. A model gains nothing from either, and every round resends the tool
list: on a small local model they were about a third of the first round's prompt. Only the keywords
that constrain a value stay.
"""

from __future__ import annotations

from typing import Any

_DROPPED = frozenset({"title", "description"})


def wire_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` without titles, descriptions and `"default": null` (absent already means null)."""
    return _strip(schema)


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
    return out
