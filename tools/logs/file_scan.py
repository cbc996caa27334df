"""One log file searched for one query_logs call, with memory flat in the file's size.

How a first call over a large file stays near `grep` speed:

1. **Bisection by time.** Logs are written in time order, so on a plain file the scan starts at the
   first record within `SLACK_NS` before the window (found by bisecting byte offsets and reading one
   record at each probe) and stops at the first record `SLACK_NS` past its end. Order is checked, not
   assumed: 16 evenly spaced probes and every bisection probe must rise (within the slack), and a
   record seen more than the slack out of order sends the file to a full scan from its start.
   Records out of place by less than the slack are still found.
2. **Byte search before parsing.** With `contains`, each chunk is lowered at C speed
   (`bytes.lower`) and searched for the word; a piece of the chunk (`PIECE_BYTES`) without it is
   never decoded or parsed. Only records around hits cost Python work. The search is exact: the
   word cannot span lines, a multi-line record is assembled across pieces, and a piece that may
   spell the word another way (a JSON `\\u` escape, the two characters whose lower case is ASCII)
   is parsed in full.
3. Files compressed with gzip are streamed from their start (they cannot be bisected).

Records: a head line (`LineFormat.head`) and, in a multi-line format, the continuation lines below
it. A record longer than `MAX_RECORD_CHARS` is cut into pieces that keep its head's instant, service
and severity, so its tail stays searchable and memory stays bounded. Instants are read to the
microsecond. Ties: records matching the query at one instant get that instant plus their order among
them in microseconds (file order), so narrowing the window reaches each of them however many share
a stamp, and an end on a whole second still covers every record stamped with that second.

Bytes that no format reads are counted by reason (`SkipReason`) and skipped: never fatal, never
taking a neighbour record with them.
"""

from __future__ import annotations

import gzip
import threading
import zlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import BinaryIO

from tools.logs.json_lines import TooCostly
from tools.logs.line_format import Head, LineFormat
from tools.logs.projection import NewestRecords, Window
from tools.logs.record import LogRecord
from tools.logs.severity import Severity
from tools.logs.timestamps import NS_PER_S, Clock

SLACK_NS = 120 * NS_PER_S
US = 1000  # nanoseconds
PIECE_BYTES = 16 * 1024
PROBE_BYTES = 64 * 1024
MAX_PROBE_BYTES = 1024 * 1024
ORDER_PROBES = 16
MAX_RECORD_CHARS = 256 * 1024
MAX_CENSUS_SERVICES = 21
MAX_OPEN_LINES = 2000  # a JSON object spread over more lines than this is not one
# Non-ASCII characters whose lower case contains ASCII (str.lower): U+0130 and U+212A. A piece holding
# one may match an ASCII word without holding its bytes, so it is parsed in full.
_FOLD_HAZARDS = tuple(
    chr(code).encode()
    for code in range(0x80, 0x110000)
    if not 0xD800 <= code < 0xE000 and any(ch.isascii() for ch in chr(code).lower())
)
_JSON_ESCAPED = frozenset('"\\/')
_INDENTS = (b" ", b"\t")


class SkipReason(StrEnum):
    UNREADABLE = "UNREADABLE"  # no format reads the line (a torn write, a foreign line, binary)
    NO_RECORD_START = "NO_RECORD_START"  # continuation lines before the file's first record
    TOO_LONG = "TOO_LONG"  # a line past the line cap, never held whole
    TOO_COSTLY = "TOO_COSTLY"  # a JSON line whose structure would cost too much to decode
    DAMAGED_ARCHIVE = "DAMAGED_ARCHIVE"  # a compressed file that stops making sense: read up to there


class Stopped(Exception):
    """The call that started the scan was cancelled or timed out: its answer is no longer wanted."""


class _Unordered(Exception):
    """A record far out of time order: the bisected range may have missed records."""


@dataclass(frozen=True)
class LogQuery:
    """What one call looks for. `service` None is a census: which services the window holds."""

    service: str | None
    window: Window
    level: Severity | None
    contains: str | None  # lower case

    def needle(self, escapes_text: bool) -> bytes | None:
        """The bytes a piece must hold to hold a match, or None when no byte search is exact."""
        word = self.contains
        if word is None:
            return None
        if escapes_text and (_JSON_ESCAPED & set(word)):
            return None
        if not all(ch.isascii() or (ch.lower() == ch and ch.upper() == ch) for ch in word):
            return None  # a cased non-ASCII letter: the text may hold it in either case
        return word.encode("utf-8", "surrogatepass")


