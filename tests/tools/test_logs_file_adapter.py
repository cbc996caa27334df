"""query_logs over NDJSON files: the demo incident, filters, bounds, and tolerance of broken lines."""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.support.raising import returned_or_raised
from tools.adapter import AdapterResult, ToolError, ToolRequest
from tools.canonical import input_key
from tools.input_models import QueryLogsInput
from tools.logs.file_source import LogFileAdapter, bundled_logs_path
from tools.logs.json_lines import JsonLines
from tools.vocabulary import EvidenceStatus

DEMO_START = "2026-11-30T01:30:00Z"
DEMO_END = "2026-11-30T03:30:00Z"
HIKARI = "HikariPool-1 - Connection is not available, request timed out after 30000ms"
LOCK_WAIT = "Lock wait timeout exceeded; try restarting transaction"


async def query(adapter: LogFileAdapter, **fields: Any) -> AdapterResult:
    fields.setdefault("start", DEMO_START)
    fields.setdefault("end", DEMO_END)
    request = ToolRequest(
        run_id="run-1",
        session_id="session-1",
        tool_call_id="call-1",
        tool="query_logs",
        input=QueryLogsInput(**fields),
    )
    return await adapter.execute(request)


def line(ts: str, service: str = "svc", level: str = "INFO", message: str = "ok", **labels: Any) -> str:
    return json.dumps({"ts": ts, "service": service, "level": level, "message": message, **labels})


def write_lines(path: Path, *lines: str) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def demo() -> LogFileAdapter:
    return LogFileAdapter(bundled_logs_path())


async def test_demo_incident_payment_errors_are_found_newest_first(demo: LogFileAdapter) -> None:
    result = await query(demo, service="payment-service", level="ERROR", limit=200)

    assert result.status == "FOUND"
    entries = result.data["entries"]
    assert result.data["returned"] == len(entries) > 20
    assert result.data["truncated"] is False
    assert {entry["message"] for entry in entries} == {HIKARI, LOCK_WAIT}
    assert all(entry["service"] == "payment-service" and entry["level"] == "ERROR" for entry in entries)
    timestamps = [entry["ts"] for entry in entries]
    assert timestamps == sorted(timestamps, reverse=True)
    assert timestamps[-1] >= "2026-11-30T02:10:00Z"
    assert timestamps[0] < "2026-11-30T02:54:00Z"
    assert result.data["window"] == {"start": DEMO_START, "end": DEMO_END}


async def test_demo_incident_tells_the_deploy_and_rollback_story(demo: LogFileAdapter) -> None:
    deploys = await query(demo, service="payment-service", level="INFO", contains="deploy")
    callbacks = await query(demo, service="order-service", level="WARN", contains="payment callback timeout")
    gateway = await query(demo, service="api-gateway", level="ERROR", contains="/api/v1/payments")

    versions = [(entry["ts"][:16], entry["labels"]["version"]) for entry in deploys.data["entries"]]
    assert ("2026-11-30T02:05", "v2.14.0") in versions
    assert ("2026-11-30T02:52", "v2.13.4") in versions
    assert "ent-20931" in {entry["labels"]["enterprise_id"] for entry in callbacks.data["entries"]}
    assert all("status=504" in entry["message"] for entry in gateway.data["entries"])
    assert gateway.status == "FOUND"


async def test_account_service_has_no_errors_in_the_demo_window(demo: LogFileAdapter) -> None:
    result = await query(demo, service="account-service", level="ERROR")

    assert result == AdapterResult(
        EvidenceStatus.EMPTY,
        {
            "entries": [],
            "returned": 0,
            "matched": 0,
            "truncated": False,
            "window": {"start": DEMO_START, "end": DEMO_END},
            "without_level": 0,
        },
    )
    assert (await query(demo, service="account-service")).status == "FOUND"


async def test_demo_malformed_lines_are_skipped(demo: LogFileAdapter) -> None:
    """The torn JSON line is skipped; the legacy appender's text line among the JSON is read as
    text, its service the file's."""
    result = await query(demo, service="payment-service", level="ERROR", contains="HikariPool-1", limit=200)
    legacy = await query(demo, service="demo", level="WARN")

    assert demo.skipped_lines == 1
    assert [entry["ts"] for entry in legacy.data["entries"]] == ["2026-11-30T02:40:12.503Z"]
    assert "2026-11-30T02:31:07.412Z" not in {entry["ts"] for entry in result.data["entries"]}


