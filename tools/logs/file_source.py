"""query_logs over local NDJSON files: the demo log and any `[logs] source = "file"` configuration.

Log files written by real appenders contain truncated writes and foreign lines; those are counted and
skipped so one bad line never hides the rest. A log file may be gigabytes, so a query streams it and
keeps only the `limit` newest matches plus a sparse index of each file (`tools.logs.file_index`), never the
lines: memory does not grow with the file, and a repeated query reads only the blocks that may hold a
match. The scan runs in a worker thread, which cannot be killed, so it checks a stop flag between
blocks: when the tool times out or the run is cancelled, reading stops within one block.
"""

from __future__ import annotations

import asyncio
import importlib.resources
import json
import logging
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from functools import partial
from itertools import islice
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple

from tools.adapter import AdapterResult, ToolError, ToolRequest
from tools.input_models import QueryLogsInput
from tools.logs.file_index import (
    BLOCK_BYTES,
    MAX_LINE_BYTES,
    BlockBuilder,
    FileIdentity,
    FileIndex,
    instant_us,
    read_lines,
)
from tools.logs.projection import LogProjection, NewestRecords, Window
from tools.logs.record import LogRecord
from tools.logs.severity import Severity, severity_of_field
from tools.vocabulary import ErrorCode

logger = logging.getLogger(__name__)

LOG_SUFFIXES = (".ndjson", ".jsonl")
MAX_LABELS = 8
MAX_LABEL_CHARS = 100
_CORE_KEYS = frozenset({"ts", "service", "level", "message"})
_BOM = b"\xef\xbb\xbf"
_decode_json = json.JSONDecoder().decode  # json.loads' own decoder: the same defaults
# A cancelled call waits this long at most for its scan to notice the stop flag (one block, normally
# milliseconds); a scan stuck in the file system is then left to stop on its own.
STOP_GRACE_S = 2.0
_LOCK_POLL_S = 0.05


def bundled_logs_path() -> Path:
    """The demo incident log shipped with the package, used when no `[logs] path` is configured."""
    return Path(str(importlib.resources.files("tools") / "data" / "logs" / "demo.ndjson"))


class _Line(NamedTuple):
    record: dict[str, Any]
    at_us: int
    service: str
    severity: Severity | None
    message: str


class _Stopped(Exception):
    """The call that started the scan was cancelled or timed out: its answer is no longer wanted."""


class _Query(NamedTuple):
    service: str
    start_us: int
    end_us: int
    level: Severity | None
    contains: str | None
    # The UTF-8 bytes a line must hold to match, when it has no JSON escape (see `may_match`).
    service_needle: bytes
    contains_needle: bytes | None

    @classmethod
    def of(cls, params: QueryLogsInput, start: datetime, end: datetime) -> _Query:
        contains = params.contains
        return cls(
            service=params.service,
            start_us=instant_us(start),
            end_us=instant_us(end),
            level=None if params.level is None else Severity[params.level],
            contains=contains,
            service_needle=b'"' + _utf8(params.service) + b'"',
            contains_needle=None if contains is None else _utf8(contains),
        )

    def may_match(self, raw: bytes) -> bool:
        """False only for a line that cannot match, told from its bytes before any JSON parsing.

        A line that starts with `{` and a non-NUL byte is decoded as UTF-8, and without a backslash
        none of its strings has an escape, so each string's bytes are exactly its UTF-8 text: the
        service must then appear as `"<service>"` and `contains` as itself. Anything else is parsed.
        """
        if raw[:1] != b"{" or raw[1:2] == b"\x00" or b"\\" in raw:
            return True
        if self.service_needle not in raw:
            return False
        return self.contains_needle is None or self.contains_needle in raw

    def matches_but_level(self, line: _Line) -> bool:
        return (
            line.service == self.service
            and self.start_us <= line.at_us <= self.end_us
            and (self.contains is None or self.contains in line.message)
        )