@dataclass
class CallState:
    """What every file of one call adds to: matches, counts, and the flag that stops the scan."""

    query: LogQuery
    newest: NewestRecords
    stop: threading.Event
    without_level: int = 0
    services: set[str] = field(default_factory=set)
    skipped: Counter[SkipReason] = field(default_factory=Counter)
    service_seen: bool = False  # a record of the service was read in the window, matching or not

    def check(self) -> None:
        if self.stop.is_set():
            raise Stopped


@dataclass
class _FileFindings:
    """One file's contribution, added to the call only once the file was read through."""

    newest: NewestRecords
    without_level: int = 0
    services: set[str] = field(default_factory=set)
    skipped: Counter[SkipReason] = field(default_factory=Counter)
    service_seen: bool = False

    def add_to(self, state: CallState) -> None:
        state.newest.absorb(self.newest)
        state.without_level += self.without_level
        state.service_seen = state.service_seen or self.service_seen
        state.skipped.update(self.skipped)
        for service in sorted(self.services):
            if len(state.services) >= MAX_CENSUS_SERVICES:
                break
            state.services.add(service)


@dataclass
class _Open:
    """The lines of a JSON object not closed yet (`LineFormat.spans_lines`)."""

    offset: int
    lines: list[str]
    chars: int


@dataclass
class _Pending:
    offset: int
    head: Head
    line: str
    continuation: list[str] = field(default_factory=list)
    chars: int = 0
    holds_word: bool = False  # found by the byte search: `contains` need not be checked again


@dataclass
class FileSummary:
    """A file read whole: a later call skips it when its window misses these instants (and still
    reports the lines it could not read)."""

    earliest_ns: int
    latest_ns: int
    skipped: Counter[SkipReason]