async def test_filters_are_exact_and_contains_ignores_case(tmp_path: Path) -> None:
    path = write_lines(
        tmp_path / "app.ndjson",
        line("2026-11-30T02:00:00Z", service="pay", level="ERROR", message="Pool exhausted"),
        line("2026-11-30T02:01:00Z", service="pay", level="WARN", message="Pool exhausted soon"),
        line("2026-11-30T02:02:00Z", service="payment", level="ERROR", message="Pool exhausted"),
        line("2026-11-30T02:03:00Z", service="pay", level="FATAL", message="POOL gone"),
        line("2026-11-30T04:00:00Z", service="pay", level="ERROR", message="Pool exhausted"),
    )
    adapter = LogFileAdapter(path)

    errors = await query(adapter, service="pay", level="ERROR", contains="Pool")
    lowercase = await query(adapter, service="pay", contains="pool")
    everything = await query(adapter, service="pay")

    # ERROR means this severity or worse: the FATAL record too.
    assert [entry["ts"] for entry in errors.data["entries"]] == [
        "2026-11-30T02:03:00Z",
        "2026-11-30T02:00:00Z",
    ]
    assert [entry["message"] for entry in lowercase.data["entries"]] == [
        "POOL gone",
        "Pool exhausted soon",
        "Pool exhausted",
    ]
    assert lowercase.data["matched"] == 3
    assert [entry["level"] for entry in everything.data["entries"]] == ["FATAL", "WARN", "ERROR"]


async def test_window_bounds_are_inclusive_and_offsets_are_understood(tmp_path: Path) -> None:
    path = write_lines(
        tmp_path / "app.ndjson",
        line("2026-11-30T01:59:59Z"),
        line("2026-11-30T02:00:00Z"),
        line("2026-11-30T10:30:00+08:00"),
        line("2026-11-30T03:00:00Z"),
        line("2026-11-30T03:00:01Z"),
    )

    result = await query(
        LogFileAdapter(path), service="svc", start="2026-11-30T10:00:00+08:00", end="2026-11-30T03:00:00Z"
    )

    assert [entry["ts"] for entry in result.data["entries"]] == [
        "2026-11-30T03:00:00Z",
        "2026-11-30T02:30:00Z",  # shown in UTC, as every entry
        "2026-11-30T02:00:00Z",
    ]
    assert result.data["window"] == {"start": "2026-11-30T02:00:00Z", "end": "2026-11-30T03:00:00Z"}


async def test_window_is_clamped_keeping_its_end(demo: LogFileAdapter) -> None:
    adapter = LogFileAdapter(bundled_logs_path(), max_window_minutes=30)

    result = await query(adapter, service="payment-service", limit=200)

    assert result.data["window"] == {"start": "2026-11-30T03:00:00Z", "end": DEMO_END}
    assert result.data["entries"]
    assert all(entry["ts"] >= "2026-11-30T03:00:00" for entry in result.data["entries"])


async def test_limit_is_clamped_and_truncation_reported(demo: LogFileAdapter) -> None:
    adapter = LogFileAdapter(bundled_logs_path(), max_lines=5)

    clamped = await query(adapter, service="payment-service", level="ERROR", limit=200)
    exact = await query(demo, service="payment-service", contains="deploy rollback", limit=2)

    assert clamped.data["returned"] == len(clamped.data["entries"]) == 5
    assert clamped.data["truncated"] is True
    assert exact.data["returned"] == 2
    assert exact.data["truncated"] is False


async def test_equal_timestamps_keep_the_later_line_first(tmp_path: Path) -> None:
    path = write_lines(
        tmp_path / "app.ndjson",
        line("2026-11-30T02:00:00Z", message="first"),
        line("2026-11-30T02:00:00Z", message="second"),
    )

    result = await query(LogFileAdapter(path), service="svc")

    assert [entry["message"] for entry in result.data["entries"]] == ["second", "first"]