class _Scan:
    """One call's scan: what it looks for, what it has found, and the flag that stops it."""

    def __init__(self, query: _Query, limit: int, stop: threading.Event) -> None:
        self.query = query
        self.newest = NewestRecords(limit)
        self.without_level = 0
        self.stop = stop

    def check(self) -> None:
        if self.stop.is_set():
            raise _Stopped

    def consider(self, line: _Line, key: tuple[int, int, int], record: Callable[[], LogRecord]) -> None:
        """Offer a line that matches; count one the level filter cannot judge."""
        query = self.query
        if not query.matches_but_level(line):
            return
        if query.level is not None:
            if line.severity is None:
                self.without_level += 1
                return
            if line.severity < query.level:
                return
        if self.newest.would_keep(key):
            self.newest.offer(key, record())
        else:
            self.newest.count_only()


class LogFileAdapter:
    """Answers query_logs from one NDJSON file or a folder of `*.ndjson` / `*.jsonl` files."""

    def __init__(
        self,
        path: Path,
        max_window_minutes: int = 360,
        max_lines: int = 200,
        message_chars: int = 500,
        *,
        message_lines: int = 12,
        block_bytes: int = BLOCK_BYTES,
        max_line_bytes: int = MAX_LINE_BYTES,
    ) -> None:
        self._path = path
        self._max_window = timedelta(minutes=max_window_minutes)
        self._max_lines = max_lines
        self._projection = LogProjection(message_chars, message_lines)
        self._block_bytes = block_bytes
        self._max_line_bytes = max_line_bytes
        self._indexes: dict[Path, FileIndex] = {}
        # One scan at a time: scans extend the indexes in place.
        self._lock = threading.Lock()

    @property
    def skipped_lines(self) -> int:
        """Unparseable lines in the files last searched: for operators, never shown to the model."""
        return sum(index.skipped for index in self._indexes.values())

    async def execute(self, request: ToolRequest) -> AdapterResult:
        """Scan off the event loop so a large file never freezes the console.

        A thread cannot be killed, so cancellation (the tool's time limit, or the run's) sets the
        scan's stop flag and waits for the scan to notice it: once this call has ended, nothing reads
        the files on its behalf. Blocks indexed before the stop are kept for the next call.
        """
        params = request.input
        assert isinstance(params, QueryLogsInput)
        stop = threading.Event()
        scan = asyncio.ensure_future(asyncio.to_thread(self._query, params, stop))
        try:
            return await asyncio.shield(scan)
        except asyncio.CancelledError:
            stop.set()
            await _wait_for_stop(scan)
            raise

    def _query(self, params: QueryLogsInput, stop: threading.Event) -> AdapterResult:
        start, end = _parse_ts(params.start), _parse_ts(params.end)
        if start is None or end is None:
            raise ToolError(ErrorCode.INVALID_INPUT)
        if end < start:
            raise ToolError(ErrorCode.INVALID_INPUT, "WINDOW_INVERTED")
        start = max(start, end - self._max_window)
        limit = min(params.limit, self._max_lines)
        scan = _Scan(_Query.of(params, start, end), limit, stop)
        with self._locked(scan):
            files = self._files()
            for number, path in enumerate(files):
                self._search(number, path, scan)
            self._indexes = {path: self._indexes[path] for path in files}
        return self._projection.observation(
            scan.newest.newest_first(),
            matched=scan.newest.matched,
            window=Window(instant_us(start) * 1000, instant_us(end) * 1000),
            level=scan.query.level,
            without_level=scan.without_level,
        )

    @contextmanager
    def _locked(self, scan: _Scan) -> Iterator[None]:
        while not self._lock.acquire(timeout=_LOCK_POLL_S):
            scan.check()
        try:
            yield
        finally:
            self._lock.release()

    def _search(self, number: int, path: Path, scan: _Scan) -> None:
        """Offer every match of one file: from its indexed blocks, then from the rest while indexing it."""
        try:
            with path.open("rb") as handle:
                # The identity of what was opened, so a file rotated meanwhile is never misread.
                identity = FileIdentity.of(os.fstat(handle.fileno()))
                index = self._indexes.get(path)
                if index is None or index.identity != identity:
                    index = self._indexes[path] = FileIndex(identity, self._block_bytes)
                self._search_indexed(handle, number, index, scan)
                if not index.complete:
                    self._search_and_index(handle, number, path, index, scan)
        except OSError as exc:
            raise ToolError(ErrorCode.UNAVAILABLE) from exc

    def _search_indexed(self, handle: BinaryIO, number: int, index: FileIndex, scan: _Scan) -> None:
        """Read the indexed blocks that may hold a match, parsing only lines that may match."""
        query = scan.query
        for block in index.candidates(query.start_us, query.end_us, query.service):
            scan.check()
            for offset, raw in read_lines(handle, block.start, block.end, self._max_line_bytes):
                if raw is None or not query.may_match(raw):
                    continue
                line = _parse_line(raw)
                if line is not None:
                    scan.consider(line, (line.at_us, number, offset), partial(_record, line))

    def _search_and_index(
        self, handle: BinaryIO, number: int, path: Path, index: FileIndex, scan: _Scan
    ) -> None:
        """Read the file past its index, line by line: index every line, offer the matches. A stop
        lands between blocks, each block indexed before it is kept."""
        block = BlockBuilder(index.indexed_to)
        for offset, raw in read_lines(handle, index.indexed_to, index.identity.size, self._max_line_bytes):
            if offset - block.start >= index.block_bytes:
                index.add(block, offset)
                scan.check()
                block = BlockBuilder(offset)
            if raw is None:
                block.skipped += 1
                continue
            if raw.isspace():
                continue
            line = _parse_line(raw)
            if line is None:
                block.skipped += 1
                continue
            block.add(line.at_us, line.service)
            scan.consider(line, (line.at_us, number, offset), partial(_record, line))
        index.add(block, min(handle.tell(), index.identity.size))
        index.complete = True
        if index.skipped:
            logger.warning("skipped %d unparseable log lines in %s", index.skipped, path)

    def _files(self) -> list[Path]:
        try:
            if self._path.is_file():
                return [self._path]
            if self._path.is_dir():
                children = self._path.iterdir()
                return sorted(child for child in children if child.suffix in LOG_SUFFIXES and child.is_file())
        except OSError as exc:
            raise ToolError(ErrorCode.UNAVAILABLE) from exc
        raise ToolError(ErrorCode.UNAVAILABLE)


