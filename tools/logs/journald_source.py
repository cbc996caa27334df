"""query_logs over the systemd journal (`[logs] source = "journald"`), read through `journalctl -o json`.

journalctl is the journal's own reader: it knows every file version, compression and the recovery
of a file cut short, so the adapter runs it (an argument vector, never a shell) instead of parsing
journal files. journalctl filters what the journal indexes (the window, and the service as a unit
or a syslog identifier) and writes the entries newest first; the adapter applies `level` and
`contains` itself, so an entry without PRIORITY is counted, never hidden, and `contains` is the same
case-insensitive literal as for every other source.

Bounded work: the adapter stops reading past `max_output_bytes` of journalctl's output (the answer
then says more may match), skips an entry longer than `max_entry_bytes` without holding it, and
kills journalctl when the call ends for any reason (done, cap reached, the tool's time limit, the
run's cancellation). journalctl runs with a fixed minimal environment: the console's secrets (the
model key, the database password) are never handed to it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from tools.adapter import AdapterResult, ToolError, ToolRequest
from tools.input_models import QueryLogsInput
from tools.logs.projection import LogProjection, NewestRecords, Window
from tools.logs.record import LogRecord
from tools.logs.severity import Severity, severity_of_number
from tools.redaction import NOOP, Redactor
from tools.vocabulary import ErrorCode

logger = logging.getLogger(__name__)

# Unit types systemd knows (systemd.unit(5)); a service named without one is a `.service`.
UNIT_SUFFIXES = (
    ".service",
    ".socket",
    ".target",
    ".device",
    ".mount",
    ".automount",
    ".swap",
    ".timer",
    ".path",
    ".slice",
    ".scope",
)
# What an entry shows beside its message, in this order (journal field names, as `journalctl -o
# verbose` prints them, so an operator can paste them into a journalctl match).
LABEL_FIELDS = (
    "SYSLOG_IDENTIFIER",
    "_SYSTEMD_UNIT",
    "_SYSTEMD_USER_UNIT",
    "UNIT",
    "_PID",
    "_COMM",
    "_HOSTNAME",
)
OUTPUT_FIELDS = ",".join(("MESSAGE", "PRIORITY", *LABEL_FIELDS))
DEFAULT_MAX_OUTPUT_BYTES = 64 * 1024 * 1024
# journald cuts stream lines at 48 KiB (`LineMax=`); native-protocol messages can be larger.
DEFAULT_MAX_ENTRY_BYTES = 1024 * 1024
# What the listing of the services in a window may read when a service matched nothing.
_SERVICES_SCAN_BYTES = 8 * 1024 * 1024
_READ_CHUNK = 64 * 1024
_KILL_WAIT_S = 2.0
_STDERR_KEPT = 2048
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_NS_PER_US = 1000
_NS_PER_S = 1_000_000_000
# No secret of the console's, no locale or pager surprise: UTF-8 JSON on stdout, nothing else.
_ENVIRONMENT = {
    "PATH": "/usr/bin:/bin",
    "LC_ALL": "C.UTF-8",
    "TZ": "UTC",
    "SYSTEMD_COLORS": "0",
    "SYSTEMD_PAGER": "cat",
    "SYSTEMD_LOG_COLOR": "0",
}


@dataclass(frozen=True)
class _Entry:
    """One journal entry as journalctl wrote it, before any filter."""

    instant_ns: int
    position: int  # order of output: journalctl writes newest first
    fields: dict[str, object]


@dataclass
class _Reading:
    """What one journalctl run left behind besides its entries."""

    output_bytes: int = 0
    passed_over: int = 0  # entries whose line cannot hold `contains`, never parsed
    capped: bool = False
    unreadable: int = 0
    exit_status: int | None = None
    stderr: str = ""


class JournaldLogAdapter:
    """Answers query_logs from the local journal, a journal folder or one journal file."""

    def __init__(
        self,
        journalctl: str,
        path: Path | None = None,
        *,
        max_window_minutes: int = 360,
        max_lines: int = 200,
        message_chars: int = 500,
        message_lines: int = 12,
        max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
        max_entry_bytes: int = DEFAULT_MAX_ENTRY_BYTES,
        redactor: Redactor = NOOP,
    ) -> None:
        self._journalctl = journalctl
        self._source = _source_arguments(path)
        self._max_window_ns = max_window_minutes * 60 * _NS_PER_S
        self._max_lines = max_lines
        # Values are redacted before they are cut (`tools.logs.projection.LogProjection`).
        self._projection = LogProjection(message_chars, message_lines, redactor)
        self._max_output_bytes = max_output_bytes
        self._max_entry_bytes = max_entry_bytes

    async def execute(self, request: ToolRequest) -> AdapterResult:
        params = request.input
        assert isinstance(params, QueryLogsInput)  # noqa: S101 - invariant for the type checker
        window = Window.asked(params.start, params.end, self._max_window_ns)
        limit = min(params.limit, self._max_lines)
        level = None if params.level is None else Severity[params.level]
        needle = None if params.contains is None else params.contains.lower()
        newest = NewestRecords(limit)
        without_level = 0
        seen = 0

        def consider(entry: _Entry) -> None:
            nonlocal without_level, seen
            seen += 1
            message = _text(entry.fields.get("MESSAGE"))
            if needle is not None and needle not in message.lower():
                return
            severity = _priority(entry.fields.get("PRIORITY"))
            if level is not None:
                if severity is None:
                    without_level += 1
                    return
                if severity < level:
                    return
            key = (entry.instant_ns, -entry.position)
            if newest.would_keep(key):
                newest.offer(key, _record(params.service, entry, severity, message))
            else:
                newest.count_only()

        reading = await self._read(
            window,
            service_matches(params.service),
            consider,
            self._max_output_bytes,
            None if needle is None else raw_needle(needle),
        )
        services = None
        if seen == 0 and reading.passed_over == 0 and not reading.capped:
            services = await self._services_in(window)
        return self._projection.observation(
            newest.newest_first(),
            matched=newest.matched,
            window=window,
            level=level,
            without_level=without_level,
            services_in_window=services,
            more_may_match=reading.capped,
        )

    async def _services_in(self, window: Window) -> list[str]:
        """The identifiers and units that wrote in the window (bounded), for a service that wrote nothing."""
        found: dict[str, None] = {}

        def collect(entry: _Entry) -> None:
            for field in ("SYSLOG_IDENTIFIER", "_SYSTEMD_UNIT"):
                name = _text(entry.fields.get(field))
                if name:
                    found.setdefault(name, None)

        await self._read(window, [], collect, _SERVICES_SCAN_BYTES)
        return sorted(found)

    async def _read(
        self,
        window: Window,
        matches: list[str],
        consider: Callable[[_Entry], None],
        max_bytes: int,
        needle: bytes | None = None,
    ) -> _Reading:
        """Run journalctl over the window and hand each entry to `consider`, newest first.

        With a `needle`, an entry whose line cannot hold it is passed over unparsed (counted in
        `passed_over`): see `line_cannot_hold`."""
        argv = [
            self._journalctl,
            "--output=json",
            "--all",  # fields past 4 KiB in full (else null), within `max_entry_bytes`
            "--reverse",
            "--no-pager",
            f"--output-fields={OUTPUT_FIELDS}",
            f"--since=@{_seconds(-(-window.start_ns // _NS_PER_US))}",
            f"--until=@{_seconds(window.through_ns // _NS_PER_US)}",
            *self._source,
            "--",
            *matches,
        ]
        try:
            process = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=_ENVIRONMENT,
            )
        except OSError as exc:  # journalctl removed or not executable since the configuration was read
            raise ToolError(ErrorCode.UNAVAILABLE) from exc
        reading = _Reading()
        assert process.stdout is not None  # noqa: S101 - invariant for the type checker
        assert process.stderr is not None  # noqa: S101 - invariant for the type checker
        stderr = asyncio.ensure_future(_kept_text(process.stderr))
        try:
            position = 0
            async for line in _lines(process.stdout, self._max_entry_bytes, max_bytes, reading):
                if needle is not None and line is not None and line_cannot_hold(line, needle):
                    reading.passed_over += 1
                    continue
                entry = _entry(line, position)
                if entry is None:
                    reading.unreadable += 1
                elif window.holds(entry.instant_ns):  # journalctl's bounds are whole microseconds
                    position += 1
                    consider(entry)
            if not reading.capped:
                reading.exit_status = await process.wait()
                reading.stderr = await stderr
        finally:
            await _end(process, stderr)
        self._report(reading)
        return reading

    def _report(self, reading: _Reading) -> None:
        """Operators learn why an answer is thin; the model only ever sees the stable code."""
        if reading.unreadable:
            logger.warning("skipped %d journal entries journalctl wrote unreadably", reading.unreadable)
        if reading.stderr:
            # e.g. "Hint: You are currently not seeing messages from other users and the system."
            logger.warning("journalctl: %s", reading.stderr.strip())
        if reading.exit_status not in (None, 0):
            raise ToolError(ErrorCode.UNAVAILABLE)


def service_matches(service: str) -> list[str]:
    """journalctl matches for a service: its unit, systemd's messages about the unit, or its identifier.

    Explicit `FIELD=value` arguments rather than `--unit=`, which would read `*`, `?` and `[` in the
    model's text as a glob over every unit. One argument each, after `--`: whatever the text holds,
    it is only ever a value compared for equality.
    """
    unit = service if service.endswith(UNIT_SUFFIXES) else f"{service}.service"
    return [
        f"_SYSTEMD_UNIT={unit}",
        "+",
        "_PID=1",  # the service manager's own lines about the unit ("Main process exited, ...")
        f"UNIT={unit}",
        "+",
        f"_SYSTEMD_USER_UNIT={unit}",
        "+",
        f"SYSLOG_IDENTIFIER={service}",
    ]


def _source_arguments(path: Path | None) -> list[str]:
    """The local journal, a folder of journal files (`--directory`) or one file (`--file`)."""
    if path is None:
        return []
    return [f"--file={path}"] if path.is_file() else [f"--directory={path}"]


async def _lines(
    stream: asyncio.StreamReader, max_line: int, max_total: int, reading: _Reading
) -> AsyncIterator[bytes | None]:
    """journalctl's output lines; None for one longer than `max_line`, which is never held whole.

    Stops (setting `reading.capped`) once `max_total` bytes have been read."""
    buffer = bytearray()
    skipping = False
    while True:
        chunk = await stream.read(min(_READ_CHUNK, max_total - reading.output_bytes))
        if not chunk:
            break
        reading.output_bytes += len(chunk)
        buffer += chunk
        start = 0
        while (end := buffer.find(b"\n", start)) >= 0:
            if skipping:
                skipping = False
                yield None
            else:
                yield bytes(buffer[start:end])
            start = end + 1
        del buffer[:start]
        if len(buffer) > max_line:
            buffer.clear()
            skipping = True
        if reading.output_bytes >= max_total:
            reading.capped = True
            return
    if buffer and not skipping:
        yield bytes(buffer)


def raw_needle(needle: str) -> bytes | None:
    """`contains` (lower case) as the bytes it must appear as in journalctl's JSON line, or None when
    no such shortcut is exact: non-ASCII text, or characters JSON escapes (`"`, `\\`)."""
    if not needle.isascii() or '"' in needle or "\\" in needle:
        return None
    return needle.encode("ascii")


def line_cannot_hold(line: bytes, needle: bytes) -> bool:
    """Whether an entry's JSON line certainly does not contain `needle` in its message, told from
    its bytes before any JSON parsing (a whole day of a busy unit is mostly such lines).

    Exact only where bytes and text agree: an all-ASCII line without `\\u` escapes (journalctl
    writes UTF-8 as it is, and no non-ASCII letter may hide there, as the Kelvin sign lower-cases to
    `k`) whose MESSAGE is a JSON string (not an array of bytes or of values, whose text only
    decoding shows); ASCII upper case lowers byte for byte."""
    return line.isascii() and b"\\u" not in line and b'"MESSAGE":[' not in line and needle not in line.lower()


def _entry(line: bytes | None, position: int) -> _Entry | None:
    if line is None:
        return None
    try:
        fields = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if not isinstance(fields, dict):
        return None
    stamp = fields.get("__REALTIME_TIMESTAMP")
    if not (isinstance(stamp, str) and stamp.isascii() and stamp.isdigit() and len(stamp) <= 19):
        return None
    return _Entry(int(stamp) * _NS_PER_US, position, fields)


def _record(service: str, entry: _Entry, severity: Severity | None, message: str) -> LogRecord:
    labels = []
    for field in LABEL_FIELDS:
        value = _text(entry.fields.get(field))
        if value:
            labels.append((field, value))
    return LogRecord(entry.instant_ns, service, severity, message, tuple(labels))


def _priority(value: object) -> Severity | None:
    """PRIORITY is one syslog digit (0 emerg ... 7 debug); anything else is no severity."""
    text = _text(value)
    return severity_of_number(int(text)) if len(text) == 1 and text in "01234567" else None


def _text(value: object) -> str:
    """A journal field as text: journalctl writes a string, an array of bytes (not UTF-8 or not
    printable) or, for a field set more than once, an array of those. Repeated values join with newlines."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        if all(isinstance(item, int) and 0 <= item <= 255 for item in value):
            return bytes(value).decode("utf-8", "replace")
        return "\n".join(_text(item) for item in value)
    return ""


