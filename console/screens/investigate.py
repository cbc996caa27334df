"""The investigate screen: type a query, run the agent, watch it work, read the Draft, follow up.

One async worker per run (`exclusive=True, group="run"`), so escape cancels the worker's task for real:
the use case cancels the model call or tool in flight, records CANCELLED and re-raises. Run events are
queued by the event sink and applied on a 50 ms timer in batches, so a fast stream never starves input.
"""

from __future__ import annotations

import json
import time
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import Footer, Static, TextArea
from textual.worker import Worker, WorkerState

from agent.contracts import EXIT_CODE_OF, Outcome
from console.export import RunRecord, draft_markdown
from console.messages import EngineStatus, RunAborted, RunCompleted, RunSubmitted
from console.safe_text import neutralize
from console.widgets.result import ResultView
from console.widgets.run_state import RunState
from console.widgets.run_view import RunView
from console.widgets.status_bar import StatusBar

if TYPE_CHECKING:
    from console.app import DiagnoseApp

DRAIN_INTERVAL_S = 0.05


def previous_turn_from(query: str, draft: dict[str, Any]) -> dict[str, Any]:
    """The only memory a follow-up carries (DESIGN 3.4): the last query, its conclusion, its limits."""
    limitations = draft.get("limitations") or {}
    return {
        "query": query,
        "conclusion": draft.get("conclusion"),
        "limitations": {
            "checked_scope": list(limitations.get("checked_scope") or []),
            "missing_info": list(limitations.get("missing_info") or []),
        },
    }


