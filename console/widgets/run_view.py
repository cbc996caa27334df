"""RunView: timeline, detail, budget gauge, protocol panel and result of one run, drawn from a RunState.

The investigate screen feeds it live events; the audit replay feeds it a converted timeline. Either way
it redraws once per batch (`sync`), only what changed.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical

from console.messages import CitationSelected
from console.widgets.budget import BudgetGauge
from console.widgets.detail import DetailPanel
from console.widgets.protocol import ProtocolPanel
from console.widgets.result import ResultView
from console.widgets.run_state import Changes, RunState
from console.widgets.timeline import Timeline, TimelineKey


class RunView(Horizontal):
    def __init__(self, *, show_timings: bool = True, id: str | None = None) -> None:
        super().__init__(id=id)
        self.show_timings = show_timings
        self.state = RunState()
        self.batches = 0  # how many redraws the current run has cost (tests check bursts are batched)

    def compose(self) -> ComposeResult:
        with Vertical(id="run-left"):
            timeline = Timeline(show_timings=self.show_timings, id="timeline")
            timeline.border_title = "Timeline"
            yield timeline
            detail = DetailPanel(show_timings=self.show_timings, id="detail")
            detail.border_title = "Detail"
            yield detail
        with Vertical(id="run-right"):
            gauge = BudgetGauge(show_timings=self.show_timings, id="budget")
            gauge.border_title = "Budget"
            yield gauge
            protocol = ProtocolPanel(id="protocol")
            protocol.border_title = "Progress protocol"
            yield protocol
            result = ResultView(id="result")
            result.border_title = "Result"
            yield result

    @property
    def timeline(self) -> Timeline:
        return self.query_one(Timeline)

    def reset(self, state: RunState) -> None:
        """Start drawing a new run."""
        self.state = state
        self.batches = 0
        self.timeline.reset_run()
        self.query_one(DetailPanel).show(state, None)
        self._draw(state.take_changes(), result=True)

    def sync(self) -> None:
        changes = self.state.take_changes()
        self.batches += 1
        self._draw(changes, result=changes.result or changes.header)

    def _draw(self, changes: Changes, result: bool) -> None:
        state = self.state
        self.timeline.sync(state, changes)
        self.query_one(BudgetGauge).update_budget(state.budget, state.ending_budget)
        self.query_one(ProtocolPanel).update_state(state)
        if result:
            self.query_one(ResultView).show(state)
        detail = self.query_one(DetailPanel)
        key = detail.key
        if key is not None and (
            (key[0] == "call" and key[1] in changes.calls)
            or (key[0] == "round" and key[1] in changes.rounds)
            or (key[0] == "finish" and changes.result)
        ):
            detail.show(state, key)

    def on_timeline_entry_highlighted(self, message: Timeline.EntryHighlighted) -> None:
        message.stop()
        self.show_detail(message.key)

    def show_detail(self, key: TimelineKey | None) -> None:
        self.query_one(DetailPanel).show(self.state, key)

    def on_citation_selected(self, message: CitationSelected) -> None:
        message.stop()
        if self.timeline.jump_to(message.tool_call_id):
            self.timeline.focus()
            self.show_detail(("call", message.tool_call_id))
        else:
            self.notify(f"{message.tool_call_id} is not a call of this run", severity="warning", markup=False)
