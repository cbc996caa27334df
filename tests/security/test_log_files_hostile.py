"""Log files are someone else's bytes: whatever they hold, query_logs answers with typed skips and
keeps every readable neighbour, never follows a link out of its folder, and never lets one line cost
far more memory than its bytes (docs/RELIABILITY.md, "Threat model").
"""

from __future__ import annotations

import gzip
import json
import logging
import os
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tools.adapter import AdapterResult, ToolRequest
from tools.boundary import ToolBoundary
from tools.input_models import QueryLogsInput
from tools.logs.file_source import LogFileAdapter
from tools.redaction import REDACTED, Redactor

DAY = {"start": "2026-11-30T00:00:00Z", "end": "2026-11-30T06:00:00Z"}
# One readable record per format family, each at its own minute of the day.
GOOD: dict[str, tuple[str, list[str]]] = {
    "app.ndjson": (
        "app",
        [
            json.dumps({"ts": f"2026-11-30T02:{n:02d}:00Z", "level": "ERROR", "message": f"good-{n}"})
            for n in range(5)
        ],
    ),
    "server.log": (
        "server",
        [f"2026-11-30 02:{n:02d}:00,000 ERROR [main] c.e.App - good-{n}" for n in range(5)],
    ),
    "auth.log": ("sshd", [f"Nov 30 02:{n:02d}:00 host sshd[1]: good-{n}" for n in range(5)]),
    "access.log": (
        "access",
        [f'10.0.0.1 - - [30/Nov/2026:02:{n:02d}:00 +0000] "GET /good-{n} HTTP/1.1" 500 1' for n in range(5)],
    ),
}


async def ask(adapter: LogFileAdapter, **fields: Any) -> AdapterResult:
    fields = {**DAY, "limit": 200, **fields}
    return await adapter.execute(ToolRequest("r", "s", "c", "query_logs", QueryLogsInput(**fields)))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    name=st.sampled_from(sorted(GOOD)),
    garbage=st.lists(st.binary(max_size=300), min_size=1, max_size=6),
    block_bytes=st.sampled_from([7, 64, 4096]),
    contains=st.sampled_from([None, "good", "GOOD-3"]),
)
async def test_any_bytes_between_records_are_typed_skips_and_every_neighbour_is_found(
    tmp_path_factory: pytest.TempPathFactory,
    name: str,
    garbage: list[bytes],
    block_bytes: int,
    contains: str | None,
) -> None:
    """Garbage lines between the records of each format family: no exception, every record found
    by its first line (in a multi-line format a garbage line may join the record above, as any
    line without a stamp does, and is then searched with it)."""
    folder = tmp_path_factory.mktemp("hostile")
    service, records = GOOD[name]
    body = b""
    for index, record in enumerate(records):
        body += record.encode() + b"\n"
        body += garbage[index % len(garbage)] + b"\n"
    path = folder / name
    path.write_bytes(body)
    os.utime(path, (1_796_040_000, 1_796_040_000))  # 2026-11-30 12:00Z: the year-less stamps' year
    adapter = LogFileAdapter(path, block_bytes=block_bytes)

    result = await ask(adapter, service=service, contains=contains)

    wanted = [n for n in range(5) if contains in (None, "good") or f"good-{n}" == contains.lower()]
    found = sorted(entry["ts"] for entry in result.data["entries"] if "good" in entry["message"])
    assert [stamp[11:16] for stamp in found] == [f"02:{n:02d}" for n in wanted]
    assert adapter.skipped_lines >= 0  # counted, by reason, never raised


# ------------------------------------------------------------------ one line's cost is bounded
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    member=st.sampled_from(['"a":1,', '"k":"",', '"n":null,', '"x":[],', '"o":{},']),
    container=st.sampled_from(["object", "array"]),
)
async def test_a_line_of_countless_tiny_json_members_costs_about_its_bytes(
    tmp_path_factory: pytest.TempPathFactory, member: str, container: str
) -> None:
    """A 4 MiB line of hundreds of thousands of tiny members (under the 16 MiB line cap) is skipped
    as too costly to decode, not decoded into hundreds of MiB of objects; its neighbours are read."""
    folder = tmp_path_factory.mktemp("costly")
    count = 4 * 1024 * 1024 // len(member)
    if container == "object":
        members = member * count
        crafted = '{"ts":"2026-11-30T02:01:00Z",' + members + '"message":"crafted"}'
    else:
        crafted = '{"ts":"2026-11-30T02:01:00Z","message":"crafted","x":[' + "1," * count + "1]}"
    good = [
        json.dumps({"ts": "2026-11-30T02:00:00Z", "service": "app", "message": "before"}),
        crafted,
        json.dumps({"ts": "2026-11-30T02:02:00Z", "service": "app", "message": "after"}),
    ]
    path = folder / "app.ndjson"
    path.write_text("\n".join(good) + "\n")
    adapter = LogFileAdapter(path)
    tracemalloc.start()
    try:
        result = await ask(adapter, service="app")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()

    assert [entry["message"] for entry in result.data["entries"]] == ["after", "before"]
    assert adapter.skipped_by_reason == {"TOO_COSTLY": 1}
    assert peak < 6 * len(crafted), (
        f"{peak / 1024 / 1024:.1f} MiB for a {len(crafted) / 1024 / 1024:.1f} MiB line"
    )