async def _wait_for_stop(scan: asyncio.Future[AdapterResult]) -> None:
    """Give the scan time to notice its stop flag; its result or `_Stopped` is dropped either way."""
    done, _ = await asyncio.wait({scan}, timeout=STOP_GRACE_S)
    if not done:
        logger.warning("a log scan did not stop within %.0f s of its cancellation", STOP_GRACE_S)
    scan.add_done_callback(_drop_outcome)


def _drop_outcome(scan: asyncio.Future[AdapterResult]) -> None:
    if not scan.cancelled():
        scan.exception()  # retrieved, so asyncio does not report it as never retrieved


def _record(line: _Line) -> LogRecord:
    extra = ((key, value) for key, value in line.record.items() if key not in _CORE_KEYS)
    return LogRecord(
        instant_ns=line.at_us * 1000,
        service=line.service,
        severity=line.severity,
        message=line.message,
        labels=tuple((key, _label_value(value)) for key, value in islice(extra, MAX_LABELS)),
    )


def _parse_line(raw: bytes) -> _Line | None:
    try:
        if raw[:1] == b"{" and raw[1:2] != b"\x00":
            # What json.loads does with these bytes (it would detect UTF-8), minus its per-call detour.
            record = _decode_json(raw.decode("utf-8", "surrogatepass"))
        else:
            record = json.loads(raw.removeprefix(_BOM))
    except (ValueError, RecursionError):  # ValueError covers UnicodeDecodeError; RecursionError: deep nesting
        return None
    if not isinstance(record, dict):
        return None
    ts, service, level_text, message = (
        record.get("ts"),
        record.get("service"),
        record.get("level"),
        record.get("message"),
    )
    if not (isinstance(ts, str) and isinstance(service, str) and isinstance(message, str)):
        return None
    at = _parse_ts(ts)
    if at is None:
        return None
    return _Line(record, instant_us(at), service, severity_of_field(level_text), message)


def _utf8(text: str) -> bytes:
    # surrogatepass: JSON decodes bytes the same way, so a lone surrogate still compares exactly.
    return text.encode("utf-8", "surrogatepass")


def _label_value(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text[:MAX_LABEL_CHARS]


def _parse_ts(value: str) -> datetime | None:
    """A timezone-aware instant, or None: a naive log time cannot be placed in the window."""
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else None
