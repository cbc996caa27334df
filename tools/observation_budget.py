"""A byte budget for one observation's projection.

Each adapter bounds its own projection (rows, lines, characters), but a small local model has a
context of a few thousand tokens, and a three-tool run must fit it. So the boundary also holds every
FOUND projection to `max_observation_bytes` of JSON: it keeps the longest prefix of the result list
that fits, marks the projection `truncated` and corrects its count (a runbook part read through
lookup_knowledge: the longest prefix of its text). The model sees what was cut; nothing is silently
rewritten. A projection that cannot fit even one item is RESULT_TOO_LARGE.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from tools.adapter import ToolError
from tools.definitions import ToolName
from tools.vocabulary import ErrorCode

# The result list of each tool's projection, and the field that counts its items.
_LISTS: dict[str, tuple[str, str]] = {
    ToolName.LOOKUP_KNOWLEDGE: ("documents", "returned"),
    ToolName.QUERY_LOGS: ("entries", "returned"),
    ToolName.QUERY_MYSQL: ("rows", "row_count"),
}


def projection_bytes(data: dict[str, Any]) -> int:
    return len(json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))


def fit_projection(tool: str, data: dict[str, Any], max_bytes: int) -> dict[str, Any]:
    """`data` itself when it fits; else a copy with the longest fitting prefix of its result list."""
    if projection_bytes(data) <= max_bytes:
        return data
    if tool == ToolName.LOOKUP_KNOWLEDGE and isinstance(data.get("text"), str):
        # A runbook part (tools.knowledge.parts) is cut to fit with room to spare: only redaction
        # lengthening it past that room lands here. The longest prefix of its text that fits, marked.
        text: str = data["text"]
        return _longest_fitting(lambda n: {**data, "text": text[:n], "truncated": True}, len(text), max_bytes)
    list_key, count_key = _LISTS.get(tool, ("", ""))
    items = data.get(list_key)
    if not isinstance(items, list) or not items:
        raise ToolError(ErrorCode.RESULT_TOO_LARGE)
    return _longest_fitting(
        lambda n: {**data, list_key: items[:n], count_key: n, "truncated": True}, len(items) - 1, max_bytes
    )


def _longest_fitting(cut: Callable[[int], dict[str, Any]], most: int, max_bytes: int) -> dict[str, Any]:
    """`cut(n)` for the largest n in [1, most] that fits; n = 0 never counts (RESULT_TOO_LARGE)."""
    low, high = 0, most
    while low < high:
        middle = (low + high + 1) // 2
        if projection_bytes(cut(middle)) <= max_bytes:
            low = middle
        else:
            high = middle - 1
    if low == 0:
        raise ToolError(ErrorCode.RESULT_TOO_LARGE)
    return cut(low)
