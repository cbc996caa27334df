"""The command palette's commands (ctrl+p): every action by name, and those that cannot act now.

What a command does is its binding's tooltip, as on the help screen and in the footer. The commands
that apply now are the app's system commands (`DiagnoseApp.get_system_commands`); the investigate
screen's commands whose key is dimmed in the footer (no Draft to copy yet, a run in progress) are
listed too, dimmed, with the reason instead of the palette's "No matches found", and choosing one says
why, as its key does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import partial

from rich.text import Text
from textual.binding import BindingType
from textual.command import DiscoveryHit, Hit, Hits, Provider

from console.screens.investigate import InvestigateScreen

# Textual's own commands that ours replace.
REPLACED_COMMANDS = {"Keys", "Maximize", "Minimize", "Screenshot"}

# The palette's commands, (title, action): what each does is its binding's tooltip.
APP_COMMANDS = [
    ("Investigate", "investigate"),
    ("Audit", "audit"),
    ("Scenarios", "scenarios"),
    ("Help", "help"),
    ("Toggle light/dark", "toggle_theme"),
    ("Maximize panel", "toggle_maximize"),
]
SCREEN_COMMANDS = [
    ("Run query", "run"),
    ("Cancel run", "cancel_run"),
    ("Follow-up", "follow_up"),
    ("Copy Draft", "copy_draft"),
    ("Copy Draft as JSON", "copy_draft_json"),
    ("Export run", "export"),
    ("Go to timeline", "go_timeline"),
    ("Go to detail", "go_detail"),
    ("Go to citations", "go_citations"),
]
# Commands no key runs: the palette is the only place that describes them.
UNBOUND_COMMANDS = {"copy_draft_json": "Copy the Draft JSON exactly"}


def command_help(bindings: Iterable[BindingType], action: str) -> str:
    """What the command does and its key, read from the binding that runs `action`."""
    from console.screens.help import with_key

    return with_key(bindings, action) or UNBOUND_COMMANDS[action]


class UnavailableCommands(Provider):
    """The investigate screen's commands that cannot act now: dimmed, `not now: <why>` under them."""

    def _unavailable(self) -> list[tuple[str, str, Callable[[], None]]]:
        investigate = self.app.screen_stack[0]
        if self.screen is not investigate or not isinstance(investigate, InvestigateScreen):
            return []
        found: list[tuple[str, str, Callable[[], None]]] = []
        for title, action in SCREEN_COMMANDS:
            if investigate.check_action(action, ()) is None:  # dimmed, as its key in the footer
                why, _ = investigate.why_not(action)
                found.append((title, f"not now: {why}", partial(investigate.say_why_not, action)))
        return found

    async def discover(self) -> Hits:
        for title, why, say_why in self._unavailable():
            yield DiscoveryHit(Text(title, style="dim"), say_why, text=title, help=why)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for title, why, say_why in self._unavailable():
            score = matcher.match(title)
            if score > 0:
                yield Hit(score, matcher.highlight(title).stylize("dim"), say_why, text=title, help=why)
