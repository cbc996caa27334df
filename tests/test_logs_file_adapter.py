"""query_logs over NDJSON files: the demo incident, filters, bounds, and tolerance of broken lines."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from tools.adapter import AdapterResult, ToolError, ToolRequest
from tools.definitions import QueryLogsInput
from tools.logs_file import LogFileAdapter, bundled_logs_path

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
    assert "2026-11-30T02:10:00Z" <= timestamps[-1] and timestamps[0] < "2026-11-30T02:54:00Z"
    assert result.data["window"] == {"start": DEMO_START, "end": DEMO_END}


async def test_demo_incident_tells_the_deploy_and_rollback_story(demo: LogFileAdapter) -> None:
    deploys = await query(demo, service="payment-service", level="INFO", contains="deploy")
    callbacks = await query(demo, service="order-service", level="WARN", contains="payment callback timeout")
    gateway = await query(demo, service="api-gateway", level="ERROR", contains="/api/v1/payments")

    versions = [(entry["ts"][:16], entry["labels"]["version"]) for entry in deploys.data["entries"]]
    assert ("2026-11-30T02:05", "v2.14.0") in versions and ("2026-11-30T02:52", "v2.13.4") in versions
    assert "ent-20931" in {entry["labels"]["enterprise_id"] for entry in callbacks.data["entries"]}
    assert all("status=504" in entry["message"] for entry in gateway.data["entries"])
    assert gateway.status == "FOUND"


async def test_account_service_has_no_errors_in_the_demo_window(demo: LogFileAdapter) -> None:
    result = await query(demo, service="account-service", level="ERROR")

    assert result == AdapterResult(
        "EMPTY",
        {"entries": [], "returned": 0, "truncated": False, "window": {"start": DEMO_START, "end": DEMO_END}},
    )
    assert (await query(demo, service="account-service")).status == "FOUND"


async def test_demo_malformed_lines_are_skipped(demo: LogFileAdapter) -> None:
    result = await query(demo, service="payment-service", level="ERROR", contains="HikariPool-1", limit=200)

    assert demo.skipped_lines == 2
    assert "2026-11-30T02:31:07.412Z" not in {entry["ts"] for entry in result.data["entries"]}


async def test_filters_are_exact_and_contains_is_case_sensitive(tmp_path: Path) -> None:
    path = write_lines(
        tmp_path / "app.ndjson",
        line("2026-11-30T02:00:00Z", service="pay", level="ERROR", message="Pool exhausted"),
        line("2026-11-30T02:01:00Z", service="pay", level="WARN", message="Pool exhausted soon"),
        line("2026-11-30T02:02:00Z", service="payment", level="ERROR", message="Pool exhausted"),
        line("2026-11-30T04:00:00Z", service="pay", level="ERROR", message="Pool exhausted"),
    )
    adapter = LogFileAdapter(path)

    errors = await query(adapter, service="pay", level="ERROR", contains="Pool")
    lowercase = await query(adapter, service="pay", contains="pool")
    everything = await query(adapter, service="pay")

    assert [entry["ts"] for entry in errors.data["entries"]] == ["2026-11-30T02:00:00Z"]
    assert lowercase.status == "EMPTY"
    assert [entry["level"] for entry in everything.data["entries"]] == ["WARN", "ERROR"]


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
        "2026-11-30T10:30:00+08:00",
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
    assert exact.data["returned"] == 2 and exact.data["truncated"] is False


async def test_equal_timestamps_keep_the_later_line_first(tmp_path: Path) -> None:
    path = write_lines(
        tmp_path / "app.ndjson",
        line("2026-11-30T02:00:00Z", message="first"),
        line("2026-11-30T02:00:00Z", message="second"),
    )

    result = await query(LogFileAdapter(path), service="svc")

    assert [entry["message"] for entry in result.data["entries"]] == ["second", "first"]


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

    assert [entry["message"] for entry in result.data["entries"]] == ["good two", "good one"]
    assert adapter.skipped_lines == 8


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
    write_lines(tmp_path / "a.ndjson", line("2026-11-30T02:00:00Z", message="from a"))
    write_lines(tmp_path / "b.jsonl", line("2026-11-30T02:05:00Z", message="from b"))
    write_lines(tmp_path / "c.log", line("2026-11-30T02:10:00Z", message="from c"))

    result = await query(LogFileAdapter(tmp_path), service="svc")

    assert [entry["message"] for entry in result.data["entries"]] == ["from b", "from a"]


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

    assert result.status == "FOUND" and not result.data["truncated"]
    assert demo.skipped_lines == 2


async def test_projection_cannot_corrupt_the_cache(demo: LogFileAdapter) -> None:
    first = await query(demo, service="payment-service", contains="deploy started")
    first.data["entries"][0]["labels"]["version"] = "REDACTED"

    again = await query(demo, service="payment-service", contains="deploy started")

    assert again.data["entries"][0]["labels"]["version"] == "v2.14.0"
