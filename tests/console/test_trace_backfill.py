"""`diagnose audit export --otlp URL`: audited runs sent as traces, so a team can backfill.

(docs/contracts.md, "Traces"). A run sent from the audit is the trace it was live: the same IDs,
names, parents and times (the audited timestamps), and every attribute the audit keeps. An
interrupted run ends INTERRUPTED; a run still going is not sent.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent.vocabulary import USAGE_ERROR
from audit import AuditSink
from audit.factory import open_audit_store
from audit.location import SqliteLocation
from console.traces.sink import instant_ns
from tests.support.audit_backends import AuditTarget
from tests.support.audit_events import Events
from tests.support.otlp import OtlpReceiver, ReceivedSpan, refused_endpoint
from tests.support.resilience import run_cli, write_config

STATUS_ERROR = 2
# What a live run's spans carry that the audit does not keep, so a backfill cannot send it:
# the protocol thresholds and counters, the run's bytes, the budget that ran out, and the deadline
# clock (a replay measures from the run's start to its finish).
NOT_AUDITED = frozenset(
    {
        "diagnose.protocol.max_consecutive_no_gain",
        "diagnose.protocol.max_protocol_violations",
        "diagnose.budget.run_bytes.used",
        "diagnose.budget.deadline.elapsed_s",
        "diagnose.budget.exhausted",
    }
)


def shape(span: ReceivedSpan) -> tuple[Any, ...]:
    return (
        span.name,
        span.trace_id,
        span.span_id,
        span.parent_id,
        span.kind,
        span.start_ns,
        span.end_ns,
        span.status_code,
    )


@pytest.mark.parametrize(
    "scenario", ["evidence-backed-diagnosis", "stop-required-ignored", "fenced-json-fails-closed"]
)
def test_an_audited_run_sent_later_is_the_trace_it_was_live(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, audit_target: AuditTarget, scenario: str
) -> None:
    config = write_config(tmp_path / "diagnose.toml", {"audit": {"url": audit_target.url}})
    with OtlpReceiver() as live, OtlpReceiver() as later:
        run = run_cli(
            capsys,
            "run",
            "--json",
            "--config",
            config,
            "--scenario",
            scenario,
            "--trace-endpoint",
            live.endpoint,
        )
        sent = run_cli(
            capsys,
            "audit",
            "export",
            "--config",
            config,
            "--otlp",
            later.endpoint,
            "--run",
            run.result["run_id"],
        )
        live_spans = sorted(live.spans(), key=lambda s: s.span_id)
        later_spans = sorted(later.spans(), key=lambda s: s.span_id)
    assert sent.code == 0, sent.err
    assert sent.err == f"sent 1 run ({len(live_spans)} spans) to {later.endpoint}\n"
    assert [shape(s) for s in later_spans] == [shape(s) for s in live_spans]
    for was, now in zip(live_spans, later_spans, strict=True):
        assert {k: v for k, v in now.attributes.items() if k not in NOT_AUDITED} == {
            k: v for k, v in was.attributes.items() if k not in NOT_AUDITED
        }
        assert set(now.attributes) - set(was.attributes) == set()
        # Protocol codes, their calls and details come back; the counters beside them do not.
        assert [(name, at, attributes["diagnose.protocol.code"]) for name, at, attributes in now.events] == [
            (name, at, attributes["diagnose.protocol.code"]) for name, at, attributes in was.events
        ]


def write_unfinished_run(db: Path, run_id: str) -> Events:
    """A run that started a tool and never finished it, written by the real sink."""
    events = Events(run_id=run_id)
    sink = AuditSink(open_audit_store(SqliteLocation(db)))
    sink(events.run_started())
    sink(events.round_started(1))
    sink(events.round_finished(1, ["call-1"]))
    sink(events.tool_started("call-1", "query_logs", {"service": "orders"}))
    return events


def test_an_interrupted_run_ends_interrupted(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    db = tmp_path / "audit.db"
    write_unfinished_run(db, "run-crashed")
    with open_audit_store(
        SqliteLocation(db)
    ) as store:  # its process is gone: recovery closes the run as interrupted
        with store.write() as written:
            written.conn.execute("UPDATE runs SET pid = ?, pid_start = NULL", (2**22 + 7,))
        assert store.recover() == ["run-crashed"]
    with OtlpReceiver() as receiver:
        sent = run_cli(
            capsys, "audit", "export", "--audit-db", db, "--otlp", receiver.endpoint, "--run", "run-crashed"
        )
        spans = {s.name: s for s in receiver.spans()}
    assert sent.code == 0, sent.err
    root, tool = spans["invoke_agent diagnosis"], spans["execute_tool query_logs"]
    chat = spans["chat scripted:demo"]  # a label of no known shape is the model's name, whole
    assert (root.attributes["diagnose.outcome"], root.status_code, root.attributes["error.type"]) == (
        "INTERRUPTED",
        STATUS_ERROR,
        "INTERRUPTED",
    )
    assert chat.start_ns == instant_ns("2025-01-01T00:00:02.000000Z")
    assert chat.end_ns == instant_ns("2025-01-01T00:00:03.000000Z")
    assert tool.start_ns == instant_ns("2025-01-01T00:00:04.000000Z")
    # Recovery closed the invocation as INTERRUPTED when it closed the run: both end then.
    assert (tool.attributes["diagnose.evidence.status"], tool.status_code) == ("INTERRUPTED", STATUS_ERROR)
    assert tool.end_ns == root.end_ns > tool.start_ns


def test_a_run_still_going_is_not_sent(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    db = tmp_path / "audit.db"
    write_unfinished_run(db, "run-going")  # this process is alive: the run is still going
    finished = run_cli(capsys, "run", "--json", "--audit-db", db, "--scenario", "unknown-tool")
    with OtlpReceiver() as receiver:
        named = run_cli(
            capsys, "audit", "export", "--audit-db", db, "--otlp", receiver.endpoint, "--run", "run-going"
        )
        every = run_cli(capsys, "audit", "export", "--audit-db", db, "--otlp", receiver.endpoint)
        roots = [s for s in receiver.spans() if not s.parent_id]
    assert named.code == 1
    assert named.err.splitlines() == [
        "diagnose audit: run 'run-going' has not finished: not sent",
        f"sent 0 runs (0 spans) to {receiver.endpoint}",
    ]
    assert every.code == 0
    assert [r.attributes["diagnose.run.id"] for r in roots] == [finished.result["run_id"]]


def test_a_missing_run_and_a_refusing_endpoint_are_reported(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    db = tmp_path / "audit.db"
    run = run_cli(capsys, "run", "--json", "--audit-db", db, "--scenario", "unknown-tool")
    with OtlpReceiver() as receiver:
        missing = run_cli(
            capsys, "audit", "export", "--audit-db", db, "--otlp", receiver.endpoint, "--run", "run-nope"
        )
    assert missing.code == 1
    assert missing.err.startswith("diagnose audit: no run 'run-nope' in ")
    config = write_config(tmp_path / "diagnose.toml", {"telemetry.traces": {"export_timeout_s": 0.5}})
    refused = run_cli(
        capsys,
        "audit",
        "export",
        "--config",
        config,
        "--audit-db",
        db,
        "--otlp",
        refused_endpoint(),
        "--run",
        run.result["run_id"],
    )
    assert refused.code == 3
    assert refused.err.endswith("diagnose audit: the trace endpoint did not accept 1 run (see the log)\n")
    with OtlpReceiver(status=500) as failing:
        answered = run_cli(
            capsys, "audit", "export", "--config", config, "--audit-db", db, "--otlp", failing.endpoint
        )
    assert answered.code == 3


@pytest.mark.parametrize(
    "args",
    [
        ["--run", "run-1"],  # --run selects what --otlp sends
        ["--otlp", "http://127.0.0.1:4318/v1/traces", "--output", "x.jsonl"],
        ["--otlp", "http://token@127.0.0.1:4318/v1/traces"],
    ],
)
def test_export_usage_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path, args: list[str]) -> None:
    db = tmp_path / "audit.db"
    run_cli(capsys, "run", "--audit-db", db, "--scenario", "unknown-tool")
    try:
        code = run_cli(capsys, "audit", "export", "--audit-db", db, *args).code
    except SystemExit as exit_:
        code = int(str(exit_.code))
    assert code == USAGE_ERROR
    assert "token" not in capsys.readouterr().err
