"""The detail panel: the selected timeline entry as pretty-printed JSON, never paraphrased.

For a tool call it shows the observation exactly as the model received it: from `tool_finished`, or, for
a call that ran nothing, the control (or error) observation a live run carries off the wire on the round's
`budget_changed`. When no event carried one (a replay from the audit or an NDJSON file, which keep only
the wire's JSON) it says so in words instead of reconstructing one.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from rich.console import Group, RenderableType
from rich.json import JSON
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from console.presentation import CallState
from console.run_state import CallRow, RunState
from console.safe_text import neutralize
from console.widgets.timeline import TimelineKey
from tools.vocabulary import EvidenceStatus

if TYPE_CHECKING:
    from agent.events.run_events import RunEvent

EVENT_NOISE = ("type", "run_id", "session_id")
TIMING_KEYS = ("at", "duration_ms", "elapsed_s")  # masked when timings are hidden (snapshots)


def json_block(data: Any) -> RenderableType:
    """Exact JSON (key order kept, non-ASCII readable); highlighted, never parsed as markup, and with
    characters that could drive the terminal shown as JSON escapes (the same value, visible)."""
    block = JSON(neutralize(json.dumps(data, ensure_ascii=False, indent=2), form="json"))
    block.text.no_wrap = False  # Rich's default clips long lines: the evidence is wrapped, never cut
    block.text.overflow = "fold"
    return block


def heading(text: str) -> Text:
    return Text(text, style="bold underline")


def _event_view(event: RunEvent, show_timings: bool) -> dict[str, Any]:
    return {
        key: value if show_timings or key not in TIMING_KEYS else "(hidden)"
        for key, value in event.to_wire().items()
        if key not in EVENT_NOISE
    }


def call_detail(state: RunState, tool_call_id: str) -> list[RenderableType]:
    row = state.calls[tool_call_id]
    title = Text.assemble(
        (neutralize(row.tool_call_id, newlines=False), "bold"),
        "  ",
        (neutralize(row.tool, newlines=False), "cyan") if row.tool else ("(tool name not recorded)", "dim"),
    )
    title.append(f"  round {row.round}" if row.round is not None else "")
    title.append(f"  {row.status}")
    parts: list[RenderableType] = [title]
    if row.evaluated_by:
        parts.append(Text(f"evaluated {row.evaluation} by the model in {row.evaluated_by}", style="dim"))
    if row.evaluates:
        parts.append(Text(f"carried the evaluation of {row.evaluates[0]}: {row.evaluates[1]}", style="dim"))
    parts += [Text("")]
    from agent.events.run_events import ProtocolChanged, ToolFinished  # loaded by the first event anyway

    executed = any(isinstance(e, ToolFinished) for e in row.events)
    if row.has_observation:
        if not executed:
            parts.append(Text(_NOT_RUN.get(row.status, _NOT_RUN[EvidenceStatus.NOT_EXECUTED])))
        parts += [heading("Observation — exactly what the model saw"), json_block(row.observation)]
    else:
        parts += [heading("Observation"), Text(_no_observation(row, executed), style="italic")]
    if row.input is not None:
        parts += [Text(""), heading("Business input"), json_block(row.input)]
    observed_data = row.observation.get("data") if isinstance(row.observation, dict) else None
    if row.projection is not None and row.projection != observed_data:
        parts += [Text(""), heading("Safe projection (as audited)"), json_block(row.projection)]
    protocol = [e for e in row.events if isinstance(e, ProtocolChanged)]
    if protocol:
        parts += [Text(""), heading("Protocol events")]
        parts += [
            json_block({"code": e.code, "tool_call_id": e.tool_call_id, "detail": e.detail}) for e in protocol
        ]
    return parts


# Said above the observation of a call that ran nothing, by the call's status.
_NOT_RUN: dict[str, str] = {
    EvidenceStatus.NOT_EXECUTED: "Not executed: nothing ran for this call. Instead of evidence the model "
    "received this control observation (why: the protocol events below).",
    EvidenceStatus.ERROR: "Not executed: its input was refused before anything ran. The model received "
    "this error observation.",
}


def _no_observation(row: CallRow, executed: bool) -> str:
    """Why no observation is shown, in the operator's words; never a reconstruction of one."""
    if row.status == CallState.RUNNING:
        return "the tool is running; the observation appears when it finishes"
    if row.status == CallState.REQUESTED:
        return "the model asked for this call; it has not been answered yet"
    if executed:
        return "no observation recorded for this call (cancelled, or replayed from the audit)"
    if row.status == EvidenceStatus.ERROR:
        code = neutralize(str(row.error_code), newlines=False)
        return (
            "Not executed: its input was refused before anything ran; the model received an error "
            f"observation (evidence_status ERROR, error_code {code}). "
            "This record does not hold its exact text (only a live run keeps it)."
        )
    controls = ", ".join(dict.fromkeys(neutralize(str(c), newlines=False) for c in row.controls))
    return (
        "Not executed. Instead of evidence the model received a control observation: "
        f"evidence_status NOT_EXECUTED{f', control {controls}' if controls else ''} "
        "(why: the protocol events below). This record does not hold its exact text (only a live run "
        "keeps it)."
    )


