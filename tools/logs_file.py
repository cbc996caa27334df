"""query_logs over local NDJSON files: the demo log and any `[logs] source = "file"` configuration.

Log files written by real appenders contain truncated writes and foreign lines; those are counted and
skipped so one bad line never hides the rest. Files are parsed once per (path, mtime, size).
"""

from __future__ import annotations

import asyncio
import importlib.resources
import json
import logging
import os
import threading
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from itertools import islice
from pathlib import Path
from typing import Any

from tools.adapter import AdapterResult, ToolError, ToolRequest
from tools.definitions import QueryLogsInput

logger = logging.getLogger(__name__)

LOG_SUFFIXES = (".ndjson", ".jsonl")
MAX_LABELS = 8
MAX_LABEL_CHARS = 100
_CORE_KEYS = frozenset({"ts", "service", "level", "message"})
# Appenders disagree on spelling; the tool contract only knows these four levels.
_LEVEL_ALIASES = {"WARNING": "WARN"}


def bundled_logs_path() -> Path:
    """The demo incident log shipped with the package, used when no `[logs] path` is configured."""
    return Path(str(importlib.resources.files("tools") / "data" / "logs" / "demo.ndjson"))


@dataclass(frozen=True)
class _Entry:
    at: datetime
    ts: str
    service: str
    level: str
    message: str
    labels: dict[str, str]


@dataclass(frozen=True)
class _ParsedFile:
    mtime_ns: int
    size: int
    entries: tuple[_Entry, ...]
    skipped: int


class LogFileAdapter:
    """Answers query_logs from one NDJSON file or a folder of `*.ndjson` / `*.jsonl` files."""

    def __init__(
        self, path: Path, max_window_minutes: int = 360, max_lines: int = 200, message_chars: int = 500
    ) -> None:
        self._path = path
        self._max_window = timedelta(minutes=max_window_minutes)
        self._max_lines = max_lines
        self._message_chars = message_chars
        self._cache: dict[Path, _ParsedFile] = {}
        self._lock = threading.Lock()

    @property
    def skipped_lines(self) -> int:
        """Unparseable lines in the files last searched: for operators, never shown to the model."""
        return sum(parsed.skipped for parsed in self._cache.values())

    async def execute(self, request: ToolRequest) -> AdapterResult:
        """Read and filter off the event loop so a large file never freezes the console.

        If the awaiting task is cancelled the worker thread still finishes, but its only side effect is
        swapping in a fully built cache under a lock, so no state is ever half-updated.
        """
        params = request.input
        assert isinstance(params, QueryLogsInput)
        return await asyncio.to_thread(self._query, params)

    def _query(self, params: QueryLogsInput) -> AdapterResult:
        start, end = _parse_ts(params.start), _parse_ts(params.end)
        if start is None or end is None:
            raise ToolError("INVALID_INPUT")
        if end < start:
            raise ToolError("INVALID_INPUT", "WINDOW_INVERTED")
        start = max(start, end - self._max_window)
        limit = min(params.limit, self._max_lines)

        matches = [
            entry
            for entry in self._entries()
            if entry.service == params.service
            and start <= entry.at <= end
            and (params.level is None or entry.level == params.level)
            and (params.contains is None or params.contains in entry.message)
        ]
        # Stable sort: among equal timestamps the later line stays first, as it was written later.
        matches.reverse()
        matches.sort(key=lambda entry: entry.at, reverse=True)
        data = {
            "entries": [self._project(entry) for entry in matches[:limit]],
            "returned": min(limit, len(matches)),
            "truncated": len(matches) > limit,
            "window": {"start": _format_utc(start), "end": _format_utc(end)},
        }
        return AdapterResult("FOUND" if matches else "EMPTY", data)

    def _project(self, entry: _Entry) -> dict[str, Any]:
        return {
            "ts": entry.ts,
            "service": entry.service,
            "level": entry.level,
            "message": entry.message[: self._message_chars],
            "labels": dict(entry.labels),  # a copy: callers may redact the projection in place
        }

    def _entries(self) -> list[_Entry]:
        """All parsed entries in file order, re-parsing only files whose mtime or size changed."""
        with self._lock:
            fresh: dict[Path, _ParsedFile] = {}
            for path in self._files():
                try:
                    stat = path.stat()
                    cached = self._cache.get(path)
                    if cached is None or (cached.mtime_ns, cached.size) != (stat.st_mtime_ns, stat.st_size):
                        cached = _parse_file(path, stat)
                except OSError as exc:
                    raise ToolError("UNAVAILABLE") from exc
                fresh[path] = cached
            self._cache = fresh
        return [entry for parsed in fresh.values() for entry in parsed.entries]

    def _files(self) -> list[Path]:
        try:
            if self._path.is_file():
                return [self._path]
            if self._path.is_dir():
                children = self._path.iterdir()
                return sorted(child for child in children if child.suffix in LOG_SUFFIXES and child.is_file())
        except OSError as exc:
            raise ToolError("UNAVAILABLE") from exc
        raise ToolError("UNAVAILABLE")


def _parse_file(path: Path, stat: os.stat_result) -> _ParsedFile:
    entries: list[_Entry] = []
    skipped = 0
    with path.open("rb") as handle:
        for raw in handle:
            if not raw.strip():
                continue
            entry = _parse_line(raw)
            if entry is None:
                skipped += 1
            else:
                entries.append(entry)
    if skipped:
        logger.warning("skipped %d unparseable log lines in %s", skipped, path)
    return _ParsedFile(mtime_ns=stat.st_mtime_ns, size=stat.st_size, entries=tuple(entries), skipped=skipped)


def _parse_line(raw: bytes) -> _Entry | None:
    try:
        record = json.loads(raw.removeprefix(b"\xef\xbb\xbf"))
    except ValueError:  # also covers UnicodeDecodeError
        return None
    if not isinstance(record, dict):
        return None
    ts, service, level, message = (record.get(key) for key in ("ts", "service", "level", "message"))
    if not (
        isinstance(ts, str)
        and isinstance(service, str)
        and isinstance(level, str)
        and isinstance(message, str)
    ):
        return None
    at = _parse_ts(ts)
    if at is None:
        return None
    extra = ((key, value) for key, value in record.items() if key not in _CORE_KEYS)
    labels = {key[:MAX_LABEL_CHARS]: _label_value(value) for key, value in islice(extra, MAX_LABELS)}
    level = level.upper()
    return _Entry(
        at=at, ts=ts, service=service, level=_LEVEL_ALIASES.get(level, level), message=message, labels=labels
    )


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


def _format_utc(moment: datetime) -> str:
    utc = moment.astimezone(UTC)
    if utc.microsecond == 0:
        timespec = "seconds"
    else:
        timespec = "milliseconds" if utc.microsecond % 1000 == 0 else "microseconds"
    return utc.replace(tzinfo=None).isoformat(timespec=timespec) + "Z"
