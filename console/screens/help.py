"""The help screen: every key of the console, grouped by where it works.

The rows are built from the binding tables themselves (plus the keys built-in widgets provide), so the
help cannot drift from what the keys do; a test checks the README key table against the same rows.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

KeySections = list[tuple[str, list[tuple[str, str]]]]
KEY_NAMES = {"question_mark": "?", "slash": "/"}


def key_name(key: str) -> str:
    return ", ".join(KEY_NAMES.get(k.strip(), k.strip()) for k in key.split(","))


def binding_rows(bindings: Iterable[BindingType]) -> list[tuple[str, str]]:
    rows: dict[str, list[str]] = {}
    for entry in bindings:
        binding = entry if isinstance(entry, Binding) else Binding(*entry)
        what = binding.tooltip or binding.description
        rows.setdefault(what, []).append(key_name(binding.key))
    return [(" / ".join(keys), what) for what, keys in rows.items()]


def key_table(sections: KeySections) -> Table:
    table = Table(box=None, show_header=False, padding=(0, 2), expand=True)
    table.add_column(style="bold", no_wrap=True, min_width=18)
    table.add_column()
    for i, (section, rows) in enumerate(sections):
        if i:
            table.add_row("", "")
        table.add_row(Text(section, style="bold reverse"), "")
        for keys, what in rows:
            table.add_row(Text(keys), Text(what))
    return table


class HelpScreen(ModalScreen[None]):
    CSS_PATH = Path(__file__).with_name("help.tcss")
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Close"),
        Binding("f1", "close", "Close", show=False),
    ]

    def __init__(self, sections: KeySections) -> None:
        """`sections`: every key, grouped by where it works (the app knows every screen's bindings)."""
        super().__init__()
        self.sections = sections

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help"):
            yield Static(Text.assemble(("Keys", "bold"), ("  escape closes", "dim")), id="help-title")
            yield Static(key_table(self.sections), id="help-keys")

    def action_close(self) -> None:
        self.dismiss(None)
