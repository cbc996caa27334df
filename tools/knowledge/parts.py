"""A runbook cut into parts that each fit one observation, so the model can read all of it.

A lookup shows the model a short snippet; the procedure is in the text. `lookup_knowledge` with
`{"source", "part"}` returns part N of M of the runbook's text (docs/contracts.md, "Tool envelope"),
and each part's projection, as JSON, fits `[budget] max_observation_bytes` with room to spare for
redaction (which may lengthen a short secret to `[REDACTED]`). Parts are cut where a reader would
turn a page: before a heading, else at a blank line, else at a line end, else at a space; only a
single line longer than a part is cut mid-line. The parts, joined, are the file's text exactly as redaction
leaves it: the adapter redacts the whole text before cutting it, so no credential is split across two.
"""

from __future__ import annotations

import json
import re

# Bytes of a part's projection left for redaction to lengthen what it replaces.
REDACTION_ROOM_FRACTION = 16
# A break is looked for in the last half of the room a part has; earlier would waste the budget.
_BREAKS = (re.compile(r"\n(?=#{1,6}[ \t])"), re.compile(r"\n[ \t]*\n"), re.compile(r"\n"), re.compile(r"\s"))
MIN_TEXT_BYTES = 64


def read_projection(source: str, part: int, parts: int, text: str) -> dict[str, object]:
    """What the model sees of one part: keys in this order, the whole contract of a read."""
    return {"source": source, "part": part, "parts": parts, "text": text}


def json_bytes(value: object) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))


def text_room(source: str, max_bytes: int, text_chars: int) -> int:
    """JSON bytes a part's text may take in a projection of `max_bytes` for `source`."""
    digits = len(str(max(1, text_chars)))  # no more parts than characters: the longest part numbers
    frame = json_bytes(read_projection(source, 10**digits - 1, 10**digits - 1, ""))
    return max_bytes - max_bytes // REDACTION_ROOM_FRACTION - frame


def split_parts(text: str, room: int) -> list[str]:
    """`text` as consecutive parts whose JSON string (quotes excluded) is at most `room` bytes."""
    if room < MIN_TEXT_BYTES:
        raise ValueError("no room for a part's text")
    parts: list[str] = []
    start = 0
    while start < len(text):
        end = _longest_fitting_end(text, start, room)
        if end < len(text):
            end = _break_before(text, start + (end - start) // 2, end)
        parts.append(text[start:end])
        start = end
    return parts or [""]


def _longest_fitting_end(text: str, start: int, room: int) -> int:
    """The largest `end` with `text[start:end]` fitting `room` JSON bytes (at least one character)."""
    if _escaped_bytes(text[start : start + room]) <= room:
        return min(len(text), start + room)  # a character is at least one byte: nothing longer fits
    low, high = start + 1, start + room  # low always fits (one character is at most 12 bytes)
    while low < high:
        middle = (low + high + 1) // 2
        if _escaped_bytes(text[start:middle]) <= room:
            low = middle
        else:
            high = middle - 1
    return low


def _break_before(text: str, earliest: int, end: int) -> int:
    """The last good place to cut in `text[earliest:end]`, or `end` when there is none."""
    window = text[earliest:end]
    for pattern in _BREAKS:
        cuts = [match.end() for match in pattern.finditer(window)]
        if cuts:
            return earliest + cuts[-1]
    return end


def _escaped_bytes(text: str) -> int:
    return json_bytes(text) - 2
