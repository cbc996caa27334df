"""The live timeline: one node per model round, its tool calls under it, run-level protocol notes between.

Labels are Rich `Text` built from parts, never markup strings: tool inputs and IDs come from the model.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from rich.text import Text
from textual.message import Message
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

from console.presentation import (
    EVALUATION_STYLE,
    OUTCOME_MEANING,
    OUTCOME_STYLE,
    STATUS_STYLE,
    STATUS_TEXT,
    STOP_CAUSE_NOTE,
    exit_code,
)
from console.safe_text import neutralize
from console.widgets.run_state import CallRow, Changes, Entry, RoundRow, RunState
from tools.definitions import QUERY_LOGS
from tools.run_events import ProtocolChanged
from tools.vocabulary import ErrorCode, EvidenceStatus, InvocationStatus, ProtocolCode

TimelineKey = tuple[str, Any]  # ("round", n) | ("call", id) | ("note", i) | ("finish", None)


def clip(text: str, width: int) -> str:
    """One line of at most `width` terminal cells (CJK characters take two), shown neutralised."""
    line = Text(neutralize(" ".join(text.split()), newlines=False))
    line.truncate(width, overflow="ellipsis")
    return line.plain


def input_summary(tool: str | None, business: Any, width: int = 60) -> str:
    """The business input in one short line: the values an operator scans for."""
    if not isinstance(business, dict):
        return ""
    if tool == QUERY_LOGS:
        window = f"{business.get('start', '')}…{business.get('end', '')}"
        parts = [str(business.get("service", "")), window]
        for key in ("level", "contains"):
            if business.get(key) is not None:
                parts.append(f"{key}={json.dumps(business[key], ensure_ascii=False)}")
        return clip(" ".join(parts), width)
    parts = [
        f"{key}={json.dumps(value, ensure_ascii=False)}"
        for key, value in business.items()
        if value is not None
    ]
    return clip(" ".join(parts), width)


def duration_text(ms: int | None, show_timings: bool) -> str:
    if ms is None or not show_timings:
        return ""
    return f"{ms} ms" if ms < 10_000 else f"{ms / 1000:.1f} s"


def round_label(row: RoundRow, show_timings: bool) -> Text:
    label = Text.assemble((f"round {row.number}", "bold"))
    if not row.finished:
        if row.unanswered:
            label.append("  no reply: the run ended first", style="dim")
        else:
            label.append("  waiting for the model…", style="italic cyan")
        return label
    tokens = f"{'~' if row.usage_estimated else ''}{row.prompt_tokens or 0}+{row.completion_tokens or 0} tok"
    calls = len(row.tool_call_ids)
    asked = f"{calls} tool call{'s' if calls != 1 else ''}" if calls else ""
    reply = "final text" if row.has_text and not calls else ("text + calls" if row.has_text else "")
    for part in (tokens, asked, reply, duration_text(row.duration_ms, show_timings)):
        if part:
            label.append("  ·  ", style="dim")
            label.append(part, style="dim" if part == tokens else "")
    return label


def call_label(row: CallRow, show_timings: bool) -> Text:
    label = Text.assemble((f"{neutralize(row.tool_call_id, newlines=False):<8}", "bold"), " ")
    label.append(f"{neutralize(row.tool or '—', newlines=False):<16}", style="cyan" if row.tool else "dim")
    label.append(" ")
    label.append(STATUS_TEXT.get(row.status, row.status), style=STATUS_STYLE.get(row.status, ""))
    failed = (EvidenceStatus.ERROR, InvocationStatus.CANCELLED)
    if row.error_code and row.status in failed and row.error_code != row.status:
        label.append(f" {neutralize(str(row.error_code), newlines=False)}", style="red")
    if row.evaluation:
        label.append("  eval ", style="dim")
        label.append(row.evaluation, style=EVALUATION_STYLE.get(row.evaluation, ""))
    for control in dict.fromkeys(row.controls):
        if control == ProtocolCode.INVALID_INPUT and row.error_code == ErrorCode.INVALID_INPUT:
            continue
        label.append(f"  {neutralize(str(control), newlines=False)}", style="bold yellow")
    summary = input_summary(row.tool, row.input, 48)
    if summary:
        label.append(f"  {summary}", style="dim")
    timing = duration_text(row.duration_ms, show_timings)
    if timing:
        label.append(f"  {timing}", style="dim")
    return label


def note_label(event: ProtocolChanged) -> Text:
    code = event.code
    detail = event.detail or {}
    label = Text.assemble(("⚑ ", "yellow"), (str(code), "bold yellow"))
    if code == ProtocolCode.STOP_REQUIRED:
        cause = str(detail.get("cause", ""))
        label.append(
            f"  {STOP_CAUSE_NOTE.get(cause, cause.lower())}: the next round is the last", style="dim"
        )
    elif code == ProtocolCode.COLLECTION_STOPPED:
        ids = neutralize(", ".join(str(i) for i in detail.get("tool_call_ids") or []), newlines=False)
        label.append(f"  final round asked for tools; not executed: {ids}", style="dim")
    return label


def finish_label(state: RunState) -> Text:
    outcome = state.outcome or "?"
    label = Text.assemble(
        ("■ ", OUTCOME_STYLE.get(outcome, "")), (f"{outcome} / {state.stop_reason}", "bold")
    )
    if outcome in OUTCOME_MEANING:
        label.append(f"  exit {exit_code(outcome)}: {OUTCOME_MEANING[outcome]}", style="dim")
    return label


class Timeline(Tree[TimelineKey]):
    """Grows as events arrive; highlighting a row shows its detail, enter on the end shows the result."""

    @dataclass
    class EntryHighlighted(Message):
        """The cursor is on an entry: the detail panel shows it."""

        key: TimelineKey | None

    def __init__(self, *, show_timings: bool = True, id: str | None = None) -> None:
        super().__init__("run", id=id)
        self.show_root = False
        self.guide_depth = 3
        self.show_timings = show_timings
        self._round_nodes: dict[int, TreeNode[TimelineKey]] = {}
        self._call_nodes: dict[str, TreeNode[TimelineKey]] = {}
        self._note_nodes: dict[int, TreeNode[TimelineKey]] = {}

    def reset_run(self) -> None:
        self.clear()
        self._round_nodes.clear()
        self._call_nodes.clear()
        self._note_nodes.clear()

    def sync(self, state: RunState, changes: Changes) -> None:
        """Apply one batch of changes: add new rows, relabel changed ones (no full rebuild)."""
        for entry in changes.new_entries:
            self._add_entry(state, entry)
        for tool_call_id in changes.new_calls:
            self._add_call(state, tool_call_id)
        for number in changes.rounds:
            if number in self._round_nodes:
                self._round_nodes[number].set_label(round_label(state.rounds[number], self.show_timings))
        for tool_call_id in changes.calls:
            node = self._call_nodes.get(tool_call_id)
            if node is not None:
                node.set_label(call_label(state.calls[tool_call_id], self.show_timings))
        if (changes.new_entries or changes.new_calls) and not self.has_focus:
            self.scroll_end(animate=False, immediate=False)

    def _add_entry(self, state: RunState, entry: Entry) -> None:
        if entry.kind == "round":
            row = state.rounds[entry.key]
            self._round_nodes[entry.key] = self.root.add(
                round_label(row, self.show_timings), data=("round", entry.key), expand=True
            )
        elif entry.kind == "note":
            self._note_nodes[entry.key] = self.root.add_leaf(
                note_label(state.notes[entry.key]), data=("note", entry.key)
            )
        else:
            self.root.add_leaf(finish_label(state), data=("finish", None))

    def _add_call(self, state: RunState, tool_call_id: str) -> None:
        row = state.calls[tool_call_id]
        parent = self._round_nodes.get(row.round) if row.round is not None else None
        self._call_nodes[tool_call_id] = (parent or self.root).add_leaf(
            call_label(row, self.show_timings), data=("call", tool_call_id)
        )

    def jump_to(self, tool_call_id: str) -> bool:
        """Move the cursor to a tool call (from a Draft citation); False if this run has no such call."""
        node = self._call_nodes.get(tool_call_id)
        if node is None:
            return False
        if node.parent is not None:
            node.parent.expand()
        self.move_cursor(node)
        self.scroll_to_node(node, animate=False)
        return True

    def on_tree_node_highlighted(self, event: Tree.NodeHighlighted[TimelineKey]) -> None:
        event.stop()
        self.post_message(self.EntryHighlighted(event.node.data))

    def on_tree_node_selected(self, event: Tree.NodeSelected[TimelineKey]) -> None:
        event.stop()
        self.post_message(self.EntryHighlighted(event.node.data))
