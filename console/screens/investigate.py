"""The investigate screen: type a query, run the agent, watch it work, read the Draft, follow up.

The screen owns its run, its export and its copy; it reads the engine and its options from the app
(`ConsoleHost`) and never imports the app. One async worker per run (`exclusive=True, group="run"`),
so escape cancels the worker's task for real: the use case cancels the model call or tool in flight,
records CANCELLED and re-raises. Run events are queued by the event sink and applied on a 50 ms timer
in batches, so a fast stream never starves input.
"""

from __future__ import annotations

import json
import time
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual import events, getters, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.geometry import Size
from textual.reactive import reactive
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Static
from textual.worker import Worker, WorkerState

from console.host import ConsoleHost
from console.messages import RunAborted, RunSubmitted
from console.presentation import (
    SCRIPTED_NOTICE,
    SCRIPTED_NOTICE_DETAIL,
    SCRIPTED_NOTICE_POINTER,
    CallState,
    exit_code,
)
from console.safe_text import neutralize
from console.widgets.budget import BudgetGauge
from console.widgets.footer import ConsoleFooter
from console.widgets.query_box import QueryBox
from console.widgets.result import ResultView
from console.widgets.run_state import RunState
from console.widgets.run_view import NARROW_BELOW, RunView
from console.widgets.status_bar import StatusBar
from console.widgets.too_small import TooSmall, fit_screen

if TYPE_CHECKING:
    from agent.run_events import BudgetGauges, RunEvent
    from console.export import RunRecord
    from console.screens.export_dialog import ExportTarget

DRAIN_INTERVAL_S = 0.05
DRAIN_SLICE_S = 0.012  # the longest a drain holds the event loop: a key waits at most about this long
WHY_SHOWN_S = 6.0  # how long the status bar says why a dimmed key did nothing


