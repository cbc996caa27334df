"""What a screen may know about the app: its options, the run environment and the engine's status.

Screens reach the app as `app = getters.app(ConsoleHost)` and never import `console.app`, so the
dependency points one way: the app owns the screens and the engine; a screen owns its own work (a run,
an export, a page of the audit) and reads the engine from here (docs/architecture.md, "Console
structure"). Nothing here imports the engine: the first frame must not wait for Haystack.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from textual.app import App
from textual.reactive import reactive

from console.messages import EngineStatus

if TYPE_CHECKING:
    from console.wiring import RunEnvironment


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _new_session_id() -> str:
    return f"session-{uuid.uuid4().hex[:12]}"


@dataclass(frozen=True)
class ConsoleOptions:
    """How the console identifies, times and draws things. Operators keep the defaults; tests, snapshots
    and benchmarks pin them, so that what they compare is the same every time."""

    session_id: str = field(default_factory=_new_session_id)
    run_id_factory: Callable[[], str] | None = None  # None: the engine's own random run IDs
    clock: Callable[[], datetime] = _utc_now  # when an export says it was written
    show_timings: bool = True  # durations and elapsed time on screen
    cursor_blink: bool = True
    export_dir: Path | None = None  # None: the user's documents folder (console.screens.export_dialog)


class ConsoleHost(App[int]):
    """The app as its screens see it."""

    engine_status: reactive[EngineStatus] = reactive(EngineStatus("loading", "loading engine…"))

    def __init__(self, options: ConsoleOptions | None = None) -> None:
        super().__init__()
        self.options = options or ConsoleOptions()
        self.env: RunEnvironment | None = None  # open once engine_status is "ready"