async def test_every_record_of_a_crowded_second_is_reachable_by_narrowing_the_window(tmp_path: Path) -> None:
    """300 records stamped with one second, 200 at most per answer: ties are told apart by their
    order in microseconds, so an end just before the oldest shown returns the rest; the calls differ
    in their canonical input, so neither is refused as a duplicate."""
    path = write_lines(
        tmp_path / "app.ndjson", *[line("2026-11-30T02:00:00Z", message=f"m{n}") for n in range(300)]
    )
    adapter = LogFileAdapter(path)
    second: dict[str, Any] = {
        "service": "svc",
        "start": "2026-11-30T02:00:00Z",
        "end": "2026-11-30T02:00:00Z",
        "limit": 200,
    }

    newest = await query(adapter, **second)
    oldest_shown = newest.data["entries"][-1]["ts"]
    rest = await query(adapter, **{**second, "end": "2026-11-30T02:00:00.000099Z"})

    assert (newest.data["matched"], newest.data["returned"]) == (300, 200)
    assert oldest_shown == "2026-11-30T02:00:00.000100Z"
    assert rest.data["matched"] == 100
    assert not rest.data["truncated"]
    seen = [entry["message"] for entry in newest.data["entries"] + rest.data["entries"]]
    assert seen == [f"m{n}" for n in reversed(range(300))]
    assert input_key("query_logs", QueryLogsInput(**second)) != input_key(
        "query_logs", QueryLogsInput(**{**second, "end": "2026-11-30T02:00:00.000099Z"})
    )


async def test_malformed_and_incomplete_lines_are_counted_and_skipped(tmp_path: Path) -> None:
    path = write_lines(
        tmp_path / "app.ndjson",
        line("2026-11-30T02:00:00Z", message="good one"),
        '{"ts": "2026-11-30T02:01:00Z", "service": "svc", "level": "ERR',
        "2026-11-30 02:02:00 ERROR plain text appender",
        json.dumps({"ts": "2026-11-30T02:03:00Z", "service": "svc", "message": "no level"}),
        line("2026-11-30T02:04:00", message="naive time"),
        line("yesterday", message="not a time"),
        json.dumps({"ts": "2026-11-30T02:05:00Z", "service": "svc", "level": "INFO", "message": 42}),
        "[1, 2, 3]",
        "",
        line("2026-11-30T02:06:00Z", message="good two"),
    )
    (tmp_path / "app.ndjson").write_bytes(path.read_bytes() + b"\xff\xfe not utf-8\n")
    adapter = LogFileAdapter(path)

    result = await query(adapter, service="svc")

    # Kept: a record without a level (a level filter counts it), a naive time (read in [logs]
    # timezone, UTC by default), a message that is not a string, and the text appender's line (read
    # as text, its service the file's). Skipped: the torn line, the unreadable time, the array, the
    # bytes that are not UTF-8.
    assert [entry["message"] for entry in result.data["entries"]] == [
        "good two",
        "42",
        "naive time",
        "no level",
        "good one",
    ]
    assert result.data["entries"][3]["level"] is None
    assert adapter.skipped_lines == 4
    assert adapter.skipped_by_reason == {"UNREADABLE": 4}
    assert (await query(adapter, service="app", level="ERROR")).data["matched"] == 1


async def test_projection_is_bounded(tmp_path: Path) -> None:
    labels = {f"label_{index}": "v" * 300 for index in range(12)}
    path = write_lines(
        tmp_path / "app.ndjson",
        line("2026-11-30T02:00:00Z", message="m" * 2000, **labels, retries=3, ok=True),
        line("2026-11-30T02:01:00Z", level="warning", message="short", attempt=3, meta={"k": 1}, gone=None),
    )

    result = await query(LogFileAdapter(path, message_chars=120), service="svc")

    newest, oldest = result.data["entries"]
    assert set(newest) == {"ts", "service", "level", "message", "labels"}
    assert newest["level"] == "WARN"
    assert newest["labels"] == {"attempt": "3", "meta": '{"k":1}', "gone": "null"}
    assert len(oldest["message"]) == 120
    assert len(oldest["labels"]) == 8
    assert all(len(value) == 100 for value in oldest["labels"].values())