async def _kept_text(stream: asyncio.StreamReader) -> str:
    """journalctl's diagnostics: the first bytes kept for the log, the rest drained so it never blocks."""
    kept = bytearray()
    while chunk := await stream.read(_READ_CHUNK):
        if len(kept) < _STDERR_KEPT:
            kept += chunk[: _STDERR_KEPT - len(kept)]
    return kept.decode("utf-8", "replace")


async def _end(process: asyncio.subprocess.Process, stderr: asyncio.Future[str]) -> None:
    """Kill journalctl if it still runs, read its pipes to their end and reap it, whether the call
    ended, failed or was cancelled: nothing of it outlives the call.

    The order matters: asyncio's `wait()` returns only once the pipes are closed too, and a pipe the
    reader stopped reading (the output cap) is never seen closed, so the pipes are drained first. A
    dead process's pipes hold at most what the kernel buffered."""
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
    assert process.stdout is not None  # noqa: S101 - invariant for the type checker
    try:
        async with asyncio.timeout(_KILL_WAIT_S):
            while await process.stdout.read(_READ_CHUNK):
                pass
            await stderr
            await asyncio.shield(process.wait())
    except TimeoutError:
        logger.warning("journalctl (pid %d) did not end within %.0f s of SIGKILL", process.pid, _KILL_WAIT_S)
    finally:
        stderr.cancel()


def _seconds(us: int) -> str:
    """An instant for `--since=@` / `--until=@`: epoch seconds with six decimals, exact to the microsecond."""
    seconds, micros = divmod(us, 1_000_000)
    return f"{seconds}.{micros:06d}"
