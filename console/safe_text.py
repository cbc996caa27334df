"""Model and tool text is data: control characters are shown escaped, never sent to the terminal.

Rich escapes markup when we use Text objects, but it passes ESC sequences (clear screen, OSC 8
hyperlinks, colours) straight through; this is the one place that neutralises them.
"""

from __future__ import annotations

from typing import Any


def _is_control(ch: str) -> bool:
    return ord(ch) < 32 or 0x7F <= ord(ch) < 0xA0


def visible(text: str) -> str:
    """`\\x1b` instead of a raw ESC; newlines and tabs stay."""
    if not any(_is_control(ch) for ch in text if ch not in "\n\t"):
        return text
    return "".join(ch if ch in "\n\t" or not _is_control(ch) else f"\\x{ord(ch):02x}" for ch in text)


def visible_values(obj: Any) -> Any:
    """`visible` applied to every string of a JSON-like value (a Draft, a snapshot)."""
    if isinstance(obj, str):
        return visible(obj)
    if isinstance(obj, dict):
        return {key: visible_values(value) for key, value in obj.items()}
    if isinstance(obj, list):
        return [visible_values(item) for item in obj]
    return obj