class FileScan:
    """Reads one file for one call and offers its matches to the call's state."""

    def __init__(
        self,
        state: CallState,
        fmt: LineFormat,
        clock: Clock,
        file_service: str,
        number: int,
        *,
        chunk_bytes: int,
        max_line_bytes: int,
        fallback: LineFormat | None = None,
        shown_lines: int = 12,
    ) -> None:
        self._state = state
        self._query = state.query
        self._format = fmt
        self._clock = clock
        self._file_service = file_service
        self._number = number
        self._chunk_bytes = max(chunk_bytes, 1)
        self._max_line_bytes = max_line_bytes
        # Continuation lines an entry can show: all a record found by the byte search keeps.
        self._shown_lines = shown_lines
        # Lines a file's format cannot read but another can (a text line among JSON ones).
        self._fallback = fallback
        # A word may straddle the split of a CRI line into pieces: such files are parsed in full.
        self._needle = None if fmt.partial_lines else state.query.needle(fmt.escapes_text)
        self._ordered = False
        self._clear()

    def _clear(self) -> None:
        self._found = _FileFindings(NewestRecords(self._state.newest.limit))
        self._pending: _Pending | None = None
        self._open: _Open | None = None
        self._rank_instant = -1
        self._rank = 0
        self._latest_seen = -(2**63)
        self._earliest_seen = 2**63
        self._lines_unread = False  # some lines went unparsed: the span read is not the file's
        self._at_file_start = True

    # ------------------------------------------------------------------ entry points
    def scan_plain(self, handle: BinaryIO, size: int) -> FileSummary | None:
        """A seekable file: bisect to the window when the file is in time order, else read it all."""
        start = self._bisect(handle, size)
        if start is not None:
            self._ordered = True
            try:
                self._read(handle, start, size)
            except _Unordered:  # forget the attempt: nothing of it reached the call yet
                self._clear()
            else:
                self._found.add_to(self._state)
                return None
        self._ordered = False
        self._read(handle, 0, size)
        self._found.add_to(self._state)
        return self._summary()

    def scan_stream(self, handle: BinaryIO) -> FileSummary | None:
        """A stream that cannot seek (gzip): read from its start to its end."""
        self._read(handle, 0, None)
        self._found.add_to(self._state)
        return self._summary()

    # ------------------------------------------------------------------ reading
    def _read(self, handle: BinaryIO, start: int, end: int | None) -> None:
        self._at_file_start = start == 0
        for offset, chunk in self._chunks(handle, start, end):
            self._state.check()
            if self._chunk(offset, chunk):
                break
        self._abandon_open()
        self._finish_pending()

    def _chunks(self, handle: BinaryIO, start: int, end: int | None) -> Iterator[tuple[int, bytes]]:
        """(offset, bytes) of whole lines from `start`; a line past the cap is dropped in pieces."""
        handle.seek(start)
        position = start
        carry = bytearray()
        skipping = False
        while True:
            self._state.check()  # also while a huge line (a gzip bomb's) is being skipped
            want = self._chunk_bytes if end is None else min(self._chunk_bytes, end - position - len(carry))
            try:
                data = handle.read(want) if want > 0 else b""
            except (EOFError, zlib.error, gzip.BadGzipFile):
                self._found.skipped[SkipReason.DAMAGED_ARCHIVE] += 1
                data = b""
            if not data:
                if carry and not skipping:
                    yield position, bytes(carry)
                elif skipping:
                    self._found.skipped[SkipReason.TOO_LONG] += 1
                return
            if skipping:
                newline = data.find(b"\n")
                if newline < 0:
                    position += len(data)
                    continue
                skipping = False
                self._found.skipped[SkipReason.TOO_LONG] += 1
                position += newline + 1
                data = data[newline + 1 :]
            carry += data
            cut = carry.rfind(b"\n") + 1
            if cut:
                yield position, bytes(carry[:cut])
                position += cut
                del carry[:cut]
            if len(carry) > self._max_line_bytes:
                position += len(carry)
                carry.clear()
                skipping = True

    def _chunk(self, offset: int, chunk: bytes) -> bool:
        """Read one chunk of whole lines; True when the rest of the file cannot match (ordered)."""
        needle = self._needle
        if needle is None:
            return self._lines(offset, chunk, 0, len(chunk))
        lowered = chunk.lower()
        hazard = not chunk.isascii() and any(sequence in chunk for sequence in _FOLD_HAZARDS)
        escapes = self._format.escapes_text
        start = 0
        while start < len(chunk):
            end = chunk.find(b"\n", min(start + PIECE_BYTES, len(chunk)) - 1) + 1 or len(chunk)
            if hazard or self._open is not None or (escapes and lowered.find(b"\\u", start, end) >= 0):
                if self._lines(offset, chunk, start, end):
                    return True
            elif lowered.find(needle, start, end) >= 0:
                if self._hits(offset, chunk, lowered, needle, start, end):
                    return True
            else:
                self._skip_piece(offset, chunk, start, end)
            start = end
        return False

    def _hits(self, offset: int, chunk: bytes, lowered: bytes, needle: bytes, start: int, end: int) -> bool:
        """A piece holding the word: only the records around its hits are read. A record starts at a
        head line (found by walking back from the hit) and runs to the next head line."""
        if self._open is not None or (self._pending is not None and not self._format.multiline):
            return self._lines(offset, chunk, start, end)  # a JSON object or CRI line still open
        position = self._continue_pending(chunk, start, end)
        while position < end:
            hit = lowered.find(needle, position, end)
            if hit < 0:
                break
            first = self._record_start(chunk, position, chunk.rfind(b"\n", position, hit) + 1 or position)
            if first is None:  # no record start between here and the hit: read the rest plainly
                return self._lines(offset, chunk, position, end)
            if first > position:  # the records before the hit's go unread
                self._lines_unread = True
            last = chunk.find(b"\n", hit, end) + 1 or end
            if self._format.multiline:
                last = self._multiline_tail(chunk, last, end)
                if last == end:  # the record may run on into the next piece: it stays pending
                    return self._lines(offset, chunk, first, end)
                if self._hit_record(offset, chunk, first, last):
                    return True
            elif self._lines(offset, chunk, first, last):
                return True
            if self._open is not None:  # a JSON object still open past the hit: read on plainly
                return self._lines(offset, chunk, last, end)
            self._finish_pending()
            position = last
        self._skip_piece(offset, chunk, position, end)
        return False

    def _hit_record(self, offset: int, chunk: bytes, first: int, last: int) -> bool:
        """A multi-line record known to hold the word, from its head line to `last`: its lines are
        split at C speed and only those an entry can show are decoded."""
        head_end = chunk.find(b"\n", first, last) + 1 or last
        if self._line(offset + first, chunk[first:head_end]):
            return True
        pending = self._pending
        if pending is None or pending.offset != offset + first:
            return self._lines(offset, chunk, head_end, last)  # the head line was no record's head
        pending.holds_word = True
        body = chunk[head_end:last]
        shown = 0
        for raw in body.split(b"\n"):
            if shown >= self._shown_lines:
                break
            if raw.strip():
                pending.continuation.append(_text(raw).rstrip("\r\n"))
                shown += 1
        pending.chars += len(body)
        return False

    def _continue_pending(self, chunk: bytes, start: int, end: int) -> int:
        """Feed the pending record its continuation lines at the piece's start; where they end."""
        if self._pending is None:
            return start
        position = start
        while position < end:
            stop = chunk.find(b"\n", position, end) + 1 or end
            raw = chunk[position:stop]
            if self._head_of(raw) is not None:
                self._finish_pending()
                return position
            self._continue(_text(raw))
            position = stop
        return end

    def _record_start(self, chunk: bytes, floor: int, line: int) -> int | None:
        """The head line at or before `line` (not before `floor`), or the line opening a JSON object
        written over several lines; the line itself in a single-line format."""
        if not self._format.multiline and not self._format.spans_lines:
            while self._format.partial_lines and line > floor:  # a CRI line's earlier pieces
                previous = chunk.rfind(b"\n", floor, line - 1) + 1 or floor
                head = self._head_of(chunk[previous:line])
                if head is None or not head.joins_next:
                    break
                line = previous
            return line
        while True:
            stop = chunk.find(b"\n", line) + 1 or len(chunk)
            raw = chunk[line:stop]
            if (self._format.spans_lines and raw.lstrip().startswith(b"{")) or self._head_of(raw) is not None:
                return line
            if line <= floor:
                return None
            line = chunk.rfind(b"\n", floor, line - 1) + 1 or floor

    def _multiline_tail(self, chunk: bytes, position: int, end: int) -> int:
        """Where the record going on at `position` ends: the next head line, or the piece's end."""
        while position < end:
            stop = chunk.find(b"\n", position, end) + 1 or end
            if self._head_of(chunk[position:stop]) is not None:
                return position
            position = stop
        return end

    def _lines(self, offset: int, chunk: bytes, start: int, end: int) -> bool:
        position = start
        while position < end:
            newline = chunk.find(b"\n", position, end)
            stop = end if newline < 0 else newline + 1
            if self._line(offset + position, chunk[position:stop]):
                return True
            position = stop
        return False

    def _skip_piece(self, offset: int, chunk: bytes, start: int, end: int) -> None:
        """A piece without the word: no record wholly inside it can match. Only the record running
        into it (its continuation lines) and the one running out of it (from its last head, or the
        line opening a JSON object not closed yet) are kept, found from the piece's ends."""
        self._lines_unread = True
        multiline, spans = self._format.multiline, self._format.spans_lines
        if not multiline and not spans:
            return
        position = self._continue_pending(chunk, start, end) if multiline else start
        line_end = end
        while line_end > position:
            line_start = chunk.rfind(b"\n", position, line_end - 1) + 1 or position
            raw = chunk[line_start:line_end]
            if spans and raw.lstrip().startswith(b"{"):
                # A line ending in `}` is most likely whole: only a line that may not be is parsed.
                if not raw.rstrip().endswith(b"}") or self._head_of(raw) is None:
                    self._lines(offset, chunk, line_start, end)  # an object still open: read it
                return
            if multiline and (head := self._head_of(raw)) is not None:
                self._pending = _Pending(offset + line_start, head, _text(raw))
                tail = chunk[line_end:end].split(b"\n")
                for continued in tail:
                    self._continue(_text(continued))
                return
            if spans and end - line_start > MAX_RECORD_CHARS:
                return  # no object opens within reach of the piece's end
            line_end = line_start

    def _line(self, offset: int, raw: bytes) -> bool:
        if len(raw) - raw.endswith(b"\n") > self._max_line_bytes:
            self._found.skipped[SkipReason.TOO_LONG] += 1
            return False
        line = _text(raw)
        if not line.strip():
            return False
        if self._open is not None and self._extend_open(line):
            return False
        try:
            head = (
                None
                if raw[:1] in _INDENTS and not self._format.indented_heads
                else self._format.head(line, self._clock)
            )
        except TooCostly:
            self._found.skipped[SkipReason.TOO_COSTLY] += 1
            return False
        if head is None and self._format.spans_lines and line.lstrip().startswith("{"):
            self._open = _Open(offset, [line], len(line))
            return False
        if head is None and self._fallback is not None:
            head = self._fallback.head(line, self._clock)
        if head is None:
            if self._pending is not None and self._format.multiline:
                self._continue(line)
            elif self._pending is None and self._format.multiline and not self._at_file_start:
                pass  # the tail of a record that began before a bisected range
            else:
                reason = SkipReason.NO_RECORD_START if self._format.multiline else SkipReason.UNREADABLE
                self._found.skipped[reason] += 1
            return False
        self._at_file_start = False
        pending = self._pending
        if pending is not None and pending.head.joins_next:
            pending.line += line
            pending.head = _joined(pending.head, head)
            return False
        self._finish_pending()
        if self._ordered and head.instant_ns > self._query.window.through_ns + SLACK_NS:
            return True
        self._pending = _Pending(offset, head, line)
        return False

    def _extend_open(self, line: str) -> bool:
        """Add a line to the open JSON object; False when the line is no part of it (it starts a
        record of its own: the open object never closed and is counted as unreadable)."""
        opened = self._open
        assert opened is not None  # noqa: S101 - invariant for the type checker
        fallback = self._fallback
        if self._head(line) is not None or (fallback is not None and fallback.head(line, self._clock)):
            self._abandon_open()  # a record of its own: never swallowed by a broken one
            return False
        opened.lines.append(line)
        opened.chars += len(line)
        if opened.chars > MAX_RECORD_CHARS or len(opened.lines) > MAX_OPEN_LINES:
            self._abandon_open()
            return True
        if line.rstrip().endswith("}"):
            text = "".join(opened.lines)
            head = self._head(text)
            if head is not None:
                self._open = None
                self._finish_pending()
                self._pending = _Pending(opened.offset, head, text)
        return True

    def _abandon_open(self) -> None:
        opened, self._open = self._open, None
        if opened is not None:
            self._found.skipped[SkipReason.UNREADABLE] += len(opened.lines)

    def _head_of(self, raw: bytes) -> Head | None:
        if raw[:1] in _INDENTS and not self._format.indented_heads:
            return None  # a stack frame, `    ... 37 more`: never a record's first line
        return self._head(_text(raw))

    def _head(self, line: str) -> Head | None:
        try:
            return self._format.head(line, self._clock)
        except TooCostly:
            return None

    def _continue(self, line: str) -> None:
        pending = self._pending
        if pending is None:
            return
        line = line.rstrip("\r\n")
        if not line.strip():
            return  # blank lines belong to no record
        if pending.chars + len(line) > MAX_RECORD_CHARS and pending.continuation:
            head = pending.head
            self._finish_pending()
            self._pending = pending = _Pending(pending.offset + 1, head, "")
        pending.continuation.append(line)
        pending.chars += len(line) + 1

    # ------------------------------------------------------------------ one record
    def _finish_pending(self) -> None:
        pending, self._pending = self._pending, None
        if pending is None:
            return
        head = pending.head
        instant = head.instant_ns // US * US  # the microsecond: the precision calls are told apart by
        if instant > self._latest_seen:
            self._latest_seen = instant
        elif self._ordered and instant < self._latest_seen - SLACK_NS:
            raise _Unordered
        self._earliest_seen = min(self._earliest_seen, instant)
        query = self._query
        window = query.window
        if instant > window.through_ns or instant < window.start_ns - NS_PER_S:
            return
        service = head.service or self._file_service
        if query.service is None:
            if window.holds(instant) and len(self._found.services) < MAX_CENSUS_SERVICES:
                self._found.services.add(service)
            return
        if service != query.service:
            return
        if window.holds(instant):
            self._found.service_seen = True
        if query.contains is not None and not pending.holds_word and not _holds(pending, query.contains):
            return
        if query.level is not None:
            if head.severity is None:
                if window.holds(instant):
                    self._found.without_level += 1
                return
            if head.severity < query.level:
                return
        self._offer(pending, instant, service)

    def _offer(self, pending: _Pending, instant: int, service: str) -> None:
        """A record the query matches, ranked among those of its microsecond, to the newest kept."""
        head = pending.head
        if instant == self._rank_instant:
            self._rank += 1
        else:
            self._rank_instant, self._rank = instant, 0
        instant += self._rank * US
        if not self._query.window.holds(instant):
            return
        newest = self._found.newest
        key = (instant, self._number, pending.offset)
        if not newest.would_keep(key):
            newest.count_only()
            return
        message = head.message
        if pending.continuation:
            lines = [message, *pending.continuation] if message else pending.continuation
            message = "\n".join(lines)
        newest.offer(
            key,
            LogRecord(
                instant_ns=instant,
                service=service,
                severity=head.severity,
                message=message,
                labels=head.labels,
                severity_inferred=head.severity_inferred,
            ),
        )

    def _summary(self) -> FileSummary | None:
        if self._lines_unread or self._earliest_seen > self._latest_seen:
            return None
        return FileSummary(self._earliest_seen, self._latest_seen, self._found.skipped)

    # ------------------------------------------------------------------ bisection
    def _bisect(self, handle: BinaryIO, size: int) -> int | None:
        """The offset of a record at least `SLACK_NS` before the window, or None to read it all."""
        if size <= 4 * max(self._chunk_bytes, PROBE_BYTES):
            return None
        target = self._query.window.start_ns - SLACK_NS
        probes: dict[int, int] = {}
        for step in range(ORDER_PROBES + 1):
            found = self._probe(handle, size * step // (ORDER_PROBES + 1))
            if found is not None:
                probes[found[0]] = found[1]
        if not probes or not _rising(probes):
            return None
        low, high = 0, size
        while high - low > PROBE_BYTES:
            middle = (low + high) // 2
            found = self._probe(handle, middle)
            if found is None or found[1] >= target:
                high = middle
            else:
                probes[found[0]] = found[1]
                low = found[0]
        return low if _rising(probes) else None

    def _probe(self, handle: BinaryIO, offset: int) -> tuple[int, int] | None:
        """(offset, instant) of the first record starting at or after `offset`, read within a bound:
        `PROBE_BYTES` first (a record is rarely longer), up to `MAX_PROBE_BYTES` when needed."""
        size = PROBE_BYTES
        while True:
            handle.seek(offset)
            data = handle.read(size)
            found, complete = self._first_head(data, offset)
            if found is not None or complete or size >= MAX_PROBE_BYTES or len(data) < size:
                return found
            size *= 4

    def _first_head(self, data: bytes, offset: int) -> tuple[tuple[int, int] | None, bool]:
        """The first head in `data` read at `offset`, and whether `data` was enough to tell."""
        position = 0
        if offset > 0:
            newline = data.find(b"\n")
            if newline < 0:
                return None, False
            position = newline + 1
        while position < len(data):
            newline = data.find(b"\n", position)
            if newline < 0:
                return None, False  # a line cut by the read's bound
            head = self._head_of(data[position:newline])
            if head is not None:
                return (offset + position, head.instant_ns), True
            position = newline + 1
        return None, False


def _rising(probes: dict[int, int]) -> bool:
    latest = -(2**63)
    for _, instant in sorted(probes.items()):
        if instant < latest - SLACK_NS:
            return False
        latest = max(latest, instant)
    return True


def _holds(pending: _Pending, word: str) -> bool:
    if word in pending.line.lower() or word in pending.head.message.lower():
        return True
    return any(word in line.lower() for line in pending.continuation)


def _joined(first: Head, second: Head) -> Head:
    return Head(
        instant_ns=first.instant_ns,
        severity=first.severity or second.severity,
        message=first.message + second.message,
        service=first.service,
        labels=first.labels,
        joins_next=second.joins_next,
    )


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")
