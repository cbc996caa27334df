"""Where to write an export: a directory. Enter exports, escape cancels.

It starts at the folder the last export of this session went to, else the user's documents folder
(`default_export_dir`): never the folder the console happened to start in, which is often a source
checkout or a system folder where run records do not belong.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static


def default_export_dir() -> Path:
    """The user's documents folder (XDG `DOCUMENTS`, usually ~/Documents), or the home folder when
    there is none."""
    import platformdirs

    documents = platformdirs.user_documents_path()
    return documents if documents.is_dir() else Path.home()


class ExportDialog(ModalScreen[Path | None]):
    CSS_PATH = Path(__file__).with_name("export_dialog.tcss")
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Cancel", tooltip="Cancel the export")
    ]

    def __init__(self, directory: Path, *, cursor_blink: bool = True) -> None:
        super().__init__(id="export-dialog")
        self.directory = directory
        self.cursor_blink = cursor_blink

    def compose(self) -> ComposeResult:
        with Vertical(id="export"):
            yield Static(
                Text.assemble(
                    ("Export run", "bold"), ("  Markdown + JSON · enter writes · escape cancels", "dim")
                )
            )
            directory = Input(str(self.directory), id="export-dir", placeholder="directory")
            directory.cursor_blink = self.cursor_blink
            yield directory
            yield Static(id="export-error")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        directory = Path(event.value.strip() or ".").expanduser()
        if not directory.is_dir():
            self.query_one("#export-error", Static).update(Text(f"not a directory: {directory}", style="red"))
            return
        self.dismiss(directory)

    def action_close(self) -> None:
        self.dismiss(None)
