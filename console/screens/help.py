"""The help screen: every key of the console, grouped by where it works.

A key's words are written once, as its binding's tooltip: the help rows, the command palette's hints
and the footer's hover text are read from it, and a test holds README's key table to the same rows. A
binding without a tooltip (the timeline's page keys) is not listed. Only the keys Textual's own
widgets provide (tab, the palette, quit, a list's enter) are written as rows, by the app.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
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


def described_bindings(bindings: Iterable[BindingType]) -> Iterator[Binding]:
    """The bindings that say what they do (a tooltip): the ones help and palette show."""
    for entry in bindings:
        binding = entry if isinstance(entry, Binding) else Binding(*entry)
        if binding.tooltip:
            yield binding


def binding_rows(bindings: Iterable[BindingType]) -> list[tuple[str, str]]:
    """One row per tooltip, its keys together (`up / down`), in the order the table declares them."""
    rows: dict[str, list[str]] = {}
    for binding in described_bindings(bindings):
        rows.setdefault(binding.tooltip, []).append(key_name(binding.key))
    return [(" / ".join(keys), what) for what, keys in rows.items()]


def with_key(bindings: Iterable[BindingType], action: str) -> str | None:
    """`tooltip (key)` of the binding that runs `action`, for the command palette; None if none does."""
    for binding in described_bindings(bindings):
        if binding.action == action:
            return f"{binding.tooltip} ({key_name(binding.key.split(',')[0])})"
    return None


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
