"""The query_logs observation, the same for every source (docs/contracts.md, "query_logs projection").

Every source hands matched `LogRecord`s to `NewestRecords` (which keeps the `limit` newest and counts
them all) and builds the observation with `LogProjection.observation`. The model therefore reads one
shape whichever backend answered:

- `entries`, newest first: `ts` (RFC 3339 UTC), `service`, `level` (a `Severity` name, or null when
  the record has none), `message` (its first lines, bounded), `labels`; `level_inferred: true` when
  the level was derived rather than written, `cut: true` when lines or characters were left out;
- `returned`, `matched` (how many records matched in all), `truncated` (more matched than returned);
- `window`, the window actually searched (after clamping);
- with a level filter, `without_level`: the records in the window that carry no severity and so
  cannot be judged by it, so a filter never silently hides them;
- when nothing matched and the service occurs nowhere in the window, `services_in_window`: the
  services that do (bounded), so a misspelt service is not read as "no errors".

Ties: among records at one instant the source's stable order decides (`NewestRecords` keys).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from itertools import islice

from tools.adapter import AdapterResult, ToolError
from tools.logs.record import LogRecord
from tools.logs.severity import Severity
from tools.redaction import NOOP, REDACTED, Redactor
from tools.vocabulary import ErrorCode, EvidenceStatus

MAX_LABELS = 8
MAX_LABEL_CHARS = 100
MAX_SERVICES_SHOWN = 20
MAX_SERVICE_CHARS = 100
# How much text past a cut is redacted with what is shown: a credential's rule needs its context.
REDACTION_CONTEXT_CHARS = 1000
_NS_PER_S = 1_000_000_000
_NS_PER_US = 1000
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Window:
    """The instants searched, both ends included, in nanoseconds since the epoch.

    `through_ns` is the last instant the end covers. The file source lets an end on a whole second
    cover that second (`end=02:10:52Z` takes the records stamped 02:10:52, however many share that
    second); a source that does not keeps it equal to `end_ns`."""

    start_ns: int
    end_ns: int
    through_ns: int = -1

    def __post_init__(self) -> None:
        if self.through_ns < self.end_ns:
            object.__setattr__(self, "through_ns", self.end_ns)

    @classmethod
    def asked(cls, start: str, end: str, max_window_ns: int) -> Window:
        """The window of a call's RFC 3339 `start` and `end`, read to the microsecond (as equivalent
        calls are told apart, tools.canonical): clamped to `max_window_ns` keeping its end, since the
        latest minutes matter most in an incident; an end on a whole second covers that second, as
        the file source's does. An inverted window is INVALID_INPUT."""
        start_ns, end_ns = _rfc3339_ns(start), _rfc3339_ns(end)
        if end_ns < start_ns:
            raise ToolError(ErrorCode.INVALID_INPUT, "WINDOW_INVERTED")
        through_ns = end_ns + _NS_PER_S - _NS_PER_US if end_ns % _NS_PER_S == 0 else end_ns
        return cls(max(start_ns, end_ns - max_window_ns), end_ns, through_ns)

    def holds(self, instant_ns: int) -> bool:
        return self.start_ns <= instant_ns <= self.through_ns

    def as_data(self) -> dict[str, str]:
        return {"start": format_ns(self.start_ns), "end": format_ns(self.end_ns)}


