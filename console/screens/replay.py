"""Replaying an audited run in the same widgets as a live one.

The audit rows are converted back into typed run events and fed to the same RunState reducer. Only
what the audit keeps is replayed: no model-facing observations (the projection is shown instead), no
protocol counters, no previous turn, no limits; the events leave those fields out and the widgets say
so rather than inventing them (docs/contracts.md, "Audit replay").
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual import getters, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import Static

from audit.replay import timeline_events
from console.host import ConsoleHost
from console.run_setup import run_setup_text
from console.safe_text import neutralize
from console.widgets.footer import ConsoleFooter
from console.widgets.run_state import RunState
from console.widgets.run_view import RunView
from console.widgets.status_bar import StatusBar

if TYPE_CHECKING:
    from audit.browse import RunTimeline


# The status bar names the replayed run's model; runs audited before the audit kept it have none.
MODEL_NOT_RECORDED = "model not recorded in the audit"


class ReplayScreen(Screen[None]):
    CSS_PATH = Path(__file__).with_name("replay.tcss")
    # The same panel keys as the investigate screen, shown here: a replay has no query box to type in,
    # so the footer has room for them.
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Back", tooltip="Back to the audit"),
        Binding("f5", "go_to('timeline')", "Timeline", tooltip="Go to the timeline"),
        Binding("f6", "go_to('detail')", "Detail", tooltip="Go to the detail panel"),
        Binding("f7", "go_to('result')", "Citations", tooltip="Go to the citations and checks"),
    ]

    app = getters.app(ConsoleHost)

    def __init__(self, run_id: str, focus_call: str | None = None) -> None:
        super().__init__(id="replay")
        self.run_id = run_id
        self.focus_call = focus_call

    def compose(self) -> ComposeResult:
        # The run's ID leads the activity: a narrow bar keeps it over the caveats that follow it.
        yield StatusBar("Replay", model=MODEL_NOT_RECORDED, id="status")
        yield Static(id="replay-query")
        yield RunView(show_timings=self.app.options.show_timings, id="run")
        yield ConsoleFooter(self.app.size.width)

    def on_mount(self) -> None:
        run = neutralize(self.run_id, newlines=False)
        self.query_one(StatusBar).set_activity(f"run {run} · audited: no observations or counters")
        self._load()

    @work(thread=True, exclusive=True, group="replay", exit_on_error=False)
    def _load(self) -> None:
        from audit.browse import AuditBrowser

        env = self.app.env
        if env is None:  # the audit screen opens a replay only once the engine is open
            return
        timeline = AuditBrowser(env.audit).timeline(self.run_id)
        self.app.call_from_thread(self._show, timeline)

    def _show(self, timeline: RunTimeline | None) -> None:
        query = self.query_one("#replay-query", Static)
        if timeline is None:
            query.update(Text(f"run {self.run_id} is not in the audit", style="red"))
            return
        state = RunState()
        state.apply_all(timeline_events(timeline))
        view = self.query_one(RunView)
        view.reset(state)
        view.sync()
        query.update(Text.assemble(("query ", "bold"), neutralize(str(timeline.run["query"] or "—"))))
        model, limits = run_setup_text(timeline.run)
        status = self.query_one(StatusBar)
        status.model = model if model != "not recorded" else MODEL_NOT_RECORDED
        run = neutralize(self.run_id, newlines=False)
        status.set_activity(f"run {run} · audited: no observations or counters · limits: {limits}")
        if self.focus_call is not None and view.timeline.jump_to(self.focus_call):
            view.show_detail(("call", self.focus_call))
        view.timeline.focus()

    def action_go_to(self, panel: str) -> None:
        self.query_one(RunView).go_to(panel)

    def action_close(self) -> None:
        self.dismiss(None)