async def test_inverted_window_is_invalid_input(demo: LogFileAdapter) -> None:
    with pytest.raises(ToolError) as raised:
        await query(demo, service="payment-service", start=DEMO_END, end=DEMO_START)

    assert (raised.value.code, raised.value.reason) == ("INVALID_INPUT", "WINDOW_INVERTED")


async def test_folder_of_files_is_merged_and_other_files_are_ignored(tmp_path: Path) -> None:
    """Recursive, rotated and gzip-compressed files are read; files that are no logs are not."""
    write_lines(tmp_path / "a.ndjson", line("2026-11-30T02:00:00Z", message="from a"))
    write_lines(tmp_path / "b.jsonl", line("2026-11-30T02:05:00Z", message="from b"))
    write_lines(tmp_path / "c.log", line("2026-11-30T02:10:00Z", message="from c"))
    (tmp_path / "old").mkdir()
    write_lines(tmp_path / "old" / "d.log.1", line("2026-11-30T01:50:00Z", message="from d"))
    (tmp_path / "old" / "e.log.2.gz").write_bytes(
        gzip.compress((line("2026-11-30T01:40:00Z", message="from e") + "\n").encode())
    )
    write_lines(tmp_path / "notes.md", line("2026-11-30T02:20:00Z", message="from notes"))
    write_lines(tmp_path / "app.pid", line("2026-11-30T02:20:00Z", message="from pid"))
    write_lines(tmp_path / ".hidden.log", line("2026-11-30T02:20:00Z", message="from hidden"))

    result = await query(LogFileAdapter(tmp_path), service="svc")

    assert [entry["message"] for entry in result.data["entries"]] == [
        "from c",
        "from b",
        "from a",
        "from d",
        "from e",
    ]


async def test_empty_folder_is_empty_not_an_error(tmp_path: Path) -> None:
    result = await query(LogFileAdapter(tmp_path), service="svc")

    assert result.status == "EMPTY"


@pytest.mark.parametrize("name", ["missing.ndjson", "missing-folder"])
async def test_missing_path_is_unavailable(tmp_path: Path, name: str) -> None:
    with pytest.raises(ToolError) as raised:
        await query(LogFileAdapter(tmp_path / name), service="svc")

    assert raised.value.code == "UNAVAILABLE"


async def test_changed_file_is_parsed_again(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "app.ndjson", line("2026-11-30T02:00:00Z", message="before"))
    adapter = LogFileAdapter(path)
    assert (await query(adapter, service="svc")).data["returned"] == 1

    write_lines(
        path, line("2026-11-30T02:00:00Z", message="before"), line("2026-11-30T02:01:00Z", message="after")
    )

    assert [entry["message"] for entry in (await query(adapter, service="svc")).data["entries"]] == [
        "after",
        "before",
    ]


async def test_cancelled_query_leaves_the_adapter_usable(demo: LogFileAdapter) -> None:
    task = asyncio.create_task(query(demo, service="payment-service", level="ERROR"))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    result = await query(demo, service="payment-service", level="ERROR", limit=200)

    assert result.status == "FOUND"
    assert not result.data["truncated"]
    assert demo.skipped_lines == 1


async def test_projection_cannot_corrupt_the_cache(demo: LogFileAdapter) -> None:
    first = await query(demo, service="payment-service", contains="deploy started")
    first.data["entries"][0]["labels"]["version"] = "REDACTED"

    again = await query(demo, service="payment-service", contains="deploy started")

    assert again.data["entries"][0]["labels"]["version"] == "v2.14.0"


async def test_a_deeply_nested_line_is_skipped_not_fatal(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "app.ndjson", "[" * 100_000 + "]" * 100_000, line("2026-11-30T02:00:00Z"))
    adapter = LogFileAdapter(path)

    result = await query(adapter, service="svc")

    assert result.data["returned"] == 1
    assert adapter.skipped_lines == 1


