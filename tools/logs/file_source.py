"""query_logs over local log files: the demo log and any `[logs] source = "file"` configuration.

`[logs] path` is one file or a folder searched recursively (rotated and `.gz` files included;
`tools.logs.file_names` says which names are logs and what service a name gives). Each file is read
as-is in its own format (`tools.logs.file_formats` recognises it, or `[logs] format` forces one) and
searched by `tools.logs.file_scan`, which keeps only the `limit` newest matches: memory does not
grow with the files. The answer is the shared projection (`tools.logs.projection`).

A log folder is someone's content, walked by the file-trust rule runbook folders follow
(`tools.file_trust.walk_folder`): a link in it that resolves outside it, or a file another user
planted, is skipped and logged; files are opened without following a link swapped in since, and
anything but a regular file is refused (a FIFO would block the scan).

The scan runs in a worker thread, which cannot be killed, so it checks a stop flag between chunks:
when the tool times out or the run is cancelled, reading stops within one chunk.
"""

from __future__ import annotations

import asyncio
import gzip
import importlib.resources
import logging
import os
import stat
import threading
import zlib
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, cast

from tools.adapter import AdapterResult, ToolError, ToolRequest
from tools.file_trust import SkippedFile, walk_folder
from tools.input_models import QueryLogsInput
from tools.logs.custom_format import RegexFormat
from tools.logs.file_formats import ALIASES, AUTO, SAMPLE_BYTES, SAMPLE_LINES, build_formats, recognise
from tools.logs.file_names import is_log_file, service_of
from tools.logs.file_scan import (
    MAX_CENSUS_SERVICES,
    CallState,
    FileScan,
    FileSummary,
    LogQuery,
    SkipReason,
    Stopped,
)
from tools.logs.line_format import LineFormat
from tools.logs.projection import LogProjection, NewestRecords, Window
from tools.logs.severity import Severity
from tools.logs.timestamps import NS_PER_S, Clock, timezone_named
from tools.redaction import NOOP, Redactor
from tools.vocabulary import ErrorCode

logger = logging.getLogger(__name__)

BLOCK_BYTES = 256 * 1024  # read at a time; a stop lands between two reads
# Lines longer than this are skipped (counted) without ever being held whole.
MAX_LINE_BYTES = 16 * 1024 * 1024
# A cancelled call waits this long at most for its scan to notice the stop flag (one block, normally
# milliseconds); a scan stuck in the file system is then left to stop on its own.
STOP_GRACE_S = 2.0
_LOCK_POLL_S = 0.05
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_MAX_CACHED_FILES = 10_000
# A log file has no size cap: a scan's memory does not grow with it (`tools.logs.file_scan`).
_NO_FILE_CAP = 2**63 - 1
_GZIP_MAGIC = b"\x1f\x8b"


def bundled_logs_path() -> Path:
    """The demo incident log shipped with the package, used when no `[logs] path` is configured."""
    return Path(str(importlib.resources.files("tools") / "data" / "logs" / "demo.ndjson"))


@dataclass(frozen=True)
class FileIdentity:
    """One version of a file: any change to it (a rewrite, an append, a rotation) gives a new one."""

    device: int
    inode: int
    size: int
    mtime_ns: int

    @classmethod
    def of(cls, info: os.stat_result) -> FileIdentity:
        return cls(info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)


@dataclass(frozen=True)
class _LogFile:
    source: str  # the path inside the folder, or the file's name
    path: Path
    inside_folder: bool


