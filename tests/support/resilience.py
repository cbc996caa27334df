"""Shared pieces of the resilience tests: scenario and config files, the CLI, audit checks, MariaDB control.

Every fault test ends with the same three questions: did the run end with a typed outcome, is the audit
consistent (a runs row with an outcome, no invocation left STARTED), and did nothing print a traceback.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pymysql
import pytest

from tests.support.audit_reader import AuditReader
from tests.support.mysql import root_connection

MARIADBD = "/usr/sbin/mariadbd"
EXIT_CODES = {0, 1, 2, 10, 11, 12}
REPO = Path(__file__).resolve().parents[2]
QUERY = "payment-service 2026-11-30 02:10Z 起支付超时，请诊断。"
WINDOW = {"start": "2026-11-30T02:00:00Z", "end": "2026-11-30T03:00:00Z"}


# --- scenarios -------------------------------------------------------------------------------------------


def tool_call(
    call_id: str, tool: str, business: dict[str, Any], evaluates: str | None = None
) -> dict[str, Any]:
    previous = None if evaluates is None else {"tool_call_id": evaluates, "evaluation": "GAINED"}
    return {"id": call_id, "name": tool, "arguments": {"previous_observation": previous, "input": business}}


def no_conclusion_draft(scope: str = "the evidence sources of this run") -> str:
    """A Draft that is valid whatever the tools answered: no conclusion, an honest scoped NO_EVIDENCE."""
    return json.dumps(
        {
            "conclusion": None,
            "analysis": [
                {
                    "kind": "NEGATIVE_OBSERVATION",
                    "statement": "没有可用证据。",
                    "scope": scope,
                    "evidence": "NO_EVIDENCE",
                }
            ],
            "action_plan": [],
            "recommendations": [],
            "limitations": {"checked_scope": [scope], "missing_info": ["可用的证据"]},
        },
        ensure_ascii=False,
    )


def scenario(
    rounds: list[dict[str, Any]], name: str = "resilience", settings: dict[str, Any] | None = None
) -> dict[str, Any]:
    return {"name": name, "query": QUERY, "settings": settings or {}, "rounds": rounds}


def one_call_then_draft(call: dict[str, Any], delay_ms: int = 0, **kwargs: Any) -> dict[str, Any]:
    return scenario([{"tool_calls": [call], "delay_ms": delay_ms}, {"text": no_conclusion_draft()}], **kwargs)


def write_scenario(folder: Path, data: dict[str, Any], name: str = "scenario.json") -> Path:
    path = folder / name
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return path


# --- configuration ---------------------------------------------------------------------------------------


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, Path):
        value = str(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # a TOML basic string
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(f"no TOML spelling for {type(value).__name__}")


def write_config(path: Path, sections: dict[str, dict[str, Any]]) -> Path:
    """A TOML config; a dict value inside a section becomes a sub-table (e.g. `[logs.services]`)."""
    lines: list[str] = []
    for section, values in sections.items():
        lines.append(f"[{section}]")
        lines += [f"{key} = {_toml_value(v)}" for key, v in values.items() if not isinstance(v, dict)]
        for key, table in ((k, v) for k, v in values.items() if isinstance(v, dict)):
            lines.append(f"[{section}.{key}]")
            lines += [f"{json.dumps(k)} = {_toml_value(v)}" for k, v in table.items()]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


# --- the CLI ---------------------------------------------------------------------------------------------


@dataclass
class CliRun:
    code: int
    out: str
    err: str
    seconds: float

    @property
    def result(self) -> dict[str, Any]:
        result: dict[str, Any] = json.loads(self.out)
        return result


def run_cli(capsys: pytest.CaptureFixture[str], *args: str | Path) -> CliRun:
    """`diagnose ...` in this process. An exception escaping `main` is what a user sees as a traceback."""
    from console.commands.main import main

    capsys.readouterr()
    started = time.monotonic()
    code = main([str(a) for a in args])
    seconds = time.monotonic() - started
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err, captured.err
    return CliRun(code, captured.out, captured.err, seconds)


def cli_env(tmp_path: Path, home: Path | None = None) -> dict[str, str]:
    """The environment for a `diagnose` process: none of the caller's DIAGNOSE_* settings, its home
    (`tmp_path` unless given) and state folder under the test's folder, and this checkout importable."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DIAGNOSE_")}
    env.update(HOME=str(home or tmp_path), XDG_STATE_HOME=str(tmp_path / "state"), PYTHONPATH=str(REPO))
    return env


