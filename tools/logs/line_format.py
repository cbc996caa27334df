"""What a log file format is to the file source: a test of whether a line starts a record.

Each format family (`json_lines`, `logfmt`, `syslog`, `web_server`, `cri`, `text_lines`,
`custom_format`) implements `LineFormat.head`: given one line, the record it starts, or None. In a
multi-line format a line that starts no record continues the one above (a stack frame, `Caused by:`,
an indented line): the record is its head line and every continuation line, and `contains` and
`level` see all of it. In a single-line format (JSON lines, access logs) such a line is unreadable
and counted as skipped.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from tools.logs.severity import Severity
from tools.logs.timestamps import Clock


@dataclass(frozen=True, slots=True)
class Head:
    """The first line of a record, read."""

    instant_ns: int
    severity: Severity | None
    message: str
    service: str | None = None  # None: the file's service (its name, or a configured override)
    labels: tuple[tuple[str, str], ...] = ()
    severity_inferred: bool = False
    # The record's text continues on the next head line without a line break (a CRI partial line).
    joins_next: bool = False


class FormatTraits:
    """The traits a format may change, at their usual values: one record per line, read as written,
    a record's first line never indented. A format class states only where it differs."""

    multiline = False
    escapes_text = False
    spans_lines = False
    partial_lines = False
    indented_heads = False


class LineFormat(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def multiline(self) -> bool: ...

    @property
    def escapes_text(self) -> bool:
        """Whether the line may spell text through escapes (JSON's `\\u00e9`), so a byte search of
        the raw line can miss a record that holds the word."""
        ...

    @property
    def spans_lines(self) -> bool:
        """Whether one record may be written over several lines that each start no record (a JSON
        object pretty-printed by its writer, as Elasticsearch 7 prints its stack traces)."""
        ...

    @property
    def indented_heads(self) -> bool:
        """Whether a record's first line may start with a space or a tab (a configured regex may);
        when not, an indented line is a continuation without being parsed."""
        ...

    @property
    def partial_lines(self) -> bool:
        """Whether a head may be the first piece of a line split by its writer (`Head.joins_next`)."""
        ...

    def head(self, line: str, clock: Clock) -> Head | None: ...
