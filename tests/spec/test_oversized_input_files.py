"""Oversized input files are typed rejections (issue 21, item 8).

`--query-file` (a file or standard input) and `--previous-turn` are read at most their configured
limit or 1 MiB, whichever is larger, and one byte (issue 32, item 16: a larger configured limit is
reachable from a file). A file past that cap is rejected as an inline input over its limit is:
REJECTED / QUERY_TOO_LARGE or PREVIOUS_TURN_TOO_LARGE, exit 2, zero model calls, a `run_finished`
event and an audit row keeping the query's beginning, and nothing more of the file is ever read.
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from agent.input_files import MIB, InputFileError, input_file_cap, read_input_file
from tests.support.resilience import assert_audit_consistent, read_events, run_cli, write_config

FOLLOW_UP = "回滚之后还有超时吗？"
CAP = input_file_cap(4096)  # the default query limit's read cap: 1 MiB
TURN = {
    "query": "payment-service 超时，请诊断。",
    "conclusion": None,
    "limitations": {"checked_scope": ["日志"], "missing_info": ["数据库锁等待"]},
}


def _oversized_query(folder: Path) -> Path:
    """A query file one byte past the cap, starting with recognisable text."""
    path = folder / "query.txt"
    start = "支付超时 payment-service ".encode()
    path.write_bytes(start + b"x" * (CAP + 1 - len(start)))
    return path


def _check_rejected(
    run_code: int, result: dict[str, object], events: Path, audit: Path, reason: str
) -> dict[str, object]:
    assert run_code == 2
    assert (result["outcome"], result["stop_reason"]) == ("REJECTED", reason)
    assert result["usage"] == {
        "model_calls": 0,
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "total_tokens": 0,
    }
    assert [e["type"] for e in read_events(events)] == ["run_finished"]
    row = assert_audit_consistent(audit, [str(result["run_id"])])[str(result["run_id"])]
    assert (row["outcome"], row["stop_reason"]) == ("REJECTED", reason)
    return row


def test_a_query_file_over_the_read_cap_is_rejected_as_too_large_and_audited(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    query = _oversized_query(tmp_path)
    audit, events = tmp_path / "audit.db", tmp_path / "events.ndjson"

    run = run_cli(capsys, "run", "--query-file", query, "--json", "--audit-db", audit, "--events", events)

    row = _check_rejected(run.code, run.result, events, audit, "QUERY_TOO_LARGE")
    assert run.result["failure"] == {
        "code": "QUERY_TOO_LARGE",
        "detail": f"the query is more than {MIB} bytes; the limit is 4096",
    }
    # The audit keeps what the query began with, cut to the query limit like any rejected query.
    assert str(row["query"]).startswith("支付超时 payment-service xxx")
    assert str(row["query"]).endswith("…")
    assert len(str(row["query"]).encode()) <= 4096 + len("…".encode())


LARGE_LIMITS = {"max_query_bytes": 3_000_000, "max_input_bytes": 3_100_000, "max_run_bytes": 8 * MIB}


@pytest.mark.parametrize("source", ["file", "stdin"])
def test_a_configured_query_limit_above_a_mebibyte_is_reachable_from_a_query_file(
    source: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, a 1 MiB read cap won over `max_query_bytes = 3000000`: every query file past 1 MiB was
    rejected although the configuration allowed it. The cap now follows the configured limit."""
    config = write_config(tmp_path / "config.toml", {"budget": LARGE_LIMITS})
    query = ("支付超时 payment-service " * 60_000).encode()  # 1.8 MB, under the 3 MB limit
    path = tmp_path / "query.txt"
    path.write_bytes(query)
    if source == "stdin":
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(query)))
    events = tmp_path / "events.ndjson"

    run = run_cli(
        capsys, "run", "--query-file", path if source == "file" else "-", "--config", config, "--json",
        "--audit-db", tmp_path / "audit.db", "--events", events,
    )  # fmt: skip

    assert run.result["outcome"] != "REJECTED", run.result["failure"]
    (started,) = [e for e in read_events(events) if e["type"] == "run_started"]
    assert started["query"].encode() == query, "the whole query ran, never cut"