async def test_a_file_replaced_by_another_of_the_same_size_and_time_is_read_again(tmp_path: Path) -> None:
    """Log rotation renames a new file into place: the inode tells it apart, even when size and
    modification time are equal."""
    path = write_lines(tmp_path / "app.ndjson", line("2026-11-30T02:00:00Z", message="old"))
    adapter = LogFileAdapter(path)
    assert [e["message"] for e in (await query(adapter, service="svc")).data["entries"]] == ["old"]
    stat = path.stat()
    rotated = write_lines(tmp_path / "next.tmp", line("2026-11-30T02:00:00Z", message="new"))
    os.utime(rotated, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    rotated.replace(path)

    assert [e["message"] for e in (await query(adapter, service="svc")).data["entries"]] == ["new"]


async def test_a_line_past_the_line_cap_is_counted_and_skipped(tmp_path: Path) -> None:
    path = write_lines(
        tmp_path / "app.ndjson",
        line("2026-11-30T02:00:00Z", message="m" * 200),
        line("2026-11-30T02:01:00Z", message="short"),
    )
    adapter = LogFileAdapter(path, max_line_bytes=150)

    result = await query(adapter, service="svc")

    assert [entry["message"] for entry in result.data["entries"]] == ["short"]
    assert adapter.skipped_lines == 1


async def test_a_first_query_parses_only_around_its_window(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A time-ordered file is bisected: one hour of a day reads a few chunks around the hour (and a
    handful of probes), never the day; the answer equals the whole-file answer."""
    day = [
        line(f"2026-11-30T{n // 240:02d}:{n // 4 % 60:02d}:{n % 4 * 15:02d}Z", level="ERROR")
        for n in range(5760)
    ]
    path = write_lines(tmp_path / "app.ndjson", *day)
    parsed: list[str] = []
    head = JsonLines.head

    def counting(self: JsonLines, text: str, clock: Any) -> Any:
        parsed.append(text)
        return head(self, text, clock)

    monkeypatch.setattr(JsonLines, "head", counting)
    hour = {"service": "svc", "start": "2026-11-30T10:00:00Z", "end": "2026-11-30T11:00:00Z", "limit": 200}

    cold = await query(LogFileAdapter(path, block_bytes=16 * 1024), **hour)
    cold_parsed = len(parsed)
    whole = await query(LogFileAdapter(path, block_bytes=16 * 1024, max_window_minutes=360), **hour)

    assert cold.data["matched"] == 241
    assert cold.data["returned"] == 200
    assert cold == whole
    assert cold_parsed < len(day) // 4


# ------------------------------------------------------------------ the streaming scan equals the plain rule
LEVELS = {"INFO": "INFO", "ERROR": "ERROR", "WARNING": "WARN", "WARN": "WARN", "DEBUG": "DEBUG"}
LEVELS |= {"FATAL": "FATAL", "CRIT": "FATAL", "E": "ERROR"}
RANKS = {"TRACE": 0, "DEBUG": 1, "INFO": 2, "WARN": 3, "ERROR": 4, "FATAL": 5}
NS = 1_000_000_000
US = 1000  # nanoseconds: instants are read to the microsecond


def reference_answer(
    paths: list[Path],
    params: QueryLogsInput,
    *,
    max_window_minutes: int,
    max_lines: int,
    message_chars: int,
    max_line_bytes: int,
) -> tuple[AdapterResult, int]:
    """The answer and the skipped-line count by the rule, computed the plain way: read every line of
    every file as a JSON record, keep every match, sort. What the scan must return, however it reads."""
    start, end = reference_ns(params.start), reference_ns(params.end)
    assert start is not None
    assert end is not None
    if end < start:
        raise ToolError("INVALID_INPUT", "WINDOW_INVERTED")
    start = max(start, end - max_window_minutes * 60 * NS)
    through = end + NS - US if end % NS == 0 else end  # an end on a whole second covers that second
    matches: list[tuple[tuple[int, int, int], dict[str, Any]]] = []
    census: set[str] = set()
    skipped = without_level = 0
    contains = None if params.contains is None else params.contains.lower()
    for number, path in enumerate(paths):
        pieces = path.read_bytes().split(b"\n")
        raws = [piece + b"\n" for piece in pieces[:-1]] + ([pieces[-1]] if pieces[-1] else [])
        offset = 0
        rank_instant, rank = -1, 0
        for raw in raws:
            at, offset = offset, offset + len(raw)
            text = raw.decode("utf-8", "replace")
            if len(raw.removesuffix(b"\n")) > max_line_bytes:
                skipped += 1
                continue
            if not text.strip():
                continue
            parsed = reference_parse(text) or reference_text_line(text, path.stem)
            if parsed is None:
                skipped += 1
                continue
            instant, record, level = parsed
            if start <= instant <= through:
                census.add(record["service"])
            if instant > through or instant < start - NS or record["service"] != params.service:
                continue
            if (
                contains is not None
                and contains not in text.lower()
                and contains not in record["message"].lower()
            ):
                continue
            if params.level is not None:
                if level is None:
                    without_level += start <= instant <= through
                    continue
                if RANKS[level] < RANKS[params.level]:
                    continue
            rank, rank_instant = (rank + 1, rank_instant) if instant == rank_instant else (0, instant)
            instant += rank * US
            if not start <= instant <= through:
                continue
            labels = [(k, v) for k, v in record.items() if k not in ("ts", "service", "level", "message")]
            entry = {
                "ts": reference_utc(instant),
                "service": record["service"],
                "level": level,
                "message": record["message"][:message_chars],
                "labels": {k[:100]: reference_label(v) for k, v in labels[:8]},
            }
            if len(record["message"]) > message_chars:
                entry["cut"] = True
            matches.append(((instant, number, at), entry))
    window = {"start": reference_utc(start), "end": reference_utc(end)}
    return reference_result(matches, params, max_lines, window, census, without_level), skipped


def reference_result(
    matches: list[tuple[tuple[int, int, int], dict[str, Any]]],
    params: QueryLogsInput,
    max_lines: int,
    window: dict[str, str],
    census: set[str],
    without_level: int,
) -> AdapterResult:
    """The answer from every match (by instant, file and offset), newest first."""
    matches.sort(key=lambda match: match[0], reverse=True)
    limit = min(params.limit, max_lines)
    data: dict[str, Any] = {
        "entries": [entry for _, entry in matches[:limit]],
        "returned": min(limit, len(matches)),
        "matched": len(matches),
        "truncated": len(matches) > limit,
        "window": window,
    }
    if params.level is not None:
        data["without_level"] = without_level
    if not matches and params.service not in census:
        data["services_in_window"] = sorted(census)
    return AdapterResult(EvidenceStatus.FOUND if matches else EvidenceStatus.EMPTY, data)


def reference_parse(text: str) -> tuple[int, dict[str, Any], str | None] | None:
    body = text.strip().removeprefix("\ufeff")
    if not body.startswith("{"):
        return None
    try:
        record = json.loads(body)
    except (ValueError, RecursionError):
        return None
    if not isinstance(record, dict) or not all(
        isinstance(record.get(key), str) for key in ("ts", "service", "message")
    ):
        return None
    instant = reference_ns(record["ts"])
    if instant is None:
        return None
    level = record.get("level")
    return instant, record, LEVELS.get(level.upper()) if isinstance(level, str) else None


def reference_text_line(text: str, file_service: str) -> tuple[int, dict[str, Any], str | None] | None:
    """A text appender's line among the JSON ones: read as text, its service the file's."""
    match = re.match(r"(\d{4}-\d\d-\d\d) (\d\d:\d\d:\d\d) ([A-Z]+) ", text)
    if match is None:
        return None
    instant = reference_ns(f"{match[1]}T{match[2]}")
    assert instant is not None
    return instant, {"service": file_service, "message": text.rstrip("\r\n")}, LEVELS.get(match[3])


def reference_ns(value: str) -> int | None:
    """Exact nanoseconds of an ISO time; a time without an offset is UTC (the default timezone)."""
    match = re.fullmatch(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)?", value)
    if match is None:
        return None
    zone = "+00:00" if match[3] in (None, "Z") else match[3]
    moment = datetime.fromisoformat(match[1] + zone)
    return int(moment.timestamp()) * NS + int((match[2] or "0").ljust(9, "0")[:6]) * US


def reference_label(value: Any) -> str:
    return (
        value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    )[:100]


def reference_utc(ns: int) -> str:
    seconds, nanos = divmod(ns, NS)
    base = datetime.fromtimestamp(seconds, UTC).replace(tzinfo=None).isoformat()
    if nanos == 0:
        return base + "Z"
    if nanos % 1_000_000 == 0:
        return f"{base}.{nanos // 1_000_000:03d}Z"
    if nanos % 1000 == 0:
        return f"{base}.{nanos // 1000:06d}Z"
    return f"{base}.{nanos:09d}Z"


INSTANTS = [
    "2026-11-30T02:00:00Z",
    "2026-11-30T10:00:00+08:00",  # the same instant as the one above
    "2026-11-30T02:00:00.000001Z",
    "2026-11-30T02:30:00.5Z",
    "2026-11-30T03:00:00Z",
    "2026-11-30T03:00:00.123456789+00:00",  # read to the microsecond
    "2026-11-30T05:00:00Z",
]
SERVICES = ["svc", "pay", "payé", 'q"uote', "bäck\\slash"]
WORDS = ["Pool", "pool", "timeout", "支付", "a\\b", '"q"', "é"]


@st.composite
def log_lines(draw: st.DrawFn) -> bytes:
    """One line as appenders write them: valid records spelled many ways, and what they break into."""
    record: dict[str, Any] = {
        "ts": draw(st.sampled_from([*INSTANTS, "2026-11-30T02:00:00", "yesterday"])),
        "service": draw(st.sampled_from(SERVICES)),
        "level": draw(st.sampled_from(["INFO", "ERROR", "warning", "Warn", "DEBUG", "FATAL", "crit", "E"])),
        "message": " ".join(draw(st.lists(st.sampled_from(WORDS), max_size=4))),
    }
    for key in draw(st.lists(st.sampled_from(["trace_id", "version", "k" * 120, "n"]), max_size=3)):
        record[key] = draw(st.one_of(st.text(max_size=5), st.integers(), st.none(), st.booleans()))
    if draw(st.integers(0, 5)) == 0:
        del record["level"]  # a record without a level is kept, and counted by a level filter
    if draw(st.booleans()):
        record = dict(reversed(list(record.items())))  # key order is free
    text = json.dumps(
        record, ensure_ascii=draw(st.booleans()), separators=draw(st.sampled_from([None, (",", ":")]))
    )
    shape = draw(
        st.sampled_from(
            ["plain"] * 6
            + ["bom", "indent", "cut", "text", "array", "deep", "utf16", "escaped", "blank", "long"]
        )
    )
    if shape == "bom":
        return b"\xef\xbb\xbf" + text.encode()
    if shape == "indent":
        return b"  " + text.encode() + b"\r"
    if shape == "cut":
        return text.encode()[: draw(st.integers(1, len(text) - 1))]
    if shape == "text":
        return b"2026-11-30 02:00:00 ERROR svc Pool exhausted"
    if shape == "array":
        return b"[1, 2]"
    if shape == "deep":
        return b"[" * 5000 + b"]" * 5000  # deeper than the parser recurses
    if shape == "utf16":
        return json.dumps({**record, "service": "svc"}).encode("utf-16-le")  # json.loads reads UTF-16 too
    if shape == "escaped":
        return text.replace('"svc"', '"\\u0073vc"').encode()  # the service only through an escape
    if shape == "blank":
        return b"   "
    if shape == "long":
        return json.dumps({**record, "message": "x" * 400}).encode()  # past the test's line cap
    return text.encode()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
# A case the property found: a call with `contains` read only the records around its hits, yet the
# file's time span was remembered from them, so the next call skipped the record in its window.
@example(
    files=[
        [
            b'{"ts": "2026-11-30T02:00:00Z", "service": "svc", "message": ""}',
            b"2026-11-30 02:00:00 ERROR svc Pool exhausted",
            b'{"ts": "2026-11-30T02:30:00.5Z", "service": "svc", "message": ""}',
            b'{"ts": "2026-11-30T02:00:00Z", "service": "svc", "message": "Pool"}',
            b"2026-11-30 02:00:00 ERROR svc Pool exhausted",
        ]
    ],
    appended=[],
    queries=[
        {
            "service": "svc",
            "start": "2026-11-30T02:00:00Z",
            "end": "2026-11-30T02:00:00Z",
            "level": None,
            "contains": None,
            "limit": 1,
        },
        {
            "service": "svc",
            "start": "2026-11-30T02:00:00Z",
            "end": "2026-11-30T03:00:00Z",
            "level": None,
            "contains": "Pool",
            "limit": 1,
        },
    ],
    block_bytes=300,
    final_newline=False,
    max_window_minutes=30,
    max_lines=1,
)
@given(
    files=st.lists(st.lists(log_lines(), max_size=25), min_size=1, max_size=3),
    appended=st.lists(log_lines(), max_size=6),
    queries=st.lists(
        st.fixed_dictionaries(
            {
                "service": st.sampled_from(SERVICES),
                "start": st.sampled_from(INSTANTS),
                "end": st.sampled_from(INSTANTS),
                "level": st.sampled_from([None, "FATAL", "ERROR", "WARN", "INFO"]),
                "contains": st.sampled_from([None, *WORDS]),
                "limit": st.integers(1, 6),
            }
        ),
        min_size=1,
        max_size=3,
    ),
    block_bytes=st.sampled_from([1, 80, 300, 4096]),
    final_newline=st.booleans(),
    max_window_minutes=st.sampled_from([30, 360]),
    max_lines=st.integers(1, 6),
)
async def test_streamed_answers_equal_parsing_everything(
    tmp_path_factory: pytest.TempPathFactory,
    files: list[list[bytes]],
    appended: list[bytes],
    queries: list[dict[str, Any]],
    block_bytes: int,
    final_newline: bool,
    max_window_minutes: int,
    max_lines: int,
) -> None:
    """First and repeated answers, before and after an append, equal the plain rule's answers."""
    folder = tmp_path_factory.mktemp("logs")
    paths = [folder / f"{index}.{'ndjson' if index % 2 else 'jsonl'}" for index in range(len(files))]
    for path, lines in zip(paths, files, strict=True):
        path.write_bytes(b"\n".join(lines) + (b"\n" if final_newline else b""))
    options = {"max_window_minutes": max_window_minutes, "max_lines": max_lines, "message_chars": 20}
    adapter = LogFileAdapter(
        folder,
        max_window_minutes,
        max_lines,
        20,
        block_bytes=block_bytes,
        max_line_bytes=300,
        log_format="json",
    )

    async def check(fields: dict[str, Any]) -> None:
        params = QueryLogsInput(**fields)
        answer = returned_or_raised(
            lambda: reference_answer(paths, params, max_line_bytes=300, **options), ToolError
        )
        if isinstance(answer, ToolError):
            with pytest.raises(ToolError) as raised:
                await query(adapter, **fields)
            assert (raised.value.code, raised.value.reason) == (answer.code, answer.reason)
            return
        expected, skipped = answer
        assert await query(adapter, **fields) == expected
        if fields["contains"] is None:
            assert adapter.skipped_lines == skipped
        else:  # pieces without the word are never parsed, so their unreadable lines go uncounted
            assert adapter.skipped_lines <= skipped

    for fields in queries + queries:  # the second pass answers from the index
        await check(fields)
    with paths[-1].open("ab") as handle:  # an appender adds lines: a new version of the file
        handle.write(b"\n" + b"\n".join(appended))
    for fields in queries:
        await check(fields)


async def test_a_file_whose_first_record_is_longer_than_the_sample_is_still_recognised(
    tmp_path: Path,
) -> None:
    """Recognition samples the lines after a first line too long to sample (one huge record)."""
    write_lines(
        tmp_path / "app.log",
        line("2026-11-30T02:00:00Z", message="x" * 600_000),
        line("2026-11-30T02:01:00Z", message="small"),
    )
    adapter = LogFileAdapter(tmp_path)

    result = await query(adapter, service="svc")

    assert [entry["message"][:5] for entry in result.data["entries"]] == ["small", "xxxxx"]
    assert adapter.skipped_files == ()