class InvestigateScreen(Screen[None]):
    CSS_PATH = Path(__file__).with_name("investigate.tcss")
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+r", "run", "Run", priority=True, tooltip="Run the query in the input"),
        Binding("escape", "cancel_run", "Cancel", priority=True, tooltip="Cancel the running run"),
        Binding(
            "ctrl+f",
            "follow_up",
            "Follow-up",
            tooltip="Follow-up: carry the last Draft into the next run (again: drop it)",
        ),
        Binding("ctrl+g", "copy_draft", "Copy", tooltip="Copy the Draft as Markdown (OSC 52)"),
        Binding("ctrl+s", "export", "Export", tooltip="Write the run as Markdown and JSON files"),
    ]

    def __init__(self) -> None:
        super().__init__(id="investigate")
        self.state = RunState()
        self.carry: dict[str, Any] | None = None  # exactly the PreviousTurn the next run sends
        self.last_query = ""
        self.use_case: Any = None  # the use case of the latest run (tests inspect its model)
        self._inbox: deque[dict[str, Any]] = deque()
        self._worker: Worker[dict[str, Any]] | None = None
        self._run_started: float | None = None

    @property
    def diagnose_app(self) -> DiagnoseApp:
        return self.app  # type: ignore[return-value]

    # ------------------------------------------------------------------ layout
    def compose(self) -> ComposeResult:
        app = self.diagnose_app
        yield StatusBar("Investigate", id="status")
        with Vertical(id="ask"):
            query = TextArea(id="query", soft_wrap=True, tab_behavior="focus", show_line_numbers=False)
            query.border_title = "Query"
            query.border_subtitle = "ctrl+r run"
            query.cursor_blink = app.cursor_blink
            yield query
            yield Static(id="carry")
        yield RunView(show_timings=app.show_timings, id="run")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#carry", Static).display = False
        self.run_view.reset(self.state)
        self._drain_timer = self.set_interval(DRAIN_INTERVAL_S, self._drain, pause=True)
        # Events arrive only at round and tool boundaries: a slow model round still shows time passing.
        self._ticker = self.set_interval(1.0, self._set_activity, pause=True)
        self.watch(self.app, "engine_status", self._engine_changed)
        self.query_one("#query", TextArea).focus()
        self._set_activity()

    @property
    def run_view(self) -> RunView:
        return self.query_one(RunView)

    @property
    def running(self) -> bool:
        return self._worker is not None and self._worker.is_running

    # ------------------------------------------------------------------ engine and scenario
    def _engine_changed(self, status: EngineStatus) -> None:
        self.refresh_bindings()
        if status.state == "ready" and self.diagnose_app.take_prefill():
            scenario = self.diagnose_app.env.scenario if self.diagnose_app.env else None
            if scenario is not None:
                self.prefill(scenario.query, scenario.previous_turn)

    def prefill(self, query: str, previous_turn: Any) -> None:
        """A scenario's query (and its own previous turn, if it has one) ready to run."""
        area = self.query_one("#query", TextArea)
        area.text = query
        area.move_cursor(area.document.end)
        turn = (
            previous_turn.model_dump(mode="json") if hasattr(previous_turn, "model_dump") else previous_turn
        )
        self.set_carry(turn)

    def set_carry(self, previous_turn: dict[str, Any] | None) -> None:
        self.carry = previous_turn
        carry = self.query_one("#carry", Static)
        carry.display = previous_turn is not None
        if previous_turn is not None:
            text = Text.assemble(("carried over to the next run ", "bold"), ("(ctrl+f drops it): ", "dim"))
            text.append(neutralize(json.dumps(previous_turn, ensure_ascii=False), form="json"))
            carry.update(text)
        self.refresh_bindings()

    # ------------------------------------------------------------------ actions
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "cancel_run":
            return self.running  # False lets escape reach other handlers when nothing runs
        if action == "run":
            return None if self.running else True
        if action == "follow_up":
            return (
                True
                if (self.carry is not None or self.state.draft is not None) and not self.running
                else None
            )
        if action == "copy_draft":
            return True if self.state.draft is not None else None
        if action == "export":
            return True if self.state.result is not None and not self.running else None
        return True

    def action_run(self) -> None:
        if self.running:
            self.notify("A run is in progress; escape cancels it.", severity="warning")
            return
        # ctrl+r is a priority binding: it can overtake keys still queued for the input (typed or
        # pasted just before). Queue the submit behind them so the query sent is the query shown.
        area = self.query_one("#query", TextArea)
        area.call_later(lambda: self.post_message(RunSubmitted(area.text, self.carry)))

    def action_cancel_run(self) -> None:
        if self._worker is not None and self._worker.is_running:
            self._worker.cancel()
            self._set_activity("cancelling…")

    def action_follow_up(self) -> None:
        """Arm a follow-up from the last Draft (or drop the carried turn): shows exactly what will be sent."""
        if self.carry is not None:
            self.set_carry(None)
            self.notify("The next run carries no previous turn.")
            return
        draft = self.state.draft
        if draft is None:
            self.notify("A follow-up needs a Draft from the last run.", severity="warning")
            return
        self.set_carry(previous_turn_from(self.last_query, draft))
        area = self.query_one("#query", TextArea)
        area.text = ""
        area.focus()

    def action_copy_draft(self) -> None:
        draft = self.state.draft
        if draft is None:
            self.notify("There is no Draft to copy.", severity="warning")
            return
        self.app.copy_to_clipboard(draft_markdown(draft))
        self.notify("Draft copied to the clipboard as Markdown.")

    def action_export(self) -> None:
        self.diagnose_app.action_export()

    def run_record(self) -> RunRecord | None:
        if self.state.result is None:
            return None
        return RunRecord(
            query=self.state.query if self.state.query is not None else self.last_query,
            previous_turn=self.state.previous_turn,
            model=self.state.model or self.diagnose_app.engine_status.label,
            result=self.state.result,
            events=tuple(self.state.events),
        )

    # ------------------------------------------------------------------ the run pipeline
    def on_run_submitted(self, message: RunSubmitted) -> None:
        env = self.diagnose_app.env
        status = self.diagnose_app.engine_status
        if env is None or status.state != "ready":
            reason = status.message if status.state == "failed" else "the engine is still loading"
            self.notify(f"Cannot run yet: {reason}", severity="warning", markup=False)
            return
        self.last_query = message.query
        self.state = RunState()
        self._inbox.clear()
        self.run_view.reset(self.state)
        self._drain_timer.resume()
        self._run_started = time.monotonic()
        self._ticker.resume()
        self._worker = self._execute(env, message.query, message.previous_turn)
        self.refresh_bindings()
        self._set_activity("starting…")

    @work(exclusive=True, group="run", exit_on_error=False)
    async def _execute(self, env: Any, query: str, previous_turn: dict[str, Any] | None) -> dict[str, Any]:
        app = self.diagnose_app
        use_case = env.use_case(
            sinks=[self._inbox.append], session_id=app.session_id, run_id_factory=app.run_id_factory
        )
        self.use_case = use_case
        try:
            result = await use_case.execute(query, previous_turn)
        finally:
            self._drain()  # the tail of the stream (run_finished) is drawn before anything else
        return dict(result.to_json_dict())

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.worker is not self._worker:
            return
        if event.state == WorkerState.SUCCESS:
            self.post_message(RunCompleted(event.worker.result or {}))
        elif event.state == WorkerState.CANCELLED:
            self.post_message(RunAborted(cancelled=True))
        elif event.state == WorkerState.ERROR:
            error = event.worker.error
            self.post_message(RunAborted(cancelled=False, error=f"{type(error).__name__}: {error}"))

    def _drain(self) -> None:
        """Apply every queued event, then redraw once: the batch is the unit of redraw, not the event."""
        if not self._inbox:
            return
        while self._inbox:
            self.state.apply(self._inbox.popleft())
        self.run_view.sync()
        self._set_activity()

    def on_run_completed(self, message: RunCompleted) -> None:
        self._run_ended()

    def on_run_aborted(self, message: RunAborted) -> None:
        self._run_ended()
        if message.error is not None and self.state.result is None:
            self.run_view.query_one(ResultView).show_failure(message.error)
            self.notify(message.error, title="The run failed", severity="error", markup=False, timeout=10)
            self._set_activity("failed")

    def _run_ended(self) -> None:
        self._drain()
        self._drain_timer.pause()
        self._ticker.pause()
        if self.state.result is not None:
            self.set_carry(None)  # a carried turn is consumed by the run that sent it
        self.refresh_bindings()
        self._set_activity()

    def _set_activity(self, override: str | None = None) -> None:
        elapsed = None
        if self.running and self.diagnose_app.show_timings and self._run_started is not None:
            elapsed = time.monotonic() - self._run_started
        self.query_one(StatusBar).set_activity(override or activity_text(self.state, self.running, elapsed))


def activity_text(state: RunState, running: bool, elapsed_s: float | None = None) -> str:
    if state.result is not None:
        return f"finished: {state.outcome} (exit {EXIT_CODE_OF[Outcome(str(state.outcome))]})"
    if not running and state.phase == "idle":
        return "idle · ctrl+r runs the query"
    label = f"running {elapsed_s:.0f} s" if elapsed_s is not None else "running"
    running_calls = [c for c in state.calls.values() if c.status == "RUNNING"]
    if running_calls:
        call = running_calls[-1]
        return f"{label}: {call.tool_call_id} {call.tool} · escape cancels"
    if state.round_in_flight is not None:
        return f"{label}: model round {state.round_in_flight} · escape cancels"
    return f"{label} · escape cancels"