def run_cli_process(
    *args: str | Path,
    env: dict[str, str] | None = None,
    timeout_s: float = 60,
    prelude: str = "",
    cwd: Path = REPO,
    stdin: int | None = None,
) -> CliRun:
    """`python -m console ...` as its own process (`prelude` runs first, e.g. to shorten a test timeout;
    `cwd`: where relative paths land, the repository by default)."""
    code = f"import sys\n{prelude}\nfrom console.commands.main import main\nsys.exit(main(sys.argv[1:]))"
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", code, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env=env,
        cwd=cwd,
        stdin=stdin,
    )
    return CliRun(done.returncode, done.stdout, done.stderr, time.monotonic() - started)


@dataclass
class LogsCallRun:
    """A run of one query_logs call against a log server, as `diagnose run` left it."""

    code: int
    result: dict[str, Any]
    invocation: dict[str, Any]
    seconds: float


def run_one_logs_call(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    logs: dict[str, Any],
    call: dict[str, Any],
    backend_text: str,
    deadline_s: float = 60.0,
) -> LogsCallRun:
    """`diagnose run` with one query_logs call against `[logs]`, then a Draft. The audit must be
    consistent, the call one invocation with one `tool_finished` event of its status, and
    `backend_text` (what the server answered) nowhere in stdout, stderr, the events or the audit row."""
    config = write_config(tmp_path / "config.toml", {"budget": {"deadline_s": deadline_s}, "logs": logs})
    audit, events_file = tmp_path / "audit.db", tmp_path / "events.ndjson"
    run = run_cli(
        capsys,
        "run", "--scenario", write_scenario(tmp_path, one_call_then_draft(call)), "--config", config,
        "--json", "--audit-db", audit, "--events", events_file,
    )  # fmt: skip
    result = run.result
    assert_audit_consistent(audit, [result["run_id"]])
    (invocation,) = AuditReader(audit).invocations(result["run_id"])
    for text in (run.out, run.err, events_file.read_text(encoding="utf-8"), json.dumps(invocation)):
        assert backend_text not in text
    finished = [event for event in read_events(events_file) if event["type"] == "tool_finished"]
    assert len(finished) == 1
    assert finished[0]["status"] == invocation["status"]
    return LogsCallRun(run.code, result, invocation, run.seconds)


# --- the audit -------------------------------------------------------------------------------------------


def assert_audit_consistent(db: Path, run_ids: Sequence[str] | None = None) -> dict[str, dict[str, Any]]:
    """Every run (or the given ones) has a row with an outcome and a finish; no invocation is STARTED."""
    audit = AuditReader(db)
    runs = {r["run_id"]: r for r in audit.query("SELECT * FROM runs")}
    wanted = list(runs) if run_ids is None else list(run_ids)
    for run_id in wanted:
        assert run_id in runs, f"run {run_id} has no audit row"
        row = runs[run_id]
        assert row["outcome"] is not None, row
        assert row["finished_at"] is not None, row
    started = audit.query("SELECT run_id, tool_call_id, tool FROM invocations WHERE status = 'STARTED'")
    assert started == [], f"invocations left STARTED: {started}"
    return {run_id: runs[run_id] for run_id in wanted}


def read_events(path: Path) -> list[dict[str, Any]]:
    """NDJSON as the contract defines it: one event per `\\n`-terminated line."""
    data = path.read_bytes()
    assert data.endswith(b"\n")
    return [json.loads(line) for line in data.split(b"\n")[:-1]]


# --- MariaDB ---------------------------------------------------------------------------------------------


def mariadb_running() -> bool:
    return subprocess.run(["start-stop-daemon", "--status", "--exec", MARIADBD], check=False).returncode == 0


def mariadb_ready() -> bool:
    try:
        root_connection().close()
    except (pymysql.err.MySQLError, OSError):
        return False
    return True


def stop_mariadb() -> None:
    """TERM, then wait (up to 30 s, then KILL) until the server process is gone."""
    subprocess.run(
        [
            "start-stop-daemon",
            "--stop",
            "--quiet",
            "--oknodo",
            "--retry",
            "TERM/30/KILL/5",
            "--exec",
            MARIADBD,
        ],
        check=True,
        timeout=60,
    )


def start_mariadb(timeout_s: float = 60.0) -> None:
    """Start (if needed) and wait until the port accepts a login: a test must never leave it down."""
    subprocess.run(
        ["start-stop-daemon", "--start", "--quiet", "--oknodo", "--background", "--exec", MARIADBD],
        check=True,
        timeout=30,
    )
    deadline = time.monotonic() + timeout_s
    while not mariadb_ready():
        if time.monotonic() > deadline:
            raise RuntimeError(f"MariaDB did not come back within {timeout_s:.0f} s")
        time.sleep(0.1)


@contextlib.contextmanager
def mariadb_stopped() -> Iterator[None]:
    stop_mariadb()
    try:
        yield
    finally:
        start_mariadb()
