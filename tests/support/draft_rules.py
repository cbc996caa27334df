"""The Draft's rules as a schema: the run's Draft schema without its size keywords.

The parser checks only `max_draft_bytes` besides the rules, so the schema a run sends (bounded per
item and string, so whatever it admits fits the bytes) admits a subset of what the parser accepts;
without `maxLength` and `maxItems` it states the rules alone, and a Draft within the bytes is accepted
exactly when it meets them.
"""

from __future__ import annotations

from typing import Any

_SIZE_KEYWORDS = frozenset({"maxLength", "maxItems"})


def without_size_bounds(schema: Any) -> Any:
    """`schema` with every `maxLength` and `maxItems` removed (the run's schema built without a
    token limit carries no bound inside its patterns)."""
    if isinstance(schema, dict):
        return {key: without_size_bounds(value) for key, value in schema.items() if key not in _SIZE_KEYWORDS}
    if isinstance(schema, list):
        return [without_size_bounds(value) for value in schema]
    return schema
