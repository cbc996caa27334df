"""The detail panel speaks the operator's words and shows evidence whole (issue 12, items 2 and 11)."""

from __future__ import annotations

from typing import Any

from console.run_state import CallRow, RunState
from console.widgets.detail import entry_detail
from console.widgets.timeline import call_label
from tests.support.console import plain


def detail_text(state: RunState, key: Any, width: int = 60) -> str:
    return "\n".join(plain(part, width=width) for part in entry_detail(state, key, show_timings=False))


def test_a_not_executed_call_says_what_the_model_received(recorded_runs: dict[str, Any]) -> None:
    """From the events' JSON alone (a replay) the exact observation is unknown: said in words, with no
    heading that promises it (live runs show it: tests/console/test_detail_unexecuted.py)."""
    state = RunState()
    state.apply_all(recorded_runs["stop-required-ignored"])
    text = " ".join(detail_text(state, ("call", "call-3")).split())
    assert "tool not named" not in text
    assert "(tool name not recorded)" in text
    assert "control observation: evidence_status NOT_EXECUTED, control STOP_REQUIRED" in text
    assert "exactly what the model saw" not in text
    assert "does not hold its exact text" in text
    assert '"code": "COLLECTION_STOPPED"' in text  # the protocol event that explains it


def test_rounds_and_the_result_are_headed_in_plain_words(recorded_runs: dict[str, Any]) -> None:
    state = RunState()
    state.apply_all(recorded_runs["evidence-backed-diagnosis"])
    round_1 = detail_text(state, ("round", 1))
    assert round_1.startswith("Model round 1")
    assert "prompt +" in round_1
    assert "asked for: call-1 (lookup_knowledge)" in round_1
    last = detail_text(state, ("round", max(state.rounds)))
    assert "replied with text (the Draft is in the Result panel)" in last
    finish = detail_text(state, ("finish", None))
    assert finish.startswith("Run result")
    assert "ExecutionResult" not in finish


def test_long_evidence_lines_wrap_instead_of_being_cut(recorded_runs: dict[str, Any]) -> None:
    state = RunState()
    state.apply_all(recorded_runs["evidence-backed-diagnosis"])
    observation = state.calls["call-2"].observation
    message = observation["data"]["entries"][0]["message"]
    assert len(message) > 40
    text = detail_text(state, ("call", "call-2"), width=40)
    assert all(len(line) <= 40 for line in text.splitlines())
    assert message.replace(" ", "") in text.replace("\n", "").replace(" ", "")  # every character shown


def test_the_call_row_keeps_its_duration_and_grows_its_summary_with_the_width() -> None:
    row = CallRow(
        "call-2",
        round=2,
        tool="query_logs",
        input={"service": "payment-service", "start": "2026-11-30T02:00:00Z", "end": "2026-11-30T03:00:00Z"},
        status="FOUND",
        duration_ms=41,
    )
    narrow, wide = call_label(row, True, 60), call_label(row, True, 140)
    assert "41 ms" in narrow.plain
    assert "41 ms" in wide.plain
    assert narrow.cell_len <= 60
    assert "2026-11-30T03:00:00Z" in wide.plain
    assert "2026-11-30T03:00:00Z" not in narrow.plain