class NewestRecords:
    """The `limit` newest matches so far, and how many matched in all.

    A key orders records newest last: (instant, then the source's stable order, e.g. file number and
    byte offset, so among equal instants the later-written record is the newer). Records are built
    only when they make the cut, so a source may pass a cheap factory.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._heap: list[tuple[tuple[int, ...], LogRecord]] = []
        self.matched = 0

    def offer(self, key: tuple[int, ...], record: LogRecord) -> None:
        self.matched += 1
        if len(self._heap) < self.limit:
            heapq.heappush(self._heap, (key, record))
        elif key > self._heap[0][0]:
            heapq.heapreplace(self._heap, (key, record))

    def would_keep(self, key: tuple[int, ...]) -> bool:
        """Whether a record with this key would make the cut: lets a source skip building one."""
        return len(self._heap) < self.limit or key > self._heap[0][0]

    def count_only(self) -> None:
        """A match that cannot make the cut (see `would_keep`): counted, never built."""
        self.matched += 1

    def absorb(self, other: NewestRecords) -> None:
        """Add another collector's matches (one file's, kept apart until it was read through)."""
        matched = self.matched + other.matched
        for key, record in other._heap:
            self.offer(key, record)
        self.matched = matched

    def newest_first(self) -> list[LogRecord]:
        return [record for _, record in sorted(self._heap, key=lambda item: item[0], reverse=True)]


@dataclass(frozen=True)
class LogProjection:
    """How much of a record an entry shows: enough to read a stack trace's head, bounded per entry.

    Whatever is cut is redacted first (`redactor`): cut first, a credential across the cut would lose
    the context its rule needs and show its first half. A label whose key names a secret shows
    `[REDACTED]`, judged on the whole key. What fits is left to the tool boundary, which redacts the
    whole observation after the source."""

    message_chars: int = 500
    message_lines: int = 12
    redactor: Redactor = NOOP

    def observation(
        self,
        records: Sequence[LogRecord],
        *,
        matched: int,
        window: Window,
        level: Severity | None,
        without_level: int | None = None,
        services_in_window: Iterable[str] | None = None,
        more_may_match: bool = False,
    ) -> AdapterResult:
        """The observation data. `records` are the returned ones, newest first; `more_may_match` is
        for a backend that cannot count (a full page may hide older matches)."""
        data: dict[str, object] = {
            "entries": [self.entry(record) for record in records],
            "returned": len(records),
            "matched": max(matched, len(records)),
            "truncated": matched > len(records) or more_may_match,
            "window": window.as_data(),
        }
        if level is not None and without_level is not None:
            data["without_level"] = without_level
        if not records and services_in_window is not None:
            data["services_in_window"] = [
                service[:MAX_SERVICE_CHARS] for service in islice(services_in_window, MAX_SERVICES_SHOWN)
            ]
        return AdapterResult(EvidenceStatus.FOUND if records else EvidenceStatus.EMPTY, data)

    def entry(self, record: LogRecord) -> dict[str, object]:
        message, cut = self._shown(record.message)
        entry: dict[str, object] = {
            "ts": format_ns(record.instant_ns),
            "service": self._cut(record.service, MAX_SERVICE_CHARS),
            "level": None if record.severity is None else record.severity.name,
            "message": message,
            "labels": dict(self._label(key, value) for key, value in islice(record.labels, MAX_LABELS)),
        }
        if record.severity_inferred and record.severity is not None:
            entry["level_inferred"] = True
        if cut:
            entry["cut"] = True
        return entry

    def _label(self, key: str, value: str) -> tuple[str, str]:
        shown = REDACTED if self.redactor.is_sensitive_key(key) else self._cut(value, MAX_LABEL_CHARS)
        return self._cut(key, MAX_LABEL_CHARS), shown

    def _cut(self, text: str, limit: int) -> str:
        """At most `limit` characters, redacted before the cut when there is one."""
        if len(text) <= limit:
            return text
        return self.redactor.text(text[: limit + REDACTION_CONTEXT_CHARS])[:limit]

    def _shown(self, message: str) -> tuple[str, bool]:
        """The first `message_lines` lines within `message_chars`, and whether anything was left out."""
        shown = self._cut(message, self.message_chars)
        lines_end = -1
        for _ in range(self.message_lines):
            lines_end = shown.find("\n", lines_end + 1)
            if lines_end < 0:
                break
        if lines_end >= 0:
            shown = shown[:lines_end]
        return shown, len(shown) < len(message)


def _rfc3339_ns(text: str) -> int:
    """An aware RFC 3339 instant (the input model checked the form) in nanoseconds, to the microsecond."""
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return (moment - _EPOCH) // timedelta(microseconds=1) * _NS_PER_US


def format_ns(ns: int) -> str:
    """RFC 3339 UTC with `Z`, with 0, 3, 6 or 9 fraction digits: as few as the instant needs."""
    seconds, fraction = divmod(ns, _NS_PER_S)
    base = datetime.fromtimestamp(seconds, UTC).replace(tzinfo=None).isoformat()
    if fraction == 0:
        return base + "Z"
    if fraction % 1_000_000 == 0:
        return f"{base}.{fraction // 1_000_000:03d}Z"
    if fraction % 1000 == 0:
        return f"{base}.{fraction // 1000:06d}Z"
    return f"{base}.{fraction:09d}Z"