class LogFileAdapter:
    """Answers query_logs from one log file or a folder of them, each read in its own format."""

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
        log_format: str = AUTO,
        timezone: str = "UTC",
        fields: Mapping[str, str] | None = None,
        file_services: Mapping[str, str] | None = None,
        custom_formats: Iterable[RegexFormat] = (),
        redactor: Redactor = NOOP,
    ) -> None:
        self._path = path
        self._max_window_ns = max_window_minutes * 60 * NS_PER_S
        self._max_lines = max_lines
        self._projection = LogProjection(message_chars, message_lines, redactor)
        self._block_bytes = block_bytes
        self._max_line_bytes = max_line_bytes
        self._zone = timezone_named(timezone)
        self._formats = build_formats(fields, custom_formats)
        name = ALIASES.get(log_format, log_format)
        if name != AUTO and name not in self._formats:
            raise ValueError(f"unknown log format {log_format!r}")
        self._forced = None if name == AUTO else self._formats[name]
        self._file_services = dict(file_services or {})
        self._recognised: dict[FileIdentity, LineFormat | None] = {}
        self._summaries: dict[FileIdentity, FileSummary] = {}
        self._logged: set[tuple[FileIdentity | str, str]] = set()  # what the log has been told once
        self._skipped: Counter[SkipReason] = Counter()
        self._skipped_files: tuple[SkippedFile, ...] = ()
        # One scan at a time: scans share the caches above.
        self._lock = threading.Lock()

    @property
    def skipped_lines(self) -> int:
        """Lines the last call could not read: for operators, never shown to the model."""
        return sum(self._skipped.values())

    @property
    def skipped_by_reason(self) -> dict[str, int]:
        return {str(reason): count for reason, count in sorted(self._skipped.items())}

    @property
    def skipped_files(self) -> tuple[SkippedFile, ...]:
        """Files of the folder left out at the last call, and why (links leading outside, ...)."""
        return self._skipped_files

    async def execute(self, request: ToolRequest) -> AdapterResult:
        """Scan off the event loop so a large file never freezes the console.

        A thread cannot be killed, so cancellation (the tool's time limit, or the run's) sets the
        scan's stop flag and waits for the scan to notice it: once this call has ended, nothing reads
        the files on its behalf.
        """
        params = request.input
        assert isinstance(params, QueryLogsInput)  # noqa: S101 - invariant for the type checker
        stop = threading.Event()
        scan = asyncio.ensure_future(asyncio.to_thread(self._query, params, stop))
        try:
            return await asyncio.shield(scan)
        except asyncio.CancelledError:
            stop.set()
            await _wait_for_stop(scan)
            raise

    def _query(self, params: QueryLogsInput, stop: threading.Event) -> AdapterResult:
        # An end on a whole second covers that second: records stamped to the second, and those a
        # tie spread over it (tools.logs.file_scan), are in.
        window = Window.asked(params.start, params.end, self._max_window_ns)
        level = None if params.level is None else Severity[params.level]
        contains = None if params.contains is None else params.contains.lower()
        limit = min(params.limit, self._max_lines)
        state = CallState(LogQuery(params.service, window, level, contains), NewestRecords(limit), stop)
        census: CallState | None = None
        with self._locked(stop):
            files = self._files()
            self._search(files, state)
            self._skipped = Counter(state.skipped)
            if not state.newest.matched and not state.service_seen:  # which services are there?
                census = CallState(LogQuery(None, window, None, None), NewestRecords(1), stop)
                self._search(files, census)
        services = None
        if census is not None and params.service not in census.services:
            services = sorted(census.services)[: MAX_CENSUS_SERVICES - 1]
        return self._projection.observation(
            state.newest.newest_first(),
            matched=state.newest.matched,
            window=window,
            level=level,
            without_level=state.without_level,
            services_in_window=services,
        )

    @contextmanager
    def _locked(self, stop: threading.Event) -> Iterator[None]:
        while not self._lock.acquire(timeout=_LOCK_POLL_S):
            if stop.is_set():
                raise Stopped
        try:
            yield
        finally:
            self._lock.release()

    def _files(self) -> list[_LogFile]:
        try:
            if self._path.is_file():
                # The folder's name too: a pod's log is `<container>/0.log` (tools.logs.file_names).
                source = (
                    f"{self._path.parent.name}/{self._path.name}"
                    if self._path.parent.name
                    else self._path.name
                )
                return [_LogFile(source, self._path, inside_folder=False)]
            if not self._path.is_dir():
                raise ToolError(ErrorCode.UNAVAILABLE)
        except OSError as exc:
            raise ToolError(ErrorCode.UNAVAILABLE) from exc
        files: list[_LogFile] = []
        left_out: list[SkippedFile] = []
        try:
            for item in walk_folder(self._path, wanted=is_log_file, max_file_bytes=_NO_FILE_CAP):
                if isinstance(item, SkippedFile):
                    left_out.append(item)
                else:
                    files.append(_LogFile(item.source, Path(item.path), inside_folder=True))
        except OSError as exc:  # the folder itself cannot be read: UNAVAILABLE, not an empty one
            raise ToolError(ErrorCode.UNAVAILABLE) from exc
        skipped = tuple(sorted(left_out))
        if skipped != self._skipped_files and skipped:
            logger.warning(
                "log folder %s: skipped %d file(s): %s",
                self._path,
                len(skipped),
                ", ".join(f"{item.source} ({item.reason})" for item in skipped),
            )
        self._skipped_files = skipped
        return sorted(files, key=lambda log_file: log_file.source)

    def _search(self, files: list[_LogFile], state: CallState) -> None:
        if len(self._recognised) > _MAX_CACHED_FILES:  # versions of files long rotated away
            self._recognised.clear()
            self._summaries.clear()
        for number, log_file in enumerate(files):
            state.check()
            self._search_file(number, log_file, state)

    def _search_file(self, number: int, log_file: _LogFile, state: CallState) -> None:
        flags = os.O_RDONLY | os.O_NONBLOCK | (_NOFOLLOW if log_file.inside_folder else 0)
        try:
            descriptor = os.open(log_file.path, flags)
        except OSError as exc:
            if not log_file.inside_folder:
                raise ToolError(ErrorCode.UNAVAILABLE) from exc
            self._skip_file(log_file, "UNREADABLE")
            return
        with os.fdopen(descriptor, "rb") as raw:
            info = os.fstat(raw.fileno())
            if not stat.S_ISREG(info.st_mode):
                if not log_file.inside_folder:
                    raise ToolError(ErrorCode.UNAVAILABLE)
                self._skip_file(log_file, "NOT_A_FILE")
                return
            identity = FileIdentity.of(info)
            summary = self._summaries.get(identity)
            window = state.query.window
            if summary is not None and (
                summary.latest_ns < window.start_ns - NS_PER_S or summary.earliest_ns > window.through_ns
            ):
                state.skipped.update(summary.skipped)
                return
            compressed = raw.read(2) == _GZIP_MAGIC  # by its bytes: a name can lie either way
            raw.seek(0)
            with _opened(raw, compressed) as handle:
                fmt = self._format_of(identity, handle, info.st_mtime_ns, log_file)
                if fmt is None:
                    return
                scan = FileScan(
                    state,
                    fmt,
                    Clock(self._zone, info.st_mtime_ns),
                    service_of(log_file.source, self._file_services),
                    number,
                    chunk_bytes=self._block_bytes,
                    max_line_bytes=self._max_line_bytes,
                    fallback=self._formats["text"] if fmt.name == "json" else None,
                    shown_lines=self._projection.message_lines,
                )
                before = sum(state.skipped.values())
                try:
                    found = scan.scan_stream(handle) if compressed else scan.scan_plain(handle, info.st_size)
                except OSError as exc:
                    raise ToolError(ErrorCode.UNAVAILABLE) from exc
            if found is not None:
                self._summaries[identity] = found
            skipped = sum(state.skipped.values()) - before
            if skipped and (identity, "lines") not in self._logged:
                self._logged.add((identity, "lines"))
                logger.warning("skipped %d unreadable log lines in %s", skipped, log_file.source)

    def _format_of(
        self, identity: FileIdentity, handle: BinaryIO, mtime_ns: int, log_file: _LogFile
    ) -> LineFormat | None:
        if self._forced is not None:
            return self._forced
        if identity in self._recognised:
            known = self._recognised[identity]
            if known is None:
                self._skip_file(log_file, "UNKNOWN_FORMAT")
            return known
        try:
            sample = self._sample(handle)
            handle.seek(0)
        except (OSError, EOFError, zlib.error):
            sample = b""
        lines = sample.split(b"\n")
        if len(sample) >= SAMPLE_BYTES:
            lines.pop()  # the last line may be cut
        texts = [text for raw in lines if (text := raw.decode("utf-8", "replace")).strip()][:SAMPLE_LINES]
        if not texts:
            return None  # empty so far: looked at again once it holds lines
        fmt = recognise(texts, self._formats, Clock(self._zone, mtime_ns))
        self._recognised[identity] = fmt
        if fmt is None:
            self._skip_file(log_file, "UNKNOWN_FORMAT")
        return fmt

    def _sample(self, handle: BinaryIO) -> bytes:
        """The file's first `SAMPLE_BYTES` of whole lines; past a first line longer than that (one
        huge record), the lines after it, so such a file is still recognised."""
        sample = handle.read(SAMPLE_BYTES)
        skipped = 0
        while len(sample) == SAMPLE_BYTES and b"\n" not in sample and skipped < self._max_line_bytes:
            skipped += len(sample)
            sample = handle.read(SAMPLE_BYTES)
        newline = sample.find(b"\n")
        if skipped and newline >= 0:
            sample = sample[newline + 1 :] + handle.read(newline + 1)
        return sample

    def _skip_file(self, log_file: _LogFile, reason: str) -> None:
        skipped = SkippedFile(log_file.source, reason)
        if skipped not in self._skipped_files:
            self._skipped_files = (*self._skipped_files, skipped)
        if (log_file.source, reason) not in self._logged:
            self._logged.add((log_file.source, reason))
            logger.warning("log file %s skipped: %s", log_file.source, reason)


@contextmanager
def _opened(raw: BinaryIO, compressed: bool) -> Iterator[BinaryIO]:
    if not compressed:
        yield raw
        return
    stream = gzip.GzipFile(fileobj=raw, mode="rb")
    try:
        yield cast(BinaryIO, stream)
    finally:
        with suppress(OSError, EOFError, zlib.error):
            stream.close()


async def _wait_for_stop(scan: asyncio.Future[AdapterResult]) -> None:
    """Give the scan time to notice its stop flag; its result or `Stopped` is dropped either way."""
    done, _ = await asyncio.wait({scan}, timeout=STOP_GRACE_S)
    if not done:
        logger.warning("a log scan did not stop within %.0f s of its cancellation", STOP_GRACE_S)
    scan.add_done_callback(_drop_outcome)


def _drop_outcome(scan: asyncio.Future[AdapterResult]) -> None:
    if not scan.cancelled():
        scan.exception()  # retrieved, so asyncio does not report it as never retrieved
