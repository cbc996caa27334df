"""Audit rows as JSON for machines: decoded JSON columns, and a streaming JSONL export.

The export walks keyset pages and writes line by line, so memory stays at one page whatever the
audit's size, and runs written while it exports neither repeat nor hide older rows.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any, Literal, Protocol

from audit.browse import AuditBrowser, InvocationFilter, RunTimeline
from audit.rows import InvocationRow, RunRow

# Columns stored as JSON text, and the key their decoded value gets in JSON output.
_JSON_COLUMNS = {
    "input_json": "input",
    "projection_json": "projection",
    "detail_json": "detail",
    "result_json": "result",
    "failure_json": "failure",
    "tool_call_ids": "tool_call_ids",
}
EXPORT_PAGE_SIZE = 500


class TextSink(Protocol):
    """Where an export goes: a file, stdout, or a filter in front of the terminal."""

    def write(self, text: str, /) -> object: ...


def row_for_json(row: Mapping[str, Any]) -> dict[str, Any]:
    """A row with its JSON-text columns decoded (`input_json` -> `input`), so output is not JSON in JSON."""
    out: dict[str, Any] = {}
    for key, value in row.items():
        name = _JSON_COLUMNS.get(key)
        if name is None:
            out[key] = value
            continue
        try:
            out[name] = json.loads(value) if isinstance(value, str) else value
        except ValueError:  # not JSON after all: keep the text rather than fail the export
            out[name] = value
    return out


def timeline_for_json(timeline: RunTimeline) -> dict[str, Any]:
    return {
        "run": row_for_json(timeline.run),
        "entries": [
            {"kind": entry.kind, "at": entry.at, "data": row_for_json(entry.data)}
            for entry in timeline.entries
        ],
    }


def iter_invocations(
    browser: AuditBrowser, flt: InvocationFilter | None = None, page_size: int = EXPORT_PAGE_SIZE
) -> Iterator[InvocationRow]:
    cursor: str | None = None
    while True:
        page = browser.invocations(flt or InvocationFilter(), limit=page_size, cursor=cursor)
        yield from page.rows
        if page.next_cursor is None:
            return
        cursor = page.next_cursor


def iter_runs(browser: AuditBrowser, page_size: int = EXPORT_PAGE_SIZE) -> Iterator[RunRow]:
    cursor: str | None = None
    while True:
        page = browser.runs(limit=page_size, cursor=cursor)
        yield from page.rows
        if page.next_cursor is None:
            return
        cursor = page.next_cursor


def export_jsonl(
    browser: AuditBrowser,
    out: TextSink,
    per: Literal["invocation", "run"] = "invocation",
    page_size: int = EXPORT_PAGE_SIZE,
) -> int:
    """Writes one JSON object per line, newest first; returns the number of lines.

    per="invocation": one invocation row per line. per="run": one run per line as
    `{"run": {...}, "entries": [{"kind", "at", "data"}]}`, the same shape as `diagnose audit show --json`.
    """
    count = 0
    if per == "invocation":
        for row in iter_invocations(browser, page_size=page_size):
            out.write(json.dumps(row_for_json(row), ensure_ascii=False) + "\n")
            count += 1
        return count
    for run in iter_runs(browser, page_size=page_size):
        timeline = browser.timeline(run["run_id"])
        if timeline is None:  # pruned between the page and this read
            continue
        out.write(json.dumps(timeline_for_json(timeline), ensure_ascii=False) + "\n")
        count += 1
    return count
