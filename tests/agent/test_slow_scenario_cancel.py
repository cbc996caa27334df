"""The built-in slow scenario: realistic model latency, so a trainer can show a cancel (exit 12).

(docs/contracts.md, "Execution result")
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agent.scenarios import resolve_scenario
from tests.support.audit_reader import AuditReader


def test_every_round_of_the_slow_scenario_takes_seconds() -> None:
    scenario = resolve_scenario("slow-model-cancel")
    assert len(scenario.rounds) >= 3
    assert all(r.delay_ms >= 2000 for r in scenario.rounds)


def test_sigint_during_the_slow_scenario_is_an_audited_cancel(tmp_path: Path) -> None:
    """Ctrl+C while round 2 waits for the model: CANCELLED, exit 12, call-1 kept in the snapshot."""
    events = tmp_path / "events.ndjson"
    audit_db = tmp_path / "audit.db"
    argv = [
        "run",
        "--scenario",
        "slow-model-cancel",
        "--json",
        "--events",
        str(events),
        "--audit-db",
        str(audit_db),
    ]
    proc = subprocess.Popen(
        [sys.executable, "-m", "console", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        lines = events.read_text(encoding="utf-8").splitlines() if events.exists() else []
        if any(json.loads(line).get("round") == 2 for line in lines if "model_round_started" in line):
            break
        time.sleep(0.05)
    else:
        proc.kill()
        pytest.fail("the run never reached its second model round")
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)

    assert proc.returncode == 12, err
    result = json.loads(out)
    assert (result["outcome"], result["stop_reason"]) == ("CANCELLED", "CANCELLED")
    assert [c["tool_call_id"] for c in result["progress"]["checks"]] == ["call-1"]
    audit = AuditReader(audit_db)
    run = audit.run(result["run_id"])
    rounds = [(r["round"], r["finished_at"] is None) for r in audit.model_rounds(result["run_id"])]
    assert run is not None
    assert run["finished_at"]
    assert (run["outcome"], run["stop_reason"], run["model"]) == (
        "CANCELLED",
        "CANCELLED",
        "scripted: slow-model-cancel",
    )
    assert rounds == [(1, 0), (2, 1)]  # round 2 was asked for and never answered
