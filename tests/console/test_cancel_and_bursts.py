"""Cancelling a run mid-tool cancels it for real; a fast event stream is drawn in batches."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import Static, TextArea

from agent.events.emitter import RunEventEmitter
from agent.events.run_events import (
    BudgetChanged,
    ModelRoundFinished,
    ModelRoundStarted,
    ProtocolThresholds,
    RunEvent,
    RunLimits,
    RunStarted,
    ToolFinished,
    ToolStarted,
)
from agent.vocabulary import InvocationStatus
from console.widgets.result import ResultView
from tests.support import RecordingAdapter
from tests.support.audit_reader import AuditReader
from tests.support.console import (
    SIZE,
    engine_ready,
    has_row,
    make_app,
    plain,
    slow_environment,
    timeline_labels,
    wait_until,
)
from tools.definitions import ToolName


async def test_escape_cancels_the_tool_in_flight(tmp_path: Path) -> None:
    adapter = RecordingAdapter(delay_s=30.0)
    app = make_app(tmp_path, "evidence-backed-diagnosis", env_factory=slow_environment(tmp_path, adapter))
    async with app.run_test(size=SIZE) as pilot:
        await engine_ready(pilot)
        await pilot.press("ctrl+r")
        screen = app.investigate
        await wait_until(
            lambda: "call-1" in screen.state.calls and screen.state.calls["call-1"].status == "RUNNING", pilot
        )
        assert has_row(timeline_labels(app), "call-1", "running…")

        await pilot.press("escape")
        await app.workers.wait_for_complete()
        await pilot.pause()

        assert adapter.cancelled == 1  # the adapter's await was cancelled, not left running
        assert screen.state.outcome == "CANCELLED"
        assert screen.state.calls["call-1"].status == "CANCELLED"
        assert has_row(timeline_labels(app), "call-1", "CANCELLED")
        banner = plain(screen.query_one(ResultView).query_one("#result-banner", Static).content)
        assert "CANCELLED / CANCELLED exit 12: the run was cancelled" in " ".join(banner.split())
        assert screen.state.result is not None
        assert screen.state.result["progress"] == {
            "checks": [],
            "stop_required": False,
            "saturation": None,
        }
        audit = AuditReader(tmp_path / "audit.db")
        run = audit.run("run-0001")
        invocations = audit.invocations("run-0001")
        assert run is not None
        assert (run["outcome"], run["stop_reason"]) == ("CANCELLED", "CANCELLED")
        assert [(i["status"], i["error_code"]) for i in invocations if i["tool_call_id"] == "call-1"] == [
            ("CANCELLED", "CANCELLED")
        ]


def synthetic_burst(rounds: int) -> list[RunEvent]:
    """A fast, valid event stream from the real emitter: `rounds` rounds of three FOUND calls each."""
    events: list[RunEvent] = []
    emitter = RunEventEmitter("run-burst", "s", sinks=[events.append], clock=lambda: "t")
    limits = RunLimits(max_model_calls=1000, max_total_tokens=10**6, deadline_s=300.0, max_run_bytes=10**6)
    thresholds = ProtocolThresholds(max_consecutive_no_gain=1000, max_protocol_violations=1000)
    emitter.emit(RunStarted, query="q", previous_turn=None, model="m", limits=limits, protocol=thresholds)
    for n in range(1, rounds + 1):
        ids = [f"call-{n}-{i}" for i in range(3)]
        emitter.emit(ModelRoundStarted, round=n)
        emitter.emit(
            ModelRoundFinished,
            round=n,
            duration_ms=0,
            prompt_tokens=1,
            completion_tokens=1,
            usage_estimated=False,
            tool_call_ids=ids,
            has_text=False,
        )
        for tool_call_id in ids:
            emitter.emit(
                ToolStarted,
                round=n,
                tool_call_id=tool_call_id,
                tool=ToolName.QUERY_LOGS,
                input={"service": "x"},
            )
            observation = {
                "tool_call_id": tool_call_id,
                "tool": ToolName.QUERY_LOGS,
                "evidence_status": "FOUND",
            }
            emitter.emit(
                ToolFinished,
                round=n,
                tool_call_id=tool_call_id,
                tool=ToolName.QUERY_LOGS,
                status=InvocationStatus.FOUND,
                error_code=None,
                reason=None,
                projection={},
                duration_ms=0,
                observation=observation,
            )
        emitter.emit(
            BudgetChanged,
            model_calls={"used": n, "limit": 1000},
            tokens={"used": 2 * n, "limit": 10**6, "estimated": False},
            run_bytes={"used": n, "limit": 10**6},
            deadline={"elapsed_s": 0.0, "limit_s": 300.0},
            exhausted=None,
        )
    return events


async def test_a_burst_of_events_is_drawn_in_a_few_batches_and_input_stays_live(tmp_path: Path) -> None:
    app = make_app(tmp_path, "evidence-backed-diagnosis")
    async with app.run_test(size=SIZE) as pilot:
        await engine_ready(pilot)
        screen = app.investigate
        burst = synthetic_burst(200)  # 1,600 events arriving at once
        screen._inbox.extend(burst)
        screen._drain_timer.resume()
        await pilot.press(*"typed during the burst")
        await pilot.pause(0.2)

        assert len(screen.state.events) == len(burst)
        assert screen.run_view.batches <= 3  # one redraw per timer tick, not one per event
        labels = timeline_labels(app)
        assert sum(label.startswith("round ") for label in labels) == 200
        assert len(labels) == 800
        assert screen.query_one("#query", TextArea).text.endswith("typed during the burst")
