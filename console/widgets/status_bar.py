"""The one-line status bar on every screen: where you are, which model/profile runs, what is happening.

The model label is always visible because every result must be read against the model that made it.
"""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from console.messages import EngineStatus
from console.safe_text import neutralize

ENGINE_STYLE = {"loading": "italic", "ready": "bold", "failed": "bold red"}


class StatusBar(Static):
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
        """What is happening comes before the model label: a narrow terminal cuts the end of the line,
        and the run's outcome must survive that (the model label is cut with an ellipsis instead)."""
        text = Text.assemble(
            (" diagnose ", "reverse bold"), " ", (self.place, "bold"), no_wrap=True, overflow="ellipsis"
        )
        if self.activity:
            text.append("  │  ", style="dim")
            text.append(self.activity)
        text.append("  │  ", style="dim")
        if self.model is not None:
            text.append("model: ", style="dim")
            text.append(neutralize(self.model, newlines=False), style="italic")
        elif self.engine.state == "failed":
            text.append("engine: ", style="dim")
            text.append(
                neutralize(self.engine.message or "setup failed", newlines=False),
                style=ENGINE_STYLE["failed"],
            )
        else:
            text.append("model: ", style="dim")
            text.append(
                neutralize(self.engine.label, newlines=False), style=ENGINE_STYLE.get(self.engine.state, "")
            )
        self.update(text)
