"""The console's typed message pipeline: RunSubmitted -> (run events, batched) -> RunCompleted.

Widgets never call the engine: they post these messages and the screen that owns the run worker acts.
Payloads are plain JSON-able values (the ExecutionResult as its contract JSON), so nothing here imports
the engine.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from textual.message import Message


class RunSubmitted(Message):
    """The operator asked for a run of `query`, carrying `previous_turn` (the exact PreviousTurn JSON)."""

    def __init__(self, query: str, previous_turn: dict[str, Any] | None) -> None:
        super().__init__()
        self.query = query
        self.previous_turn = previous_turn


class RunCompleted(Message):
    """The use case returned: `result` is the ExecutionResult JSON.

    (docs/architecture.md, "Execution result")
    """

    def __init__(self, result: dict[str, Any]) -> None:
        super().__init__()
        self.result = result


class RunAborted(Message):
    """The run worker ended without a result: cancelled (the result came as an event) or crashed."""

    def __init__(self, cancelled: bool, error: str | None = None) -> None:
        super().__init__()
        self.cancelled = cancelled
        self.error = error


class CitationSelected(Message):
    """A Draft citation or progress check was chosen: show that tool call in the timeline."""

    def __init__(self, tool_call_id: str) -> None:
        super().__init__()
        self.tool_call_id = tool_call_id


@dataclass(frozen=True)
class EngineStatus:
    """What the status bar says about the engine; the app swaps it as the environment (re)opens."""

    state: str  # "loading" | "ready" | "failed"
    label: str  # model/profile label, or what is happening
    scenario: str | None = None  # scenario name of the open environment
    message: str | None = None  # operator-readable setup error
