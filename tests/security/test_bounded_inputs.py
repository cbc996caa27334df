"""Hole 10: no input the operator hands to `diagnose` can crash it or hang it.

Every input file is read with a cap, FIFOs and devices are refused, and every decode, depth, range and
I/O error is a `diagnose:` message with the documented exit code; a closed stdout ends the command
quietly with the run's own exit code; `query_logs` windows are strict RFC 3339 within a sane range.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from agent.vocabulary import EXIT_CODE_OF, USAGE_ERROR, Outcome
from tests.support.audit_reader import AuditReader
from tests.support.resilience import REPO, cli_env, run_cli, run_cli_process
from tools.adapter import ToolError
from tools.boundary import ToolBoundary
from tools.definitions import ToolName

SCENARIO = "evidence-backed-diagnosis"


def test_a_100k_deep_previous_turn_is_rejected_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    run = run_cli(
        capsys,
        "run",
        "--scenario",
        SCENARIO,
        "--previous-turn",
        deep,
        "--audit-db",
        tmp_path / "a.db",
        "--json",
    )
    assert (run.code, run.result["stop_reason"]) == (2, "PREVIOUS_TURN_INVALID")


@pytest.mark.parametrize("option", ["--scenario", "--previous-turn", "--query-file", "--config"])
@pytest.mark.parametrize("special", ["/dev/zero", "fifo"])
def test_devices_and_fifos_are_refused_at_once(tmp_path: Path, option: str, special: str) -> None:
    path = special
    if special == "fifo":
        path = str(tmp_path / "input.fifo")
        os.mkfifo(path)  # nobody ever writes to it: reading would block forever
    args = ["run", "--audit-db", str(tmp_path / "a.db"), option, path]
    if option != "--scenario":
        args += ["--scenario", SCENARIO]
    run = run_cli_process(*args, env=cli_env(tmp_path), timeout_s=60)
    assert run.code == 3, run.err
    assert run.err.startswith("diagnose: ")
    assert "not a regular file" in run.err
    assert "Traceback" not in run.err


@pytest.mark.parametrize(
    ("option", "reason"),
    [("--previous-turn", "PREVIOUS_TURN_TOO_LARGE"), ("--query-file", "QUERY_TOO_LARGE"), ("--config", None)],
)
def test_an_oversized_input_file_is_refused_without_reading_it_whole(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str, reason: str | None
) -> None:
    """A run's input past the cap is a rejected run (exit 2, audited); a configuration, a setup error."""
    big = tmp_path / "big.txt"
    with big.open("wb") as handle:
        handle.truncate(3 * 1024 * 1024 * 1024)  # 3 GiB, sparse: reading it whole would be the bug
    run = run_cli(
        capsys, "run", "--scenario", SCENARIO, option, big, "--audit-db", tmp_path / "a.db", "--json"
    )
    if reason is None:
        assert run.code == 3
        assert "larger than" in run.err
    else:
        assert (run.code, run.result["outcome"], run.result["stop_reason"]) == (2, "REJECTED", reason)


@pytest.mark.parametrize("option", ["--previous-turn", "--query-file", "--config"])
def test_a_file_that_is_not_utf8_is_a_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str
) -> None:
    latin = tmp_path / "latin1.txt"
    latin.write_bytes("requête échouée".encode("latin-1"))
    run = run_cli(capsys, "run", "--scenario", SCENARIO, option, latin, "--audit-db", tmp_path / "a.db")
    assert run.code == 3
    assert "not UTF-8" in run.err