def test_past_a_configured_limit_above_a_mebibyte_the_file_is_read_no_further(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A query is never run cut short: past the cap (the configured limit) the file was not read whole."""
    config = write_config(tmp_path / "config.toml", {"budget": LARGE_LIMITS})
    path = tmp_path / "query.txt"
    path.write_bytes(b"q" * (LARGE_LIMITS["max_query_bytes"] + 1))
    audit, events = tmp_path / "audit.db", tmp_path / "events.ndjson"

    run = run_cli(
        capsys, "run", "--query-file", path, "--config", config, "--json", "--audit-db", audit,
        "--events", events,
    )  # fmt: skip

    _check_rejected(run.code, run.result, events, audit, "QUERY_TOO_LARGE")
    assert run.result["failure"]["detail"] == "the query is more than 3000000 bytes; the limit is 3000000"


def test_a_configured_previous_turn_limit_above_a_mebibyte_is_reachable_from_its_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(
        tmp_path / "config.toml",
        {"budget": {**LARGE_LIMITS, "max_previous_turn_bytes": 2_000_000, "max_input_bytes": 2_100_000}},
    )
    turn = tmp_path / "turn.json"
    padded = {**TURN, "limitations": {"checked_scope": ["日志" * 200_000], "missing_info": ["数据库锁等待"]}}
    turn.write_text(json.dumps(padded, ensure_ascii=False), encoding="utf-8")  # 1.2 MB
    events = tmp_path / "events.ndjson"

    run = run_cli(
        capsys, "run", "--query", FOLLOW_UP, "--previous-turn", turn, "--config", config, "--json",
        "--audit-db", tmp_path / "audit.db", "--events", events,
    )  # fmt: skip

    assert run.result["outcome"] != "REJECTED", run.result["failure"]
    (started,) = [e for e in read_events(events) if e["type"] == "run_started"]
    assert started["previous_turn"] == padded


def test_a_query_on_standard_input_over_the_read_cap_is_rejected_and_audited(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"q" * (3 * MIB))))
    audit, events = tmp_path / "audit.db", tmp_path / "events.ndjson"

    run = run_cli(capsys, "run", "--query-file", "-", "--json", "--audit-db", audit, "--events", events)

    _check_rejected(run.code, run.result, events, audit, "QUERY_TOO_LARGE")


def test_a_previous_turn_file_over_the_read_cap_is_rejected_as_too_large_and_audited(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    turn = tmp_path / "turn.json"
    padded = {**TURN, "limitations": {"checked_scope": ["日志" * MIB], "missing_info": ["数据库锁等待"]}}
    turn.write_text(json.dumps(padded, ensure_ascii=False), encoding="utf-8")
    audit, events = tmp_path / "audit.db", tmp_path / "events.ndjson"

    run = run_cli(
        capsys,
        "run",
        "--query",
        FOLLOW_UP,
        "--previous-turn",
        turn,
        "--json",
        "--audit-db",
        audit,
        "--events",
        events,
    )

    row = _check_rejected(run.code, run.result, events, audit, "PREVIOUS_TURN_TOO_LARGE")
    assert run.result["failure"] == {
        "code": "PREVIOUS_TURN_TOO_LARGE",
        "detail": f"the previous turn is more than {MIB} bytes; the limit is 8192",
    }
    assert row["query"] == FOLLOW_UP


def test_a_huge_file_is_rejected_after_reading_only_the_cap_and_one_byte(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    huge = tmp_path / "huge.txt"
    with huge.open("wb") as stream:  # sparse: 64 GiB that take no disk and would take no time to fill
        stream.truncate(64 * 1024 * MIB)

    with pytest.raises(InputFileError) as caught:
        read_input_file(huge, what="query file", limit=CAP)
    assert len(getattr(caught.value, "head", b"")) == CAP + 1, "what was read, and only that"

    audit, events = tmp_path / "audit.db", tmp_path / "events.ndjson"
    run = run_cli(capsys, "run", "--query-file", huge, "--json", "--audit-db", audit, "--events", events)
    _check_rejected(run.code, run.result, events, audit, "QUERY_TOO_LARGE")


def test_a_query_file_exactly_at_the_cap_is_judged_by_its_real_size(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    query = tmp_path / "query.txt"
    query.write_bytes(b"q" * CAP)
    audit, events = tmp_path / "audit.db", tmp_path / "events.ndjson"

    run = run_cli(capsys, "run", "--query-file", query, "--json", "--audit-db", audit, "--events", events)

    _check_rejected(run.code, run.result, events, audit, "QUERY_TOO_LARGE")
    assert run.result["failure"]["detail"] == f"the query is {CAP} UTF-8 bytes; the limit is 4096"
