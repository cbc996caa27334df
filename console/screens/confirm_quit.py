"""Asked when ctrl+q is pressed during a run: quitting cancels the run (audited CANCELLED)."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static


class ConfirmQuit(ModalScreen[bool]):
    CSS_PATH = Path(__file__).with_name("confirm_quit.tcss")
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "Quit", tooltip="Quit: the run is cancelled and audited CANCELLED"),
        Binding("ctrl+q", "answer(True)", "Quit", show=False, tooltip="Quit (ctrl+q again)"),
        Binding("n,escape", "answer(False)", "Stay", tooltip="Stay: the run goes on"),
    ]

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm-quit"):
            yield Static(
                Text.assemble(
                    ("A run is in progress.", "bold"),
                    "\nQuitting cancels it; the audit records it as CANCELLED.\n\n",
                    ("y", "bold"),
                    " or ctrl+q quits · ",
                    ("n", "bold"),
                    " or escape stays",
                )
            )

    def action_answer(self, quit_now: bool) -> None:
        self.dismiss(quit_now)
