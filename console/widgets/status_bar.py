"""The status bar on every screen: where you are, what is happening, which model/profile runs.

The model label (or the engine's setup error) is always shown whole, spelled one way whatever the width
or the moment (`scripted: NAME`, `openai: NAME @ WHERE`: the label names its provider itself), because
every result must be read against the model that made it and an engine error is said nowhere else once
its toast is gone. When one line cannot hold everything, the decorative parts go first (the `diagnose`
badge, wide separators, the activity's trailing hints such as `· escape cancels`, then the screen's
name); if even that does not fit, the model takes a line of its own (two if it must), an engine error up
to four: it is said nowhere else, and with the engine down there is no run to make room for.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from functools import cache

from rich.console import Console
from rich.text import Text
from textual.geometry import Size
from textual.widget import Widget

from console.messages import EngineStatus
from console.safe_text import neutralize

ENGINE_STYLE = {"loading": "italic", "ready": "bold", "failed": "bold red"}
WIDE_SEPARATOR, SEPARATOR = "  │  ", " │ "
HINT_SEPARATOR = " · "  # an activity's first clause says what happens; the clauses after it are hints
MODEL_LINES, ERROR_LINES = 2, 4  # the most lines of its own the model label or an engine error takes
MAX_LINES = 1 + ERROR_LINES


@dataclass(frozen=True)
class EnginePart:
    """The right-hand part: `text`, kept whole, after `prefix` (`engine: ` before an error)."""

    prefix: str
    text: str
    style: str
    prefix_required: bool = False  # `engine: ` before an error stays: the line would be a bare message
    max_lines: int = MODEL_LINES  # when it cannot share the first line: the lines it may take


def status_lines(width: int, place: str, activity: str, engine: EnginePart) -> list[Text]:
    """The bar's lines for `width` cells: one if any of the shapes below fits, else the engine part on
    lines of its own. Every line fits `width`; the engine text is cut only past `engine.max_lines`."""
    width = max(width, 1)
    clauses = activity.split(HINT_SEPARATOR) if activity else []
    shapes: list[tuple[bool, str, bool, str, int]] = [
        # badge, separator, prefix, place, clauses kept
        (True, WIDE_SEPARATOR, True, place, len(clauses)),
        (False, SEPARATOR, True, place, len(clauses)),
        (False, SEPARATOR, engine.prefix_required, place, len(clauses)),
        *((False, SEPARATOR, engine.prefix_required, place, kept) for kept in range(len(clauses) - 1, 0, -1)),
        (False, SEPARATOR, engine.prefix_required, "", min(len(clauses), 1)),
    ]
    for badge, separator, prefix, shown_place, kept in shapes:
        line = _line(badge, separator, shown_place, HINT_SEPARATOR.join(clauses[:kept]), engine, prefix)
        if line.cell_len <= width:
            return [line]
    first = _line(False, SEPARATOR, place, clauses[0] if clauses else "", None, False)
    first.truncate(width, overflow="ellipsis")
    engine_text = Text.assemble((engine.prefix, "dim"), (engine.text, engine.style))
    wrapped = list(engine_text.wrap(_wrapping_console(), width, overflow="fold"))
    if len(wrapped) > engine.max_lines:
        wrapped = wrapped[: engine.max_lines]
        wrapped[-1].truncate(width - 1)
        wrapped[-1].append("…")
    return [first, *wrapped]


@cache
def _wrapping_console() -> Console:
    """`Text.wrap` wants a console; this one only measures (it never writes anywhere)."""
    return Console(file=io.StringIO(), color_system=None, legacy_windows=False)


def _line(
    badge: bool, separator: str, place: str, activity: str, engine: EnginePart | None, prefix: bool
) -> Text:
    text = Text(no_wrap=True, overflow="ellipsis")
    if badge:
        text.append(" diagnose ", style="reverse bold")
        text.append(" ")
    parts: list[Text] = []
    if place:
        parts.append(Text(place, style="bold"))
    if activity:
        parts.append(Text(activity))
    if engine is not None:
        shown = Text.assemble((engine.prefix, "dim")) if prefix else Text()
        shown.append(engine.text, style=engine.style)
        parts.append(shown)
    for i, part in enumerate(parts):
        if i:
            text.append(separator, style="dim")
        text.append_text(part)
    return text


class StatusBar(Widget):
    def __init__(self, place: str, *, model: str | None = None, id: str | None = None) -> None:
        """`model` pins the label (an audit replay shows its own run's model, not the engine's)."""
        super().__init__(id=id)
        self.place = place
        self.model = model
        self.engine = EngineStatus("loading", "loading engine…")
        self.activity = ""

    def on_mount(self) -> None:
        self.watch(self.app, "engine_status", self._engine_changed)

    def _engine_changed(self, status: EngineStatus) -> None:
        self.engine = status
        self._redraw()

    def set_activity(self, activity: str) -> None:
        self.activity = activity
        self._redraw()

    def _redraw(self) -> None:
        self.refresh(layout=True)  # the line count may change with the text

    def engine_part(self) -> EnginePart:
        if self.model is not None:
            return EnginePart("", neutralize(self.model, newlines=False), "italic")
        if self.engine.state == "failed":
            message = neutralize(self.engine.message or "setup failed", newlines=False)
            return EnginePart("engine: ", message, ENGINE_STYLE["failed"], True, ERROR_LINES)
        label = neutralize(self.engine.label, newlines=False)
        return EnginePart("", label, ENGINE_STYLE.get(self.engine.state, ""))

    def lines(self, width: int) -> list[Text]:
        """Neutralised: an activity names tool call IDs and tools the model chose, and a newline in one
        would split the bar's layout (`console.safe_text`)."""
        place, activity = (neutralize(text, newlines=False) for text in (self.place, self.activity))
        return status_lines(width, place, activity, self.engine_part())

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self.lines(width))

    def render(self) -> Text:
        return Text("\n").join(self.lines(self.content_size.width))