# ------------------------------------------------------------------ links out of the folder
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    name=st.sampled_from(["secrets.ndjson", "app.log", "messages", "old.log.1.gz", "x.jsonl"]),
    depth=st.integers(0, 2),
    target=st.sampled_from(["outside file", "outside folder", "inside file", "dangling"]),
)
async def test_a_link_leading_out_of_the_log_folder_is_skipped_and_logged(
    tmp_path_factory: pytest.TempPathFactory,
    caplog: pytest.LogCaptureFixture,
    name: str,
    depth: int,
    target: str,
) -> None:
    """Links of every log-like name, at any depth: one that resolves outside the folder (a file or
    a folder) is never read and is listed as OUTSIDE_FOLDER; one that stays inside is read."""
    base = tmp_path_factory.mktemp("links")
    folder = base / "logs"
    nested = folder.joinpath(*[f"d{level}" for level in range(depth)])
    nested.mkdir(parents=True)
    secret = json.dumps({"ts": "2026-11-30T02:00:00Z", "service": "app", "message": "outside secret"})
    (base / "outside.ndjson").write_text(secret + "\n")
    (base / "outside-folder").mkdir()
    (base / "outside-folder" / "x.ndjson").write_text(secret + "\n")
    inside = json.dumps({"ts": "2026-11-30T02:05:00Z", "service": "app", "message": "inside"})
    (folder / "own.ndjson").write_text(inside + "\n")
    link = nested / name
    link.symlink_to(
        {
            "outside file": base / "outside.ndjson",
            "outside folder": base / "outside-folder",
            "inside file": folder / "own.ndjson",
            "dangling": folder / "missing.ndjson",
        }[target]
    )
    adapter = LogFileAdapter(folder)

    with caplog.at_level(logging.WARNING, logger="tools.logs.file_source"):
        result = await ask(adapter, service="app")

    messages = [entry["message"] for entry in result.data["entries"]]
    assert "outside secret" not in messages
    assert messages.count("inside") == (2 if target == "inside file" else 1)  # read by its content
    outside = [item.source for item in adapter.skipped_files if item.reason == "OUTSIDE_FOLDER"]
    if target.startswith("outside"):
        assert outside == [str(link.relative_to(folder))]
        assert "OUTSIDE_FOLDER" in caplog.text
    else:
        assert outside == []


async def test_a_gzip_bomb_costs_neither_memory_nor_time_past_the_tools_limit(tmp_path: Path) -> None:
    """1 GiB of one zero-filled line in a 1 MiB gzip file (64 members of 16 MiB each): the line is
    skipped in chunks, memory stays bounded, and the scan ends with the call (a 0.1 s tool limit)."""
    member = gzip.compress(b"\0" * (16 * 1024 * 1024), compresslevel=1)
    first = gzip.compress(b'{"ts":"2026-11-30T02:00:00Z","message":"before"}\n')
    (tmp_path / "bomb.log.gz").write_bytes(first + member * 64)
    boundary = ToolBoundary({"query_logs": LogFileAdapter(tmp_path)}, timeout_s=0.1)
    request: dict[str, Any] = {"service": "bomb", **DAY, "limit": 10}
    tracemalloc.start()
    try:
        outcome = await boundary.invoke(ToolRequest("r", "s", "c", "query_logs", QueryLogsInput(**request)))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()

    assert (outcome.status, outcome.error_code) == ("ERROR", "TIMEOUT")
    assert peak < 80 * 1024 * 1024, f"{peak / 2**20:.1f} MiB"


# ------------------------------------------------------------------ redacted before it is cut
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    padding=st.integers(440, 499),
    password=st.text(
        alphabet="abcdefghijkmnpqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789", min_size=10, max_size=24
    ),
    multiline=st.booleans(),
)
async def test_a_credential_across_the_entrys_cut_is_redacted_before_the_cut(
    tmp_path_factory: pytest.TempPathFactory, padding: int, password: str, multiline: bool
) -> None:
    """A DSN whose password straddles the 500-character cut of an entry: cut first, the rule would
    miss it (no `@` left) and show the password's first half; redacted first, nothing of it shows.
    So does a label whose key names a secret, however its value is spelt."""
    folder = tmp_path_factory.mktemp("cut")
    dsn = f"mysql://app:{password}@db.internal:3306/shop"
    message = (
        "." * padding + " connecting to " + dsn + (" and more\n\tat frame" if multiline else " and more")
    )
    record = {"ts": "2026-11-30T02:00:00Z", "service": "app", "message": message, "db_password": password}
    (folder / "app.ndjson").write_text(json.dumps(record) + "\n")
    adapter = LogFileAdapter(folder, redactor=Redactor())

    [entry] = (await ask(adapter, service="app")).data["entries"]

    assert entry["cut"] is True
    assert len(entry["message"]) <= 500
    assert password[:4] not in entry["message"].split("connecting to")[-1]
    assert entry["labels"]["db_password"] == REDACTED
