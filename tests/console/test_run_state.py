"""The reducer behind every run widget: what each call, round and counter shows, from events alone."""

from __future__ import annotations

import asyncio
from typing import Any

from console.run_state import RunState
from tests.support.recorded import record


def fold(events: list[dict[str, Any]]) -> RunState:
    state = RunState()
    state.apply_all(events)
    return state


def test_protocol_violations_mark_calls_not_executed_with_their_codes() -> None:
    state = fold(record("protocol-violations-saturate"))
    assert state.calls["call-1"].status == "FOUND"
    assert (state.calls["call-2"].status, state.calls["call-2"].controls) == (
        "NOT_EXECUTED",
        ["INVALID_PROGRESS_PROTOCOL"],
    )
    assert state.calls["call-3"].codes == ["INVALID_PROGRESS_PROTOCOL", "SATURATED", "STOP_REQUIRED"]
    assert (state.calls["call-4"].status, state.calls["call-4"].controls) == (
        "NOT_EXECUTED",
        ["STOP_REQUIRED"],
    )
    assert state.protocol is not None
    assert state.protocol["protocol_violations"] == 2
    assert state.collection_stopped
    assert state.stop_cause == "SATURATION"
    assert [state.notes[e.key]["code"] for e in state.entries if e.kind == "note"] == ["COLLECTION_STOPPED"]
    assert state.outcome == "CONTROLLED_STOP"
    assert state.ending_budget is None


def test_unknown_tool_and_repaired_evaluation() -> None:
    unknown = fold(record("unknown-tool"))
    assert (unknown.calls["call-1"].status, unknown.calls["call-1"].controls) == (
        "NOT_EXECUTED",
        ["UNKNOWN_TOOL"],
    )
    assert unknown.calls["call-1"].tool is None  # no event names the tool of a call that never ran

    repaired = fold(record("missing-previous-observation-repaired"))
    assert repaired.calls["call-1"].evaluation == "GAINED"
    assert repaired.calls["call-1"].evaluated_by == "call-3"
    assert repaired.calls["call-3"].evaluates == ("call-1", "GAINED")
    assert repaired.calls["call-2"].controls == ["INVALID_PROGRESS_PROTOCOL"]


def test_budget_exhaustion_names_the_budget() -> None:
    state = fold(record("token-budget-exhausted"))
    assert state.stop_reason == "TOKENS_EXHAUSTED"
    assert state.ending_budget == "tokens"
    assert state.budget is not None
    assert state.budget["exhausted"] == "TOKENS_EXHAUSTED"


def test_invalid_input_and_duplicate_calls() -> None:
    base = {"run_id": "r", "session_id": "s", "at": "t"}
    state = fold(
        [
            {**base, "seq": 1, "type": "model_round_started", "round": 1},
            {
                **base,
                "seq": 2,
                "type": "model_round_finished",
                "round": 1,
                "duration_ms": 5,
                "prompt_tokens": 10,
                "completion_tokens": 2,
                "tool_call_ids": ["a", "b"],
                "has_text": False,
            },
            {
                **base,
                "seq": 3,
                "type": "protocol_changed",
                "code": "INVALID_INPUT",
                "tool_call_id": "a",
                "detail": {},
            },
            {
                **base,
                "seq": 4,
                "type": "protocol_changed",
                "code": "DUPLICATE_CALL",
                "tool_call_id": "b",
                "detail": {},
            },
        ]
    )
    assert (state.calls["a"].status, state.calls["a"].error_code, state.calls["a"].controls) == (
        "ERROR",
        "INVALID_INPUT",
        ["INVALID_INPUT"],
    )
    assert (state.calls["b"].status, state.calls["b"].controls) == ("NOT_EXECUTED", ["DUPLICATE_CALL"])


def test_changes_accumulate_until_taken() -> None:
    events = record("evidence-backed-diagnosis")
    state = RunState()
    state.apply_all(events[:10])
    first = state.take_changes()
    assert first.new_entries
    assert first.budget
    assert not state.take_changes()
    state.apply_all(events[10:])
    rest = state.take_changes()
    assert rest.result
    assert "call-3" in rest.new_calls
    assert state.phase == "finished"


def test_counters_no_event_reports_are_mirrored_until_the_next_protocol_event() -> None:
    events = record("tool-finds-no-evidence")  # two EMPTY results, no protocol event at all
    state = RunState()
    seen = []
    for event in events:
        state.apply(event)
        if event["type"] == "model_round_started":
            assert state.protocol is not None
            seen.append((state.protocol["consecutive_no_gain"], state.protocol["pending_tool_call_id"]))
    assert seen == [(0, None), (1, None), (2, None)]

    state = RunState()
    for event in record("evidence-backed-diagnosis"):
        state.apply(event)
        if event["type"] == "model_round_started" and event["round"] == 2:
            assert state.protocol is not None
            assert state.protocol["pending_tool_call_id"] == "call-1"


def test_gauge_colours_warn_from_80_percent_and_name_the_ending_budget() -> None:
    from console.widgets.budget import BudgetGauge

    gauge = BudgetGauge()
    gauge.budget = {
        "model_calls": {"used": 7, "limit": 8},
        "tokens": {"used": 51_199, "limit": 64_000},
        "run_bytes": {"used": 51_200, "limit": 64_000},
        "deadline": {"elapsed_s": 300.0, "limit_s": 300.0},
    }
    assert [gauge.level(k) for k in ("model_calls", "tokens", "run_bytes", "deadline")] == [
        "warn",
        "ok",
        "warn",
        "full",
    ]
    gauge.ending = "tokens"
    assert gauge.level("tokens") == "full"  # the budget that ended the run is red whatever its fraction


def test_calls_refused_by_a_tool_call_cap_are_not_executed_and_noted() -> None:
    from console.widgets.timeline import note_label
    from tests.support import harness
    from tests.support.spec_scenarios import NULL_DRAFT, call, scenario, text_round, tools_round

    calls = [call(f"c{n}", "lookup_knowledge", {"query": f"runbook {n}"}) for n in range(1, 5)]
    h = harness(
        scenario(
            tools_round(*calls), text_round(NULL_DRAFT), settings={"budget": {"max_tool_calls_per_round": 2}}
        )
    )
    asyncio.run(h.run())
    state = fold(h.events)

    assert [state.calls[c].status for c in ("c1", "c2")] == ["FOUND", "FOUND"]
    assert [(state.calls[c].status, state.calls[c].controls) for c in ("c3", "c4")] == [
        ("NOT_EXECUTED", ["TOO_MANY_CALLS"])
    ] * 2
    (note,) = (state.notes[e.key] for e in state.entries if e.kind == "note")
    assert (
        note_label(note).plain
        == "⚑ TOO_MANY_CALLS  the per-reply cap of 2 calls reached; not executed: c3, c4"
    )
