"""Which text of a run a trace may carry (docs/contracts.md, "Traces", content capture).

A trace leaves the process for a backend that other people read and keep, so by default it carries
no text of the run at all: no query, tool input, projection, Draft or failure detail, only the
project's own words, numbers, tool names, the model label and tool call IDs. With
`[telemetry.traces] capture_content = true` the text goes too, but as the screen would show it and
smaller: redacted (configured secrets and the built-in rules, again: an audited run replayed for a
backfill was redacted with the secrets of its own day), neutralised (no control, bidi or invisible
character reaches a viewer raw) and cut to `max_content_bytes` of UTF-8.
"""

from __future__ import annotations

import json
from typing import Any

from console.safe_text import neutralize
from tools.redaction import Redactor

ELLIPSIS = "…"


def cut_utf8(text: str, max_bytes: int) -> str:
    """`text` in at most `max_bytes` UTF-8 bytes, cut on a character and marked with `…`."""
    data = text.encode("utf-8")
    if len(data) <= max_bytes:
        return text
    room = max(max_bytes - len(ELLIPSIS.encode("utf-8")), 0)
    return data[:room].decode("utf-8", errors="ignore") + ELLIPSIS


class ContentCapture:
    """The capture rule of one trace export: `text` is None when content stays in the process."""

    def __init__(self, enabled: bool, redactor: Redactor, max_bytes: int) -> None:
        self.enabled = enabled
        self._redactor = redactor
        self._max_bytes = max_bytes

    def text(self, value: Any) -> str | None:
        """A value of the run (text, or a JSON-like value written as JSON) as a trace may carry it."""
        if not self.enabled or value is None:
            return None
        redact = self._redactor
        if isinstance(value, str):
            text = redact.text(value)
        else:
            # Key-aware first (a `password` member is hidden whatever its value), then as text.
            text = redact.text(json.dumps(redact.value(value), ensure_ascii=False, default=str))
        return cut_utf8(neutralize(text), self._max_bytes)