def test_events_that_cannot_be_written_are_an_error_but_the_result_is_not_lost(tmp_path: Path) -> None:
    """The events stream breaks mid-run (its reader, a named pipe's, goes away at once): the run goes on,
    its result is printed, and the command says what failed (exit 3)."""
    pipe = tmp_path / "events.fifo"
    os.mkfifo(pipe)
    # Opening blocks until the writer opens too; closing at once leaves the run's writes no reader.
    reader = threading.Thread(target=lambda: os.close(os.open(pipe, os.O_RDONLY)))
    reader.start()
    try:
        run = run_cli_process(
            "run",
            "--scenario",
            SCENARIO,
            "--json",
            "--events",
            pipe,
            "--audit-db",
            tmp_path / "a.db",
            env=cli_env(tmp_path),
        )
    finally:
        reader.join(timeout=60)
    assert run.code == 3
    assert json.loads(run.out)["outcome"] == "DRAFT"  # the result is printed all the same
    assert run.err.startswith(f"diagnose: the events file {pipe} could not be written")
    assert "Traceback" not in run.err


@pytest.mark.parametrize("events", [False, True])
def test_a_closed_stdout_ends_quietly_with_the_runs_own_exit_code(tmp_path: Path, events: bool) -> None:
    """`diagnose run ... | head -c1`: the reader leaves after one byte."""
    args = [sys.executable, "-m", "console", "run", "--scenario", "fenced-json-fails-closed", "--json"]
    args += ["--audit-db", str(tmp_path / "a.db")] + (["--events", "-"] if events else [])
    process = subprocess.Popen(
        args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=cli_env(tmp_path), cwd=REPO
    )
    assert process.stdout is not None
    assert process.stderr is not None
    assert len(process.stdout.read(1)) == 1
    process.stdout.close()  # what `head -c1` does after its byte
    err = process.stderr.read().decode()
    code = process.wait(timeout=60)
    assert err == "", err
    if not events:
        assert code == 1  # FAILED / INVALID_DRAFT, the run's own code
        return
    # The events were what the reader wanted: a run still going when it left is cancelled for it
    # (tests/console/test_cli_failure_paths.py); either way the code is the audited outcome's.
    outcome = AuditReader(tmp_path / "a.db").runs()[0]["outcome"]
    assert outcome in ("FAILED", "CANCELLED")
    assert code == EXIT_CODE_OF[Outcome(outcome)]


@pytest.mark.parametrize(
    "args",
    [
        ["runs", "--limit", str(10**20)],
        ["invocations", "--limit", "0"],
        ["prune", "--older-than", "99999999d"],
        ["invocations", "--since", "99999999h"],
    ],
)
def test_absurd_audit_arguments_are_usage_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str]
) -> None:
    from console.commands.main import main

    audit = tmp_path / "a.db"
    run_cli(capsys, "run", "--scenario", SCENARIO, "--audit-db", audit)
    with pytest.raises(SystemExit) as exited:
        main(["audit", *args, "--audit-db", str(audit)])
    err = capsys.readouterr().err
    assert exited.value.code == USAGE_ERROR
    assert "Traceback" not in err
    assert "diagnose audit" in err


@pytest.mark.parametrize(
    "stamp",
    [
        "0001-01-01T00:00:00Z",  # year 1: before any log
        "9999-12-31T23:59:59-23:59",  # past datetime's range once in UTC
        "2026-W48-1T02:00:00Z",  # ISO week date
        "20261130T021000Z",  # ISO basic format
        "2026-11-30T02:10:00",  # no offset: ambiguous
        "2026-11-30 02:10:00Z",  # a space instead of T
        "2026-02-30T02:10:00Z",  # no such day
    ],
)
def test_a_window_that_is_not_strict_rfc3339_in_range_is_invalid_input(stamp: str) -> None:
    business = {"service": "payment-service", "start": stamp, "end": "2026-11-30T03:00:00Z", "limit": 10}
    with pytest.raises(ToolError) as rejected:
        ToolBoundary.validate_input(ToolName.QUERY_LOGS, business)
    assert rejected.value.code == "INVALID_INPUT"


def test_strict_rfc3339_windows_are_still_accepted() -> None:
    for start in ("2026-11-30T02:10:00Z", "2026-11-30T10:10:00.123456789+08:00", "2026-11-30T02:10:00-00:30"):
        business = {"service": "payment-service", "start": start, "end": "2026-11-30T03:00:00Z", "limit": 10}
        assert ToolBoundary.validate_input(ToolName.QUERY_LOGS, business)
