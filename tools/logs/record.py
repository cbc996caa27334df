"""The log record every source produces: the one vocabulary between sources and the projection.

A source (files, Loki, journald, Elasticsearch, ...) reads its backend its own way, but hands the
projection (`tools.logs.projection`) records of this one shape, so the model sees the same answer
whichever source is configured. Filtering (window, service, level, `contains` over the whole
record) is the source's work, done where it is cheapest; a record handed over has matched.
`message` is what an entry shows: the record's text, or a structured record's message field, with
its continuation lines (a stack trace) after a newline each.
"""

from __future__ import annotations

from dataclasses import dataclass

from tools.logs.severity import Severity


@dataclass(frozen=True, slots=True)
class LogRecord:
    instant_ns: int  # nanoseconds since the Unix epoch, UTC
    service: str
    # None when the record carries no severity; a level filter then counts it instead of hiding it.
    severity: Severity | None
    message: str
    labels: tuple[tuple[str, str], ...] = ()
    # True when the severity was derived (an HTTP status, a backend's detection), not written.
    severity_inferred: bool = False
