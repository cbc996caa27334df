"""Bisection by time does not change an answer: a plain file (bisected to its window when its records
are in time order) answers exactly as the same file gzip-ed (which cannot be bisected and is read
whole), for windows anywhere and records out of order by less than the slack; a file whose parts are
out of order by hours (two logs concatenated) is noticed and read whole. What bisection cannot see
is a single record hours out of place away from its window (docs/logs.md, "Log files").
"""

from __future__ import annotations

import gzip
import json
import random
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tools.adapter import AdapterResult, ToolRequest
from tools.input_models import QueryLogsInput
from tools.logs.file_source import LogFileAdapter

LINES = 6000  # about 600 KiB: past the size from which a file is bisected
BASE = 1_796_000_000  # 2026-11-29T...Z, seconds


def record(second: int, n: int) -> str:
    return json.dumps(
        {
            "ts": f"{_utc(second)}",
            "service": ("pay", "order", "gateway")[n % 3],
            "level": ("INFO", "WARN", "ERROR")[n % 5 % 3],
            "message": f"request {n} handled {'timeout' if n % 7 == 0 else 'ok'} " + "x" * 30,
        }
    )


def _utc(second: int) -> str:
    return datetime.fromtimestamp(BASE + second, UTC).isoformat().replace("+00:00", "Z")


async def ask(path: Path, fields: dict[str, Any]) -> AdapterResult:
    adapter = LogFileAdapter(path, max_window_minutes=60 * 24, block_bytes=16 * 1024)
    return await adapter.execute(ToolRequest("r", "s", "c", "query_logs", QueryLogsInput(**fields)))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    seed=st.integers(0, 2**32),
    start=st.integers(0, 5 * LINES),
    length=st.sampled_from([0, 1, 60, 900, 3600, 6 * LINES]),
    contains=st.sampled_from([None, "timeout", "request 42"]),
    service=st.sampled_from(["pay", "gateway", "absent"]),
    level=st.sampled_from([None, "ERROR"]),
)
async def test_a_bisected_answer_equals_reading_the_file_whole(
    tmp_path_factory: pytest.TempPathFactory,
    seed: int,
    start: int,
    length: int,
    contains: str | None,
    service: str,
    level: str | None,
) -> None:
    jitter = random.Random(seed)
    seconds = [max(0, 5 * n + jitter.randint(-30, 30)) for n in range(LINES)]  # a little out of order
    text = "".join(record(second, n) + "\n" for n, second in enumerate(seconds)).encode()
    folder = tmp_path_factory.mktemp("bisect")
    plain, packed = folder / "app.ndjson", folder / "app.ndjson.gz"
    plain.write_bytes(text)
    packed.write_bytes(gzip.compress(text, compresslevel=1))
    fields = {
        "service": service,
        "start": _utc(start),
        "end": _utc(start + length),
        "contains": contains,
        "level": level,
        "limit": 200,
    }

    bisected, whole = await ask(plain, fields), await ask(packed, fields)

    assert bisected == whole


@pytest.mark.parametrize("later_first", [True, False])
async def test_two_logs_concatenated_out_of_order_are_read_whole(tmp_path: Path, later_first: bool) -> None:
    """The second day's log, then the first day's: the order probes see the fall and the file is read
    whole, so a window in either day finds its records."""
    days = [[86_400 + 10 * n for n in range(LINES // 2)], [10 * n for n in range(LINES // 2)]]
    if not later_first:
        days.reverse()
    seconds = days[0] + days[1]
    text = "".join(record(second, n) + "\n" for n, second in enumerate(seconds)).encode()
    plain, packed = tmp_path / "app.ndjson", tmp_path / "app.ndjson.gz"
    plain.write_bytes(text)
    packed.write_bytes(gzip.compress(text, compresslevel=1))
    for start in (600, 86_400 + 600):
        fields = {"service": "pay", "start": _utc(start), "end": _utc(start + 3600), "limit": 200}

        bisected, whole = await ask(plain, fields), await ask(packed, fields)

        expected = sum(
            1 for n, second in enumerate(seconds) if n % 3 == 0 and start <= second <= start + 3600
        )
        assert bisected == whole
        assert bisected.data["matched"] == expected > 100
