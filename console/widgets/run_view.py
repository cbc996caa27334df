"""RunView: timeline, detail, budget gauge, protocol panel and result of one run, drawn from a RunState.

The investigate screen feeds it live events; the audit replay feeds it a converted timeline. Either way
it redraws once per batch (`sync`), only what changed.

Below NARROW_BELOW columns the panels cannot stand side by side (at 80 columns the result column would
leave the timeline 20 cells), so they become tabs (Timeline | Detail | Result) above one-line gauges,
and a finished run brings its Result tab forward.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual import events
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Tab, Tabs

from console.messages import CitationSelected
from console.widgets.budget import BudgetGauge
from console.widgets.detail import DetailPanel
from console.widgets.protocol import ProtocolPanel
from console.widgets.result import ResultView
from console.widgets.run_state import Changes, RunState
from console.widgets.timeline import Timeline, TimelineKey

if TYPE_CHECKING:
    from agent.run_events import BudgetGauges

NARROW_BELOW = 120  # columns: below this the panels are tabs
PANELS = ("timeline", "detail", "result")


class RunView(Vertical):
    def __init__(self, *, show_timings: bool = True, id: str | None = None) -> None:
        super().__init__(id=id)
        self.show_timings = show_timings
        self.state = RunState()
        self.batches = 0  # how many redraws the current run has cost (tests check bursts are batched)
        self.panel = "timeline"  # the tab shown when narrow

    def compose(self) -> ComposeResult:
        # The view spans its screen: its panels are styled for the terminal's width as they mount, so
        # the first frame is laid out once, not restyled and laid out again when the resize arrives.
        narrow = self.app.size.width < NARROW_BELOW
        self.set_class(narrow, "-narrow", f"-show-{self.panel}", update=False)
        yield Tabs(*(Tab(name.title(), id=f"tab-{name}") for name in PANELS), id="run-tabs")
        with Horizontal(id="run-body"):
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
                gauge.set_class(narrow, "-compact", update=False)
                yield gauge
                protocol = ProtocolPanel(id="protocol")
                protocol.border_title = "Progress protocol"
                protocol.set_class(narrow, "-compact", update=False)
                yield protocol
                result = ResultView(id="result")
                result.border_title = "Result"
                yield result

    # ------------------------------------------------------------------ narrow terminals: tabs
    @property
    def narrow(self) -> bool:
        return self.has_class("-narrow")

    def on_resize(self, event: events.Resize) -> None:
        narrow = event.size.width < NARROW_BELOW
        if narrow == self.narrow and self.has_class(f"-show-{self.panel}") == narrow:
            return
        self.set_class(narrow, "-narrow")
        for widget in (self.query_one(BudgetGauge), self.query_one(ProtocolPanel)):
            widget.set_class(narrow, "-compact")
        for panel in PANELS:
            self.set_class(narrow and panel == self.panel, f"-show-{panel}")
        self.show_panel(self.panel)

    def show_panel(self, name: str, *, focus: bool = False) -> None:
        """Bring a panel forward (narrow: its tab; wide: every panel is shown anyway)."""
        self.panel = name
        if self.narrow:  # wide, the classes would restyle every panel for nothing (resizing sets them)
            if not self.has_class(f"-show-{name}"):
                for panel in PANELS:
                    self.set_class(panel == name, f"-show-{panel}")
            tabs = self.query_one("#run-tabs", Tabs)
            if tabs.active != f"tab-{name}":
                tabs.active = f"tab-{name}"
        if focus:
            self.query_one(f"#{name}").focus()

    def on_tabs_tab_activated(self, event: Tabs.TabActivated) -> None:
        event.stop()
        name = str(event.tab.id).removeprefix("tab-")
        if name in PANELS and name != self.panel:
            self.show_panel(name, focus=self.narrow and self.screen.focused is not event.tabs)

    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        """Tab/shift+tab onto a hidden panel's widget cannot happen; focus set by code shows its tab."""
        for name in PANELS:
            panel = self.query_one(f"#{name}")
            if event.widget is panel or panel in event.widget.ancestors:
                if name != self.panel:
                    self.show_panel(name)
                return

    def show_limits(self, limits: BudgetGauges | None) -> None:
        """Before the first run, the budget gauge shows the limits the next run will have."""
        if self.state.budget is None:
            self.query_one(BudgetGauge).update_budget(limits, None)

    @property
    def timeline(self) -> Timeline:
        return self.query_one(Timeline)

    def reset(self, state: RunState) -> None:
        """Start drawing a new run (narrow: on the Timeline tab)."""
        self.state = state
        self.batches = 0
        self.timeline.reset_run()
        if self.panel == "result":
            self.show_panel("timeline")
        self.query_one(DetailPanel).show(state, None)
        self._draw(state.take_changes(), result=True)

    def sync(self) -> None:
        changes = self.state.take_changes()
        self.batches += 1
        self._draw(changes, result=changes.result or changes.header)
        if changes.result and self.state.result is not None:
            self.show_panel("result", focus=self.narrow and self.timeline.has_focus)  # the answer first

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

    def on_timeline_entry_selected(self, message: Timeline.EntrySelected) -> None:
        """Enter shows the entry in the detail panel; where Detail is a tab of its own, that tab."""
        message.stop()
        self.show_detail(message.key)
        if self.narrow:
            self.show_panel("detail", focus=True)

    def go_to(self, name: str) -> None:
        """f5 / f6 / f7: a panel with the keyboard focus (narrow: its tab forward); the result's
        citation list has a visible cursor on its first entry."""
        self.show_panel(name)
        if name == "result":
            self.query_one(ResultView).focus_citations()
        else:
            self.query_one(f"#{name}").focus()

    def show_detail(self, key: TimelineKey | None) -> None:
        self.query_one(DetailPanel).show(self.state, key)

    def on_citation_selected(self, message: CitationSelected) -> None:
        message.stop()
        if self.timeline.jump_to(message.tool_call_id):
            self.show_panel("timeline")
            self.timeline.focus()
            self.show_detail(("call", message.tool_call_id))
        else:
            self.notify(f"{message.tool_call_id} is not a call of this run", severity="warning", markup=False)
