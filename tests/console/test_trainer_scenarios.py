"""What a trainer shows in the console: a cancel during a slow model round, and why a Draft was refused.

(docs/contracts.md, "Execution result", "DiagnosisDraft")
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from agent.events.run_events import ModelRoundStarted, RunFinished, RunStarted
from console.app import DiagnoseApp
from console.run_state import RunState
from console.widgets.status_bar import StatusBar
from tests.support.console import (
    SIZE,
    engine_ready,
    has_row,
    result_text,
    run_to_end,
    timeline_labels,
    wait_until,
)

AppFactory = Callable[..., DiagnoseApp]


async def test_escape_during_a_slow_model_round_cancels_and_stops_waiting(app_factory: AppFactory) -> None:
    app = app_factory("slow-model-cancel")
    async with app.run_test(size=SIZE) as pilot:
        await engine_ready(pilot)
        await pilot.press("ctrl+r")
        screen = app.investigate
        await wait_until(lambda: has_row(timeline_labels(app), "round 1", "waiting for the model…"), pilot)
        assert screen.state.round_in_flight == 1

        await pilot.press("escape")
        await app.workers.wait_for_complete()
        await pilot.pause()

        labels = timeline_labels(app)
        assert screen.state.outcome == "CANCELLED"
        assert labels[-1].startswith("■ CANCELLED / CANCELLED exit 12")
        assert not has_row(labels, "waiting for the model")  # nothing is waited for any more
        assert has_row(labels, "round 1", "no reply: the run ended first")
        assert screen.state.round_in_flight is None
        assert "model round" not in screen.query_one(StatusBar).activity


def test_a_finished_run_leaves_no_round_waiting() -> None:
    """The reducer: a round the run ended during (cancel, deadline) is marked unanswered."""
    ids = ("run-1", "session-1")
    state = RunState()
    state.apply_all(
        [
            RunStarted(*ids, 1, "t1", query="q", previous_turn=None, model="m"),
            ModelRoundStarted(*ids, 2, "t2", round=1),
            RunFinished(*ids, 3, "t3", outcome="CANCELLED", stop_reason="CANCELLED", result={}),  # type: ignore[arg-type]
        ]
    )
    assert state.rounds[1].unanswered
    assert not state.rounds[1].finished
    assert state.round_in_flight is None


async def test_the_result_panel_says_why_a_draft_was_refused(app_factory: AppFactory) -> None:
    app = app_factory("fenced-json-fails-closed")
    async with app.run_test(size=SIZE) as pilot:
        await run_to_end(pilot)
        result = result_text(app)
        assert "failure INVALID_DRAFT" in result
        assert "detail: starts with a Markdown code fence" in result
        assert "连接池耗尽" not in result  # the refused text itself is never shown


@pytest.mark.parametrize(
    ("scenario", "violation", "words", "detail"),
    [
        (
            "finding-cites-empty-result",
            "FINDING_CITES_NON_FOUND",
            "why: a finding cites a call that found nothing (EMPTY or ERROR)",
            "detail: analysis[0] is a FINDING citing call-2, which returned EMPTY",
        ),
        (
            "finding-cites-no-gain",
            "FINDING_CITES_NO_GAIN",
            "why: a finding rests on a result the model itself evaluated NO_GAIN",
            "detail: analysis[0] is a FINDING citing call-1, which the model evaluated NO_GAIN",
        ),
    ],
)
async def test_the_result_panel_says_in_words_why_a_finding_was_refused(
    app_factory: AppFactory, scenario: str, violation: str, words: str, detail: str
) -> None:
    app = app_factory(scenario)
    async with app.run_test(size=SIZE) as pilot:
        await run_to_end(pilot)
        result = " ".join(result_text(app).split())
        assert f"failure INVALID_DRAFT (violation: {violation};" in result
        assert words in result
        assert detail in result
        # Never the refused text.
        assert "HikariPool-1 连接池耗尽" not in result
        assert "流量高峰" not in result