def previous_turn_from(query: str, draft: dict[str, Any]) -> dict[str, Any]:
    """The only memory a follow-up carries: the last query, its conclusion, its limits.

    (docs/contracts.md, "Agent input")
    """
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
        Binding("f5", "go_timeline", "Timeline", show=False, priority=True, tooltip="Go to the timeline"),
        Binding("f6", "go_detail", "Detail", show=False, priority=True, tooltip="Go to the detail panel"),
        Binding(
            "f7",
            "go_citations",
            "Citations",
            show=False,
            priority=True,
            tooltip="Go to the citations and checks",
        ),
    ]

    app = getters.app(ConsoleHost)
    running: reactive[bool] = reactive(False, bindings=True)
    # Exactly the PreviousTurn the next run sends, shown under the input.
    carry: reactive[dict[str, Any] | None] = reactive(None, bindings=True, init=False)
    activity: reactive[str] = reactive("", init=False)  # what the status bar says is happening

    def __init__(self) -> None:
        super().__init__(id="investigate")
        self.state = RunState()
        self.last_query = ""
        self.use_case: Any = None  # the use case of the latest run (tests inspect its model)
        self._inbox: deque[RunEvent] = deque()
        self._worker: Worker[dict[str, Any]] | None = None
        self._run_started: float | None = None
        self.queued: RunSubmitted | None = None  # ctrl+r while the engine loads: run once it is ready
        self.runs_ended = 0  # runs fully drawn and ended here: lets a script wait for "this run is done"
        self.last_export_dir: Path | None = None  # where this session's last export went
        self._why_shown: Timer | None = None  # a dimmed key's reason stays in the status bar until this ends

    # ------------------------------------------------------------------ layout
    def compose(self) -> ComposeResult:
        options = self.app.options
        self.fit(self.app.size)  # styled for the terminal before the widgets mount: one layout, one style
        yield StatusBar("Investigate", id="status")
        with Vertical(id="ask"):
            query = QueryBox(id="query")
            query.border_title = "Query"
            query.border_subtitle = "ctrl+r run"
            query.cursor_blink = options.cursor_blink
            query.placeholder = "Describe the incident: service, time window (UTC), symptom. ctrl+r runs it."
            yield query
            # The carried turn, scrollable: a long Draft's limitations do not fit a few lines at 80×24,
            # and the operator must be able to read every word that the next run will send.
            with VerticalScroll(id="carry-box"):
                yield Static(id="carry")
        yield RunView(show_timings=options.show_timings, id="run")
        yield ConsoleFooter(self.app.size.width)
        yield TooSmall()

    def on_resize(self, event: events.Resize) -> None:
        self.fit(event.size)

    def fit(self, size: Size) -> None:
        """The classes the screen's layout follows for a terminal of `size` (too small, narrow)."""
        fit_screen(self, size)
        self.set_class(size.width < NARROW_BELOW, "-narrow")

    def on_mount(self) -> None:
        self.query_one("#carry-box").display = False
        self.run_view.reset(self.state)
        self._drain_timer = self.set_interval(DRAIN_INTERVAL_S, self._drain, pause=True)
        # Events arrive only at round and tool boundaries: a slow model round still shows time passing,
        # in the status bar and on the deadline gauge.
        self._ticker = self.set_interval(1.0, self._tick, pause=True)
        self.query_one("#query", QueryBox).focus()
        self._set_activity()

    @property
    def run_view(self) -> RunView:
        return self.query_one(RunView)

    # ------------------------------------------------------------------ carried turn and activity
    def prefill(self, query: str, previous_turn: Any) -> None:
        """A scenario's query (and its own previous turn, if it has one) ready to run."""
        area = self.query_one("#query", QueryBox)
        area.text = query
        area.move_cursor(area.document.end)
        turn = (
            previous_turn.model_dump(mode="json") if hasattr(previous_turn, "model_dump") else previous_turn
        )
        self.carry = turn

    def watch_carry(self, previous_turn: dict[str, Any] | None) -> None:
        box, carry = self.query_one("#carry-box", VerticalScroll), self.query_one("#carry", Static)
        box.display = carry.display = previous_turn is not None
        if previous_turn is not None:
            text = Text.assemble(
                ("carried over to the next run ", "bold"), ("(ctrl+f drops it; tab here scrolls it): ", "dim")
            )
            text.append(neutralize(json.dumps(previous_turn, ensure_ascii=False), form="json"))
            carry.update(text)
            box.scroll_home(animate=False)

    def watch_activity(self, activity: str) -> None:
        self.query_one(StatusBar).set_activity(activity)

    # ------------------------------------------------------------------ actions
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "cancel_run":
            return self.running  # False lets escape reach other handlers when nothing runs
        if action == "run":
            return None if self.running else True  # dimmed in a run; the key still says why (on_key)
        if action == "follow_up":
            return (
                True
                if (self.carry is not None or self.state.draft is not None) and not self.running
                else None
            )
        if action in ("copy_draft", "copy_draft_json"):
            return True if self.state.draft is not None else None
        if action == "export":
            return True if self.state.result is not None and not self.running else None
        return True

    def why_not(self, action: str) -> tuple[str, str]:
        """Why `action` cannot run now (its key is dimmed in the footer): a few words for the status bar
        (they fit beside the model at 80 columns; what follows ` · ` goes first when they do not) and
        a sentence for the toast."""
        if self.running:
            if action == "run":
                return (
                    "run in progress: escape cancels it",
                    "A run is in progress: wait for it to finish, or escape cancels it.",
                )
            return (
                "run in progress · wait, or escape cancels it",
                "A run is in progress: wait for it to finish (escape or ctrl+c cancels it).",
            )
        if action == "export":
            return (
                "nothing to export: no run has finished",
                "There is no finished run to export: ctrl+r runs the query first.",
            )
        what = "follow up" if action == "follow_up" else "copy"
        if self.state.result is None:
            return (
                f"no Draft to {what} · ctrl+r runs the query",
                f"There is no Draft to {what} yet: ctrl+r runs the query first.",
            )
        outcome = self.state.outcome
        toast = f"The last run ended {outcome} without a Draft: there is no Draft to {what}."
        if action == "follow_up":
            toast += " A follow-up carries a Draft's conclusion and limitations."
        return f"{outcome}: no Draft to {what}", toast

    def say_why_not(self, action: str) -> None:
        """A dimmed key was pressed: say why nothing happens, in the status bar (for WHY_SHOWN_S) and
        as a toast, rather than ignore the key."""
        status, toast = self.why_not(action)
        self.notify(toast, severity="warning", markup=False)
        self._set_activity(status)
        self._forget_why()
        self._why_shown = self.set_timer(WHY_SHOWN_S, self._why_expired)

    def _why_expired(self) -> None:
        self._forget_why()
        self._set_activity()

    def _forget_why(self) -> None:
        """A run started or ended, or the engine changed: that is what the status bar must say now."""
        if self._why_shown is not None:
            self._why_shown.stop()
            self._why_shown = None

    def action_run(self) -> None:
        if self.running:
            self.say_why_not("run")
            return
        # ctrl+r is a priority binding: it can overtake keys still queued for the input (typed or
        # pasted just before). Queue the submit behind them so the query sent is the query shown.
        area = self.query_one("#query", QueryBox)
        area.call_later(lambda: self.post_message(RunSubmitted(area.current_text(), self.carry)))

    def on_key(self, event: events.Key) -> None:
        """A dimmed key (ctrl+r in a run, ctrl+f / ctrl+g / ctrl+s without what they need): its binding is
        disabled, so the key arrives here; say why nothing happens."""
        action = DIMMABLE_KEYS.get(event.key)
        if action is not None and self.check_action(action, ()) is None:
            event.stop()
            self.say_why_not(action)

    def action_go_timeline(self) -> None:
        self.run_view.go_to("timeline")

    def action_go_detail(self) -> None:
        self.run_view.go_to("detail")

    def action_go_citations(self) -> None:
        self.run_view.go_to("result")

    def action_cancel_run(self) -> None:
        if self._worker is not None and not self._worker.is_finished:
            self._worker.cancel()
            self._set_activity("cancelling…")

    def action_follow_up(self) -> None:
        """Arm a follow-up from the last Draft (or drop the carried turn): shows exactly what will be sent."""
        if self.carry is not None:
            self.carry = None
            self.notify("The next run carries no previous turn.")
            return
        draft = self.state.draft
        if draft is None:
            self.say_why_not("follow_up")
            return
        self.carry = previous_turn_from(self.last_query, draft)
        area = self.query_one("#query", QueryBox)
        area.text = ""
        area.focus()

    def action_copy_draft(self) -> None:
        draft = self.state.draft
        if draft is None:
            self.say_why_not("copy_draft")
            return
        from console.export import draft_markdown  # the export loads on first use, after the first frame

        self.app.copy_to_clipboard(draft_markdown(draft))
        self.notify("Draft copied to the clipboard as Markdown.")

    def action_copy_draft_json(self) -> None:
        draft = self.state.draft
        if draft is None:
            self.say_why_not("copy_draft_json")
            return
        from console.export import draft_json

        self.app.copy_to_clipboard(draft_json(draft))
        self.notify("Draft copied to the clipboard as JSON.")

    def action_export(self) -> None:
        record = self.run_record()
        if record is None or self.running:
            self.say_why_not("export")
            return
        from console.export import existing_exports
        from console.screens.export_dialog import ExportDialog, default_export_dir

        run_id = str(record.result.get("run_id") or "run")
        options = self.app.options
        folder = self.last_export_dir or options.export_dir or default_export_dir()
        dialog = ExportDialog(
            folder, lambda folder: existing_exports(folder, run_id), cursor_blink=options.cursor_blink
        )
        self.app.push_screen(dialog, self._export_to)

    def _export_to(self, target: ExportTarget | None) -> None:
        record = self.run_record()
        if target is None or record is None:
            return
        from console.export import write_run

        exported_at = self.app.options.clock().isoformat(timespec="seconds")
        protected = self.app.env.audit_files if self.app.env is not None else ()
        try:
            written = write_run(
                record, target.directory, exported_at, replace=target.replace, protected=protected
            )
        except OSError as exc:
            self.notify(str(exc), title="Export failed", severity="error", markup=False)
            return
        self.last_export_dir = target.directory  # the next export starts there
        self.notify(
            "\n".join(path.name for path in written), title=f"Exported to {target.directory}", markup=False
        )

    def run_record(self) -> RunRecord | None:
        if self.state.result is None:
            return None
        from console.export import RunRecord

        return RunRecord(
            query=self.state.query if self.state.query is not None else self.last_query,
            previous_turn=self.state.previous_turn,
            model=self.state.model or self.app.engine_status.label,
            result=self.state.result,
            events=tuple(self.state.events),
        )

    # ------------------------------------------------------------------ the run pipeline
    def on_run_submitted(self, message: RunSubmitted) -> None:
        env = self.app.env
        status = self.app.engine_status
        if status.state == "loading":
            self.queued = message
            self._set_activity("run queued: it starts as soon as the engine is ready")
            return
        if env is None or status.state != "ready":
            reason = status.message or "the engine did not start"
            self.notify(f"Cannot run: {reason}", severity="warning", markup=False)
            return
        self.last_query = message.query
        self.state = RunState()
        self._inbox.clear()
        self.run_view.reset(self.state)
        self._say_if_scripted(env.replays_a_script_for(message.query, message.previous_turn))
        self._drain_timer.resume()
        self._run_started = time.monotonic()
        self._ticker.resume()
        self._worker = self._execute(env, message.query, message.previous_turn)
        self.running = True
        self._forget_why()
        self._set_activity("starting…")

    def _say_if_scripted(self, scripted: bool) -> None:
        """Where the operator looks: a toast as the run starts, and a line above its result."""
        notice = None
        if scripted:
            notice = Text.assemble((SCRIPTED_NOTICE, "bold yellow"), "\n", (SCRIPTED_NOTICE_POINTER, "dim"))
            self.notify(
                SCRIPTED_NOTICE_DETAIL, title=SCRIPTED_NOTICE, severity="warning", markup=False, timeout=8
            )
        self.run_view.query_one(ResultView).show_notice(notice)

    @work(exclusive=True, group="run", exit_on_error=False)
    async def _execute(self, env: Any, query: str, previous_turn: dict[str, Any] | None) -> dict[str, Any]:
        options = self.app.options
        use_case = env.use_case(
            sinks=[self._inbox.append], session_id=options.session_id, run_id_factory=options.run_id_factory
        )
        self.use_case = use_case
        try:
            result = await use_case.execute(query, previous_turn)
        finally:
            self._drain()  # the tail of the stream (run_finished) starts drawing before the worker ends
        return dict(result.to_json_dict())

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.worker is not self._worker:
            return
        if event.state == WorkerState.SUCCESS:
            self._run_ended()
        elif event.state == WorkerState.CANCELLED:
            self.post_message(RunAborted(cancelled=True))
        elif event.state == WorkerState.ERROR:
            error = event.worker.error
            self.post_message(RunAborted(cancelled=False, error=f"{type(error).__name__}: {error}"))

    def _drain(self, *, reschedule: bool = True) -> bool:
        """Apply queued events for at most DRAIN_SLICE_S, then redraw once: the batch is the unit of
        redraw, not the event. True if events remain; they are applied in the next slice, after any key
        that arrived meanwhile (`reschedule`: queue that slice now rather than at the next tick)."""
        inbox = self._inbox
        if not inbox:
            return False
        apply = self.state.apply
        deadline = time.perf_counter() + DRAIN_SLICE_S
        while inbox:
            apply(inbox.popleft())
            if not len(inbox) % 128 and time.perf_counter() > deadline:
                break
        self.run_view.sync()
        self._set_activity()
        if inbox and reschedule:
            self.call_later(self._drain)
        return bool(inbox)

    def on_run_aborted(self, message: RunAborted) -> None:
        self._run_ended(message)

    def _run_ended(self, aborted: RunAborted | None = None) -> None:
        """The worker is done: apply the rest of its events (in slices, input first), then end the run."""
        if self._drain(reschedule=False):
            self.call_later(self._run_ended, aborted)
            return
        self._drain_timer.pause()
        self._ticker.pause()
        self.run_view.query_one(BudgetGauge).tick(None)  # the engine's last figure is the run's
        if self.state.result is not None:
            self.carry = None  # a carried turn is consumed by the run that sent it
        self.running = False  # bindings refresh: the finished run's Draft enables copy, follow-up, export
        self.runs_ended += 1
        self._forget_why()
        self._set_activity()
        if aborted is not None and aborted.error is not None and self.state.result is None:
            self.run_view.query_one(ResultView).show_failure(aborted.error)
            self.notify(aborted.error, title="The run failed", severity="error", markup=False, timeout=10)
            self._set_activity("failed")

    # ------------------------------------------------------------------ engine changes
    def engine_ready(self, limits: BudgetGauges | None) -> None:
        """The (re)opened engine is ready: show its limits, then start a run queued while it loaded.
        The queued run sends what the query box holds now (a scenario's query fills it on load)."""
        if limits is not None:
            self.run_view.show_limits(limits)
        self._set_activity()
        queued, self.queued = self.queued, None
        if queued is not None:
            area = self.query_one("#query", QueryBox)
            self.notify("The engine is ready: the queued run starts.", markup=False)
            self.post_message(RunSubmitted(area.current_text(), self.carry))

    def engine_failed(self, reason: str) -> None:
        if self.queued is not None:
            self.queued = None
            self.notify(f"The queued run cannot start: {reason}", severity="error", markup=False)
        self._forget_why()
        self._set_activity()

    def clear_run(self) -> None:
        """Another scenario or engine: the previous run, its Draft and its carried turn are not this one's."""
        self.state = RunState()
        self._inbox.clear()
        self.queued = None  # a run queued for the old scenario is not one the operator asked of this one
        self.last_query = ""
        self.carry = None
        self.run_view.reset(self.state)
        self._say_if_scripted(False)
        self.refresh_bindings()
        self._forget_why()
        self._set_activity()

    def _running_s(self) -> float | None:
        """How long the run in progress has been going (None: no run, or timings hidden)."""
        if self.running and self.app.options.show_timings and self._run_started is not None:
            return time.monotonic() - self._run_started
        return None

    def _tick(self) -> None:
        self.run_view.query_one(BudgetGauge).tick(self._running_s())
        self._set_activity()

    def _set_activity(self, override: str | None = None) -> None:
        if override is None and self._why_shown is not None:
            return  # the reason a dimmed key gave stays until its timer ends
        elapsed = self._running_s()
        if override is None and self.queued is not None:
            override = "run queued: it starts as soon as the engine is ready"
        if override is None and not self.running and self.app.engine_status.state == "failed":
            override = "no engine: nothing can run · f4 picks another scenario"
        self.activity = override or activity_text(self.state, self.running, elapsed)


