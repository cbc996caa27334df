"""Shown when the console's engine cannot open at start-up: the console is not usable, and says so.

Whatever can be known without the engine (configuration, scenario, model settings, where the audit
is) is refused before the first frame, with exit 3 and the line `diagnose run` prints. What only
opening the environment finds (an audit file or server that cannot be used, an evidence source that
cannot be built) comes after the first frame, in the background; this screen then blocks the
console, which would otherwise look ready, and quitting it ends `diagnose` with the same exit 3 and
the same line. It loads only when needed (the first frame does not import it).
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static

from agent.vocabulary import SETUP_ERROR
from console.safe_text import neutralize


class StartupFailed(ModalScreen[None]):
    CSS_PATH = Path(__file__).with_name("startup_failed.tcss")
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter,escape,q,ctrl+q", "quit", "Quit", priority=True, tooltip="Quit (exit 3)"),
    ]

    def __init__(self, message: str) -> None:
        super().__init__()
        self.message = message

    def compose(self) -> ComposeResult:
        with Vertical(id="startup-failed"):
            yield Static(
                Text.assemble(
                    ("The console could not start.", "bold"),
                    "\n\n",
                    neutralize(self.message),
                    "\n\nNo run can start until this is fixed.\n\n",
                    ("enter", "bold"),
                    ", escape or ctrl+q quits (exit 3); the message stays on the terminal.",
                )
            )

    def action_quit(self) -> None:
        self.app.exit(return_code=SETUP_ERROR)