def round_summary(state: RunState, number: int) -> Text:
    """A round in the operator's words: what the model was asked to spend and what it answered."""
    row = state.rounds[number]
    if not row.finished:
        return Text("ended before the model replied" if state.result else "waiting for the model", "italic")
    estimated = "~" if row.usage_estimated else ""
    text = Text(
        f"{estimated}{row.prompt_tokens or 0} prompt + {row.completion_tokens or 0} completion tokens"
    )
    if row.tool_call_ids:
        asked = []
        for tool_call_id in row.tool_call_ids:
            call = state.calls.get(tool_call_id)
            tool = call.tool if call is not None and call.tool else "?"
            asked.append(f"{neutralize(tool_call_id, newlines=False)} ({neutralize(tool, newlines=False)})")
        text.append("\nasked for: " + ", ".join(asked))
    if row.has_text:
        text.append("\nreplied with text" + (" (the Draft is in the Result panel)" if state.draft else ""))
    return text


def entry_detail(state: RunState, key: TimelineKey | None, show_timings: bool = True) -> list[RenderableType]:
    if key is None:
        return [Text("Select a timeline entry to see what the agent saw.", style="dim")]
    kind, value = key
    if kind == "call" and value in state.calls:
        return call_detail(state, value)
    if kind == "round" and value in state.rounds:
        row = state.rounds[value]
        parts: list[RenderableType] = [
            Text(f"Model round {value}", style="bold"),
            round_summary(state, value),
        ]
        parts += [Text(""), heading("Events of this round, as emitted")]
        return parts + [json_block(_event_view(e, show_timings)) for e in row.events]
    if kind == "note" and 0 <= value < len(state.notes):
        note = _event_view(state.notes[value], show_timings)
        return [Text("run-level protocol event", style="bold"), json_block(note)]
    if kind == "finish" and state.result is not None:
        return [
            Text("Run result", style="bold"),
            Text("exactly what `diagnose run --json` prints for this run", style="dim"),
            json_block(state.result),
        ]
    return [Text("nothing recorded for this entry", style="dim")]


class DetailPanel(VerticalScroll, can_focus=True):
    """Scrollable; its content is replaced whenever the highlighted entry (or that entry's row) changes."""

    ALLOW_MAXIMIZE = True  # f8 maximises the whole panel

    def __init__(self, *, show_timings: bool = True, id: str | None = None) -> None:
        super().__init__(id=id)
        self.show_timings = show_timings
        self.key: TimelineKey | None = None

    def compose(self) -> ComposeResult:
        yield Static(Group(*entry_detail(RunState(), None)), id="detail-body")

    def show(self, state: RunState, key: TimelineKey | None) -> None:
        if key != self.key:
            self.scroll_home(animate=False)
        self.key = key
        self.query_one("#detail-body", Static).update(Group(*entry_detail(state, key, self.show_timings)))