# The keys whose actions this screen dims when they cannot run (check_action None): pressed anyway, they
# say why (InvestigateScreen.on_key). Read from the binding table, so a rebound key keeps explaining.
DIMMABLE_KEYS: dict[str, str] = {
    key.strip(): binding.action
    for binding in InvestigateScreen.BINDINGS
    if isinstance(binding, Binding) and binding.action in ("run", "follow_up", "copy_draft", "export")
    for key in binding.key.split(",")
}


def activity_text(state: RunState, running: bool, elapsed_s: float | None = None) -> str:
    if state.result is not None:
        failure = state.result.get("failure") or {}
        cause = f" · {failure['cause']}" if isinstance(failure, dict) and failure.get("cause") else ""
        return f"finished: {state.outcome}{cause} (exit {exit_code(str(state.outcome))})"
    if not running and state.phase == "idle":
        return "idle · ctrl+r runs the query"
    label = f"running {elapsed_s:.0f} s" if elapsed_s is not None else "running"
    running_calls = [c for c in state.calls.values() if c.status == CallState.RUNNING]
    if running_calls:
        call = running_calls[-1]
        return f"{label}: {call.tool_call_id} {call.tool} · escape cancels"
    if state.round_in_flight is not None:
        return f"{label}: model round {state.round_in_flight} · escape cancels"
    return f"{label} · escape cancels"
