"""The footer of every full screen: the keys that apply here, none of them cut at 80 columns.

Below NARROW_FOOTER_BELOW columns the keys are drawn compact and the `^p palette` key is left out
(ctrl+p still opens the palette, and the help screen lists it). Whatever the width, when the keys of the
focused widget and the screen leave no room for the console-wide ones (the timeline's `⏎ Detail space
Fold`, an open dialog or palette), the console-wide keys give way from the last, `f1 Help` excepted: a
key is shown whole or not at all, and `f1` lists every key. A cut `f4 Sc` helps nobody.
"""

from __future__ import annotations

from rich.cells import cell_len
from textual import events
from textual.app import ComposeResult
from textual.widget import Widget
from textual.widgets import Footer
from textual.widgets._footer import FooterKey  # the footer's own key widget (not re-exported)

NARROW_FOOTER_BELOW = 100  # columns
# The console-wide keys a crowded footer leaves out, first to last; `help` stays.
YIELDING_ACTIONS = ("scenarios", "audit", "investigate")


def key_width(key: FooterKey, compact: bool) -> int:
    """The cells a key takes in Textual's footer: its key and description with their padding (the
    docked palette key's rule takes the place of its left padding), and the gap after a compact key."""
    description = cell_len(key.description)
    if compact:
        return cell_len(key.key_display) + (1 + description if description else 0) + 1
    return cell_len(key.key_display) + 2 + (description + 1 if description else 0)


class ConsoleFooter(Footer):
    def __init__(self, width: int) -> None:
        """`width`: the terminal's, so the first frame is already drawn for it (resizes follow it)."""
        narrow = width < NARROW_FOOTER_BELOW
        super().__init__(compact=narrow, show_command_palette=not narrow)

    def on_resize(self, event: events.Resize) -> None:
        narrow = event.size.width < NARROW_FOOTER_BELOW
        if narrow != self.compact or narrow == self.show_command_palette:
            self.compact = narrow
            self.show_command_palette = not narrow
            self.call_after_refresh(self.recompose)

    def compose(self) -> ComposeResult:
        widgets: list[Widget] = list(super().compose())
        keys = [widget for widget in widgets if isinstance(widget, FooterKey)]
        for action in YIELDING_ACTIONS:
            # The blank cell after the last key may fall off the edge (or under the palette's rule).
            if sum(key_width(key, self.compact) for key in keys) - 1 <= self.app.size.width:
                break
            keys = [key for key in keys if key.action != action]
        yield from (widget for widget in widgets if not isinstance(widget, FooterKey) or widget in keys)
