"""Exports are pure functions of the run's events and result: Markdown for people, JSON exactly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from console.export import RunRecord, draft_markdown, export_paths, run_json, run_markdown, write_run
from tests.support.recorded import T0, pinned, record

DRAFT = {
    "conclusion": None,
    "analysis": [
        {"kind": "FINDING", "statement": "pool\nexhausted", "evidence": ["call-1", "call-2"]},
        {
            "kind": "NEGATIVE_OBSERVATION",
            "statement": "no lock waits",
            "scope": "02:00-03:00",
            "evidence": "NO_EVIDENCE",
        },
    ],
    "action_plan": ["roll back", "watch the pool"],
    "recommendations": [],
    "limitations": {"checked_scope": ["payment-service logs"], "missing_info": ["DB metrics"]},
}


def record_of(scenario: str) -> RunRecord:
    events = pinned(record(scenario), "run-0001", "session-x", T0)
    started = next((e for e in events if e["type"] == "run_started"), None)
    finished = events[-1]
    return RunRecord(
        query=started["query"] if started else "q",
        previous_turn=started["previous_turn"] if started else None,
        model="scripted: " + scenario,
        result={"outcome": finished["outcome"], "stop_reason": finished["stop_reason"], **finished["result"]},
        events=tuple(events),
    )


def test_draft_markdown_says_no_conclusion_and_keeps_structure() -> None:
    text = draft_markdown(DRAFT)
    assert "**Conclusion:** none — the evidence does not support one (`conclusion: null`)." in text
    assert (
        "- **FINDING** pool exhausted — evidence: `call-1`, `call-2`" in text
    )  # a newline cannot break the list
    assert "- **NEGATIVE_OBSERVATION** no lock waits — evidence: NO_EVIDENCE; scope: 02:00-03:00" in text
    assert "1. roll back\n2. watch the pool" in text
    assert "## Recommendations\n\n_none_" in text


def test_run_markdown_and_json() -> None:
    rec = record_of("evidence-backed-diagnosis")
    markdown = run_markdown(rec, "2026-11-30T03:00:00+00:00")
    assert markdown.startswith("# Diagnosis run run-0001")
    assert "- Outcome: **DRAFT / COMPLETED** (exit 0: a Draft was produced)" in markdown
    assert "## Carried over from the previous turn\n\n_none_" in markdown
    assert "- Round 1 — 1850+62 tokens — `call-1`" in markdown
    assert "  - `call-2` — query_logs — FOUND — eval GAINED — input `" in markdown
    assert "| `call-1` | lookup_knowledge | FOUND | GAINED |" in markdown

    payload = json.loads(run_json(rec, "now"))
    assert payload["result"] == rec.result
    assert payload["events"] == list(rec.events)


def test_stopped_and_rejected_runs() -> None:
    stopped = run_markdown(record_of("model-call-budget-exhausted"), "now")
    assert "## Why there is no Draft\n\nStop reason: `MODEL_CALLS_EXHAUSTED`." in stopped
    assert '- ⚑ STOP_REQUIRED `{"cause": "BUDGET"}`' in stopped
    rejected = run_markdown(record_of("oversized-query-rejected"), "now")
    assert '"code": "QUERY_TOO_LARGE"' in rejected
    assert "_no model round was started_" in rejected


def test_write_run_never_overwrites_and_names_files_safely(tmp_path: Path) -> None:
    rec = record_of("evidence-backed-diagnosis")
    markdown_path, json_path = write_run(rec, tmp_path, "now")
    assert (markdown_path.name, json_path.name) == ("diagnosis-run-0001.md", "diagnosis-run-0001.json")
    with pytest.raises(FileExistsError):
        write_run(rec, tmp_path, "later")
    assert export_paths(tmp_path, "../../etc/x")[0].parent == tmp_path
