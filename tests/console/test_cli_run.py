"""`diagnose run` / `diagnose scenarios` as scripts and operators use them.

(docs/contracts.md, "Execution result", "CLI")
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agent.scenarios import builtin_scenarios
from console.commands.main import main
from tests.support.audit_reader import AuditReader
from tests.support.expected import EXPECTED


def test_every_builtin_scenario_has_an_expectation() -> None:
    assert sorted(s.name for s in builtin_scenarios()) == sorted(EXPECTED)


def test_scenarios_command_lists_name_and_title(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["scenarios"]) == 0
    out = capsys.readouterr().out
    for scenario in builtin_scenarios():
        assert scenario.name in out
        assert scenario.title in out


# slow-model-cancel waits 2.5-3 s per model round by design (~10 s a run): its whole run is a `long`
# variant; its cancel, the behaviour it exists for, is tests/agent/test_slow_scenario_cancel.py.
SLOW_BUILTINS = frozenset({"slow-model-cancel"})


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(name, marks=pytest.mark.long) if name in SLOW_BUILTINS else name
        for name in sorted(EXPECTED)
    ],
)
def test_builtin_scenario_run_json(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    outcome, stop_reason, exit_code, invoked = EXPECTED[name]
    audit_db = tmp_path / "audit.db"
    code = main(["run", "--scenario", name, "--json", "--audit-db", str(audit_db)])
    result = json.loads(capsys.readouterr().out)

    assert code == exit_code
    assert (result["outcome"], result["stop_reason"]) == (outcome, stop_reason)
    assert set(result) == {
        "run_id",
        "session_id",
        "outcome",
        "stop_reason",
        "draft",
        "progress",
        "usage",
        "failure",
    }
    audit = AuditReader(audit_db)
    run = audit.run(result["run_id"])
    ids = [i["tool_call_id"] for i in audit.invocations(result["run_id"])]
    open_rows = audit.query("SELECT run_id, tool_call_id FROM invocations WHERE status = 'STARTED'")
    assert run is not None
    assert (run["outcome"], run["stop_reason"], run["session_id"]) == (
        outcome,
        stop_reason,
        result["session_id"],
    )
    assert ids == invoked
    assert open_rows == []
    if outcome == "DRAFT":
        assert result["draft"] is not None
        assert result["failure"] is None
    else:
        assert result["draft"] is None


def test_query_flag_overrides_scenario_query_and_events_are_ndjson(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    events = tmp_path / "events.ndjson"
    code = main(
        [
            "run",
            "--scenario",
            "missing-context-zero-tools",
            "--query",
            "服务有点慢",
            "--events",
            str(events),
            "--json",
            "--audit-db",
            str(tmp_path / "a.db"),
        ]
    )
    result = json.loads(capsys.readouterr().out)
    assert code == 0
    lines = [json.loads(line) for line in events.read_text(encoding="utf-8").splitlines()]
    assert lines[0]["type"] == "run_started"
    assert lines[0]["query"] == "服务有点慢"
    assert lines[-1]["type"] == "run_finished"
    assert lines[-1]["result"] == result
    assert [e["seq"] for e in lines] == list(range(1, len(lines) + 1))
    assert {e["run_id"] for e in lines} == {result["run_id"]}


def test_blank_query_is_rejected_with_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["run", "--query", "   ", "--json", "--audit-db", str(tmp_path / "a.db")])
    result = json.loads(capsys.readouterr().out)
    assert code == 2
    assert (result["outcome"], result["stop_reason"], result["usage"]["model_calls"]) == (
        "REJECTED",
        "QUERY_BLANK",
        0,
    )


def test_invalid_previous_turn_file_is_rejected(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    turn = tmp_path / "turn.json"
    turn.write_text('{"query": "q", "conclusion": null}', encoding="utf-8")
    code = main(
        [
            "run",
            "--query",
            "继续排查",
            "--previous-turn",
            str(turn),
            "--json",
            "--audit-db",
            str(tmp_path / "a.db"),
        ]
    )
    assert code == 2
    assert json.loads(capsys.readouterr().out)["stop_reason"] == "PREVIOUS_TURN_INVALID"


def test_unknown_scenario_is_a_setup_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--scenario", "no-such-scenario", "--audit-db", str(tmp_path / "a.db")]) == 3
    err = capsys.readouterr().err
    assert "unknown scenario 'no-such-scenario'" in err
    assert "evidence-backed-diagnosis" in err


def test_corrupt_audit_file_refuses_to_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "audit.db"
    bad.write_bytes(os.urandom(4096))
    assert main(["run", "--scenario", "missing-context-zero-tools", "--audit-db", str(bad)]) == 3
    assert "audit unavailable" in capsys.readouterr().err


def test_sigint_cancels_the_run_with_exit_12(tmp_path: Path) -> None:
    """A real process: SIGINT during a slow model round ends the run CANCELLED, audited, exit 12."""
    scenario = tmp_path / "slow.yaml"
    scenario.write_text(
        "name: slow\nquery: 'payment-service 超时'\nrounds:\n  - text: '{}'\n    delay_ms: 30000\n",
        encoding="utf-8",
    )
    events = tmp_path / "events.ndjson"
    audit_db = tmp_path / "audit.db"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "console",
            "run",
            "--scenario",
            str(scenario),
            "--json",
            "--events",
            str(events),
            "--audit-db",
            str(audit_db),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if events.exists() and "model_round_started" in events.read_text(encoding="utf-8"):
            break
        time.sleep(0.05)
    else:
        proc.kill()
        pytest.fail("the run never started its model round")
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 12, err
    result = json.loads(out)
    assert (result["outcome"], result["stop_reason"]) == ("CANCELLED", "CANCELLED")
    run = AuditReader(audit_db).run(result["run_id"])
    assert run is not None
    assert run["outcome"] == "CANCELLED"
