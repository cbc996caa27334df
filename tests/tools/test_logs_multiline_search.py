"""Multi-line records searched through the byte search: the answer equals reading every record whole.

The scan lowers chunks and reads only the records around a word's hits, walking back to a record's
head and on to the next one, and keeps a record running across pieces pending. Here pieces are made
tiny so records straddle them in every way, and the answers are compared with the plain rule: split
the file into records (a stamped line and the lines below it), keep those that match.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tools.adapter import ToolRequest
from tools.input_models import QueryLogsInput
from tools.logs import file_scan
from tools.logs.file_source import LogFileAdapter

HEAD = re.compile(r"2026-11-30 02:(\d\d):(\d\d),000 (ERROR|WARN|INFO) ")
RANKS = {"INFO": 2, "WARN": 3, "ERROR": 4}
WORDS = ["pool", "Timeout", "caused", "at com.example", "支付", "x"]


@st.composite
def text_logs(draw: st.DrawFn) -> list[str]:
    """A log4j-style file: stamped heads in time order (ties included), each with 0-6 lines below."""
    lines: list[str] = []
    if draw(st.booleans()):
        lines.append("\tat orphan.Line(before the first record)")
    second = 0
    for _ in range(draw(st.integers(1, 25))):
        second += draw(st.sampled_from([0, 0, 1, 7]))
        level = draw(st.sampled_from(["ERROR", "WARN", "INFO"]))
        words = " ".join(draw(st.lists(st.sampled_from(WORDS), max_size=3)))
        lines.append(
            f"2026-11-30 02:{second // 60 % 60:02d}:{second % 60:02d},000 {level} [main] app - {words}"
        )
        for _ in range(draw(st.integers(0, 6))):
            frame = " ".join(draw(st.lists(st.sampled_from(WORDS), max_size=2)))
            lines.append(draw(st.sampled_from(["\tat ", "Caused by: ", "  ", "    ... "])) + frame)
    return lines


def reference(lines: list[str], contains: str | None, level: str | None) -> tuple[int, list[str]]:
    """(matched, newest-first messages as shown: 12 lines within 500 characters)."""
    records: list[tuple[int, list[str]]] = []
    for line in lines:
        if not line.strip():
            continue  # blank lines belong to no record
        head = HEAD.match(line)
        if head is not None:
            records.append((int(head[1]) * 60 + int(head[2]), [line]))
        elif records:
            records[-1][1].append(line)
    matches: list[tuple[int, int, str]] = []
    rank_second, rank = -1, 0
    for order, (second, text) in enumerate(records):
        whole = "\n".join(text)
        if contains is not None and contains.lower() not in whole.lower():
            continue
        found = HEAD.match(text[0])
        assert found is not None
        if level is not None and RANKS[found[3]] < RANKS[level]:
            continue
        rank, rank_second = (rank + 1, rank_second) if second == rank_second else (0, second)
        shown = "\n".join(whole[:500].split("\n")[:12])
        matches.append((second * 1_000_000_000 + rank, order, shown))
    matches.sort(reverse=True)
    return len(matches), [shown for _, _, shown in matches]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    lines=text_logs(),
    contains=st.sampled_from([None, *WORDS, "CAUSED BY", "absent"]),
    level=st.sampled_from([None, "WARN", "ERROR"]),
    piece=st.sampled_from([1, 30, 90, 400]),
    block=st.sampled_from([16, 120, 4096]),
)
async def test_search_around_hits_equals_reading_every_record(
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    lines: list[str],
    contains: str | None,
    level: str | None,
    piece: int,
    block: int,
) -> None:
    path = tmp_path_factory.mktemp("multiline") / "app.log"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    monkeypatch.setattr(file_scan, "PIECE_BYTES", piece)
    adapter = LogFileAdapter(path, block_bytes=block)
    fields: dict[str, Any] = {
        "service": "app",
        "start": "2026-11-30T02:00:00Z",
        "end": "2026-11-30T03:00:00Z",
        "contains": contains,
        "level": level,
        "limit": 200,
    }

    result = await adapter.execute(ToolRequest("r", "s", "c", "query_logs", QueryLogsInput(**fields)))

    matched, shown = reference(lines, contains, level)
    assert result.data["matched"] == matched
    assert [entry["message"] for entry in result.data["entries"]] == shown


async def test_a_multi_line_json_object_is_found_by_a_word_on_any_of_its_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An Elasticsearch-style object over 41 lines, pieces of a few lines: a word on its 40th line
    finds it whichever piece the word falls in."""
    frames = [f'"at org.example.Frame{n}.run(Frame{n}.java:{n})",' for n in range(37)]
    record = [
        '{"timestamp": "2026-11-30T02:00:00,000+0000", "level": "ERROR", "message": "boom" ,',
        '"stacktrace": ["java.lang.Exception: outer",',
        *frames,
        '"Caused by: java.lang.RuntimeException: the cause",',
        '"... 37 more"] }',
    ]
    neighbours = ['{"timestamp": "2026-11-30T02:00:01,000+0000", "level": "INFO", "message": "after"}']
    path = tmp_path / "es.log"
    path.write_text("\n".join(record + neighbours) + "\n")
    for piece in (1, 64, 300, 16 * 1024):
        monkeypatch.setattr(file_scan, "PIECE_BYTES", piece)
        request = QueryLogsInput(
            service="es",
            start="2026-11-30T02:00:00Z",
            end="2026-11-30T02:01:00Z",
            contains="RUNTIMEEXCEPTION",
        )

        result = await LogFileAdapter(path).execute(ToolRequest("r", "s", "c", "query_logs", request))

        assert len(record) == 41
        assert "RuntimeException" in record[39]
        assert [entry["level"] for entry in result.data["entries"]] == ["ERROR"], piece


async def test_a_word_split_across_a_cri_lines_pieces_is_found(tmp_path: Path) -> None:
    """The runtime cuts long lines anywhere, even inside a word: the pieces are joined first."""
    path = tmp_path / "api" / "0.log"
    path.parent.mkdir()
    path.write_text(
        "2026-11-30T02:00:00.100000000Z stderr P dial tcp 10.0.0.7:5432: conn\n"
        "2026-11-30T02:00:00.100000000Z stderr F ection refused\n"
        "2026-11-30T02:00:01.000000000Z stdout F ready\n"
    )
    request = QueryLogsInput(
        service="api", start="2026-11-30T02:00:00Z", end="2026-11-30T02:01:00Z", contains="Connection Refused"
    )

    result = await LogFileAdapter(path).execute(ToolRequest("r", "s", "c", "query_logs", request))

    assert [entry["message"] for entry in result.data["entries"]] == [
        "dial tcp 10.0.0.7:5432: connection refused"
    ]
