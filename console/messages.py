"""The console's typed message pipeline: RunSubmitted -> (run events, batched) -> the run's end.

Widgets never call the engine: they post these messages and the screen that owns the run worker acts.
Payloads are plain JSON-able values, so nothing here imports the engine. Messages are dataclasses, as
Textual's own are.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from textual.message import Message


@dataclass
class RunSubmitted(Message):
    """The operator asked for a run of `query`, carrying `previous_turn` (the exact PreviousTurn JSON)."""

    query: str
    previous_turn: dict[str, Any] | None


@dataclass
class RunAborted(Message):
    """The run worker ended without a result: cancelled (the result came as an event) or crashed."""

    cancelled: bool
    error: str | None = None


@dataclass
class CitationSelected(Message):
    """A Draft citation or progress check was chosen: show that tool call in the timeline."""

    tool_call_id: str


@dataclass(frozen=True)
class EngineStatus:
    """What the status bar says about the engine; the app swaps it as the environment (re)opens."""

    state: str  # "loading" | "ready" | "failed"
    label: str  # model/profile label, or what is happening
    scenario: str | None = None  # scenario name of the open environment
    message: str | None = None  # operator-readable setup error
