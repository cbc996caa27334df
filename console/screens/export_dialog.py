"""Where to write an export: a directory. Enter exports, escape cancels.

It starts at the folder the last export of this session went to, else the user's documents folder
(`default_export_dir`): never the folder the console happened to start in, which is often a source
checkout or a system folder where run records do not belong.

A folder that does not exist yet is created when its parent exists (only the last folder of a path,
as for every file the program writes: `audit.files`); a file in the way and a missing folder above
it are told apart. An export never replaces files silently: when the folder already holds this run's
export, the dialog names the files and a second enter replaces them (the CLI's `--force`); escape or
another folder keeps them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from audit.files import check_last_folder


def default_export_dir() -> Path:
    """The user's documents folder (XDG `DOCUMENTS`, usually ~/Documents), or the home folder when
    there is none."""
    import platformdirs

    documents = platformdirs.user_documents_path()
    return documents if documents.is_dir() else Path.home()


@dataclass(frozen=True)
class ExportTarget:
    """The folder to write to, and whether the operator agreed to replace an earlier export there."""

    directory: Path
    replace: bool = False


class ExportDialog(ModalScreen[ExportTarget | None]):
    CSS_PATH = Path(__file__).with_name("export_dialog.tcss")
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Cancel", tooltip="Cancel the export")
    ]

    def __init__(
        self,
        directory: Path,
        existing: Callable[[Path], list[Path]],
        *,
        cursor_blink: bool = True,
    ) -> None:
        """`existing(folder)`: the files the export would replace in `folder`."""
        super().__init__(id="export-dialog")
        self.directory = directory
        self.existing = existing
        self.cursor_blink = cursor_blink
        self._confirming: Path | None = None  # the folder whose files a second enter replaces

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

    def _say(self, text: str, style: str) -> None:
        self.query_one("#export-error", Static).update(Text(text, style=style))

    def on_input_changed(self, event: Input.Changed) -> None:
        if self._confirming is not None:
            self._confirming = None  # another folder: its files are checked afresh
            self._say("", "")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if not event.value.strip():  # not ".": the folder the console started in is no default
            self._say("type the folder to write into", "red")
            return
        directory = Path(event.value.strip()).expanduser()
        try:
            new_folder = check_last_folder(directory)  # the export itself creates it
        except OSError as exc:
            self._say(f"cannot export there: {exc}", "red")
            return
        if new_folder:
            self.dismiss(ExportTarget(directory))
            return
        if self._confirming == directory:
            self.dismiss(ExportTarget(directory, replace=True))
            return
        present = self.existing(directory)
        if present:
            self._confirming = directory
            names = " and ".join(path.name for path in present)
            self._say(
                f"{names} already exist{'s' if len(present) == 1 else ''} in {directory}: "
                "enter again replaces, escape keeps",
                "yellow",
            )
            return
        self.dismiss(ExportTarget(directory))

    def action_close(self) -> None:
        self.dismiss(None)
