"""The live timeline: one row per model round, its tool calls under it, run-level protocol notes between.

It is a line widget (a `ScrollView` that paints only the rows in view, as Textual's `Log` does), not a
`Tree`: a 10,000-event run must not re-lay out every row on each 50 ms batch. Appending a row appends
one line; a relabelled row repaints only its own line, and only if it is in view. Labels are Rich `Text`
built from parts, never markup strings: tool inputs and IDs come from the model.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.cache import LRUCache
from textual.geometry import Region, Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from agent.vocabulary import InvocationStatus, ProtocolCode
from console.presentation import (
    EVALUATION_STYLE,
    OUTCOME_MEANING,
    OUTCOME_STYLE,
    STATUS_STYLE,
    STATUS_TEXT,
    STOP_CAUSE_NOTE,
    TOOL_CALL_CAP_NOTE,
    counted,
    exit_code,
)
from console.run_state import CallRow, Changes, RoundRow, RunState
from console.safe_text import neutralize
from tools.definitions import ToolName
from tools.vocabulary import ErrorCode, EvidenceStatus

if TYPE_CHECKING:
    from agent.events.run_events import ProtocolChanged

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
    if tool == ToolName.QUERY_LOGS:
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
    asked = counted(calls, "tool call") if calls else ""
    reply = "final text" if row.has_text and not calls else ("text + calls" if row.has_text else "")
    for part in (tokens, asked, reply, duration_text(row.duration_ms, show_timings)):
        if part:
            label.append("  ·  ", style="dim")
            label.append(part, style="dim" if part == tokens else "")
    return label


def call_label(row: CallRow, show_timings: bool, width: int = 100) -> Text:
    """`width`: the cells the row may use (the input summary is clipped to fit)."""
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
    # The duration comes before the input summary, which takes whatever width is left: a narrow panel
    # never loses the duration, a maximised one shows more of the input.
    timing = duration_text(row.duration_ms, show_timings)
    if timing:
        label.append(f"  {timing}", style="dim")
    summary = input_summary(row.tool, row.input, max(width - label.cell_len - 2, 12))
    if summary:
        label.append(f"  {summary}", style="dim")
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
    elif code == ProtocolCode.TOO_MANY_CALLS:
        ids = neutralize(", ".join(str(i) for i in detail.get("tool_call_ids") or []), newlines=False)
        cap = TOOL_CALL_CAP_NOTE.get(str(detail.get("cap")), "a cap")
        limit = neutralize(str(detail.get("limit")), newlines=False)
        label.append(f"  {cap} of {limit} calls reached; not executed: {ids}", style="dim")
    return label


def finish_label(state: RunState) -> Text:
    outcome = state.outcome or "?"
    label = Text.assemble(
        ("■ ", OUTCOME_STYLE.get(outcome, "")), (f"{outcome} / {state.stop_reason}", "bold")
    )
    if outcome in OUTCOME_MEANING:
        label.append(f"  exit {exit_code(outcome)}: {OUTCOME_MEANING[outcome]}", style="dim")
    return label


class Row:
    """One timeline line's entry: a round (holding its calls), a call, a run-level note or the run's end.

    `label` and `children` keep the shape of a tree node, so tests and tools can walk the rows.
    """

    __slots__ = ("children", "data", "expanded", "owner", "parent", "version")

    def __init__(self, owner: Timeline, data: TimelineKey, parent: Row | None = None) -> None:
        self.owner = owner
        self.data = data
        self.parent = parent
        self.children: list[Row] = []
        self.expanded = True
        self.version = 0  # bumped when the row's label changes: the line cache is keyed by it

    @property
    def label(self) -> Text:
        return self.owner.label_for(self, 100)


# One help row for both arrow keys: the help lists a binding by its tooltip, keys of one tooltip together.
MOVE = "Move; the detail panel shows the highlighted entry"


class Timeline(ScrollView, can_focus=True):
    """Grows as events arrive; moving the cursor shows the row's detail, space folds a round."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "cursor(-1)", "Up", show=False, tooltip=MOVE),
        Binding("down", "cursor(1)", "Down", show=False, tooltip=MOVE),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("home", "cursor_to(0)", "First", show=False),
        Binding("end", "cursor_to(-1)", "Last", show=False),
        Binding("enter", "select", "Detail", tooltip="Show the entry in the detail panel (narrow: its tab)"),
        Binding("space", "toggle_fold", "Fold", tooltip="Fold or unfold a round"),
    ]
    COMPONENT_CLASSES: ClassVar[set[str]] = {"timeline--cursor", "timeline--fold"}
    DEFAULT_CSS = """
    Timeline {
        & > .timeline--fold { color: $text-muted; }
        & > .timeline--cursor { background: $block-cursor-blurred-background; }
        &:focus > .timeline--cursor {
            color: $block-cursor-foreground;
            background: $block-cursor-background;
            text-style: $block-cursor-text-style;
        }
    }
    """

    @dataclass
    class EntryHighlighted(Message):
        """The cursor is on an entry: the detail panel shows it."""

        key: TimelineKey | None

    @dataclass
    class EntrySelected(Message):
        """Enter on an entry: the detail panel shows it, and comes forward where it is a tab."""

        key: TimelineKey

    def __init__(self, *, show_timings: bool = True, id: str | None = None) -> None:
        super().__init__(id=id)
        self.show_timings = show_timings
        self.state = RunState()
        self.root = Row(self, ("root", None))
        self._lines: list[Row] = []  # the visible rows, top to bottom
        self._line_of: dict[TimelineKey, int] = {}
        self._rows: dict[TimelineKey, Row] = {}
        self.cursor_line = -1
        self._cache: LRUCache[tuple[TimelineKey, int, bool, int], Strip] = LRUCache(1024)

    # ------------------------------------------------------------------ rows
    @property
    def cursor_node(self) -> Row | None:
        """The row under the cursor (None before the cursor is placed)."""
        return self._lines[self.cursor_line] if 0 <= self.cursor_line < len(self._lines) else None

    @property
    def line_count(self) -> int:
        return len(self._lines)

    def label_for(self, row: Row, width: int) -> Text:
        state = self.state
        kind, value = row.data
        if kind == "round":
            return round_label(state.rounds[value], self.show_timings)
        if kind == "call":
            return call_label(state.calls[value], self.show_timings, width)
        if kind == "note":
            return note_label(state.notes[value])
        return finish_label(state)

    def reset_run(self) -> None:
        self.root.children.clear()
        self._lines.clear()
        self._line_of.clear()
        self._rows.clear()
        self._cache.clear()
        self.cursor_line = -1
        self.virtual_size = Size(0, 0)
        self.scroll_home(animate=False, immediate=True)
        self.refresh()

    def sync(self, state: RunState, changes: Changes) -> None:
        """Apply one batch of changes: append new rows, repaint changed ones; nothing else is touched."""
        self.state = state
        rebuild = False
        first_new = len(self._lines)
        for entry in changes.new_entries:
            row = Row(self, (entry.kind, entry.key), self.root)
            self.root.children.append(row)
            self._rows[row.data] = row
            self._append_line(row)
        for tool_call_id in changes.new_calls:
            call = state.calls[tool_call_id]
            parent = self._rows.get(("round", call.round)) if call.round is not None else None
            row = Row(self, ("call", tool_call_id), parent or self.root)
            self._rows[row.data] = row
            (parent or self.root).children.append(row)
            if parent is None:
                self._append_line(row)
            elif parent.expanded:
                last = self._lines[-1] if self._lines else None
                if last is parent or (last is not None and last.parent is parent):
                    self._append_line(row)  # the usual case: the call belongs to the newest round
                else:
                    rebuild = True  # a note came in between: the call goes under its round
        touched: list[TimelineKey] = [("round", number) for number in changes.rounds]
        touched += [("call", tool_call_id) for tool_call_id in changes.calls]
        top, height = self.scroll_offset.y, self.size.height
        for key in touched:
            changed = self._rows.get(key)
            if changed is not None:
                changed.version += 1
                line = self._line_of.get(key)
                if line is not None and top <= line < top + height:
                    self.refresh(Region(0, line - top, self.size.width, 1))
        if rebuild:
            self._rebuild()
        elif first_new < top + height and first_new < len(self._lines):
            self.refresh()  # new rows are in view
        if self.virtual_size.height != len(self._lines):
            self.virtual_size = Size(0, len(self._lines))
        if (changes.new_entries or changes.new_calls) and not self.has_focus:
            self.scroll_end(animate=False, immediate=False)

    def _append_line(self, row: Row) -> None:
        self._line_of[row.data] = len(self._lines)
        self._lines.append(row)

    def _rebuild(self) -> None:
        """Recompute the visible lines (a fold, or a row inserted above the end); keeps the cursor's row."""
        current = self.cursor_node
        self._lines = []
        for row in self.root.children:
            self._lines.append(row)
            if row.expanded:
                self._lines.extend(row.children)
        self._line_of = {row.data: i for i, row in enumerate(self._lines)}
        self.virtual_size = Size(0, len(self._lines))
        if current is not None:
            self.cursor_line = self._line_of.get(current.data, min(self.cursor_line, len(self._lines) - 1))
        self.refresh()

    def _refresh_line(self, line: int | None) -> None:
        top = self.scroll_offset.y
        if line is not None and top <= line < top + self.size.height:
            self.refresh(Region(0, line - top, self.size.width, 1))

    # ------------------------------------------------------------------ painting
    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._cache.clear()

    def render_line(self, y: int) -> Strip:
        line = self.scroll_offset.y + y
        width = self.scrollable_content_region.width
        if not 0 <= line < len(self._lines):
            return Strip.blank(width, self.rich_style)
        row = self._lines[line]
        cursor = line == self.cursor_line
        key = (row.data, row.version, cursor and self.has_focus, width)
        strip = self._cache.get(key) if not cursor else None
        if strip is None:
            strip = self._paint(row, cursor, width)
            if not cursor:
                self._cache[key] = strip
        return strip.apply_offsets(0, line)

    def _paint(self, row: Row, cursor: bool, width: int) -> Strip:
        fold = self.get_component_rich_style("timeline--fold")
        if row.data[0] == "round":
            text = Text("▾ " if row.expanded else "▸ ", style=fold)
        else:
            text = Text("    " if row.parent is not self.root else "  ")
        text.append_text(self.label_for(row, max(width - text.cell_len, 20)))
        text.truncate(width, overflow="ellipsis")
        if cursor:
            text.stylize(self.get_component_rich_style("timeline--cursor"))
        text.no_wrap = True
        segments = list(text.render(self.app.console, end=""))
        return Strip(segments).adjust_cell_length(width, self.rich_style).apply_style(self.rich_style)

    # ------------------------------------------------------------------ the cursor
    def move_cursor_to_line(self, line: int, *, announce: bool = True) -> None:
        if not self._lines:
            return
        line = max(0, min(line, len(self._lines) - 1))
        previous, self.cursor_line = self.cursor_line, line
        self._refresh_line(previous)
        self._refresh_line(line)
        self.scroll_to_region(
            Region(0, line, max(self.scrollable_content_region.width, 1), 1), animate=False, force=True
        )
        if announce:
            self.post_message(self.EntryHighlighted(self._lines[line].data))

    def action_cursor(self, delta: int) -> None:
        self.move_cursor_to_line(max(self.cursor_line, 0) + delta if self.cursor_line >= 0 else 0)

    def action_page(self, direction: int) -> None:
        self.move_cursor_to_line(max(self.cursor_line, 0) + direction * max(self.size.height - 1, 1))

    def action_cursor_to(self, line: int) -> None:
        self.move_cursor_to_line(line if line >= 0 else len(self._lines) - 1)

    def action_select(self) -> None:
        row = self.cursor_node
        if row is not None:
            self.post_message(self.EntrySelected(row.data))

    def action_toggle_fold(self) -> None:
        row = self.cursor_node
        if row is not None and row.data[0] == "call" and row.parent is not self.root:
            row = row.parent
        if row is None or not row.children:
            return
        row.expanded = not row.expanded
        row.version += 1
        self._rebuild()
        self.move_cursor_to_line(self._line_of[row.data], announce=False)

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None:
            return
        line = self.scroll_offset.y + offset.y
        if 0 <= line < len(self._lines):
            if line == self.cursor_line and self._lines[line].children and offset.x < 2:
                self.action_toggle_fold()
            else:
                self.move_cursor_to_line(line)

    def on_focus(self) -> None:
        if self.cursor_line < 0 and self._lines:
            self.move_cursor_to_line(0)
        else:
            self._refresh_line(self.cursor_line)

    def on_blur(self) -> None:
        self._refresh_line(self.cursor_line)

    def jump_to(self, tool_call_id: str) -> bool:
        """Move the cursor to a tool call (from a Draft citation); False if this run has no such call."""
        row = self._rows.get(("call", tool_call_id))
        if row is None:
            return False
        if row.parent is not None and not row.parent.expanded:
            row.parent.expanded = True
            row.parent.version += 1
            self._rebuild()
        self.move_cursor_to_line(self._line_of[row.data])
        return True
