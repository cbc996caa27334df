"""The footer of every full screen: the keys that apply here, all of them on screen at 80 columns.

Below NARROW_FOOTER_BELOW columns the keys are drawn compact and the `^p palette` key is left out
(ctrl+p still opens the palette, and the help screen lists it): otherwise the last of the screen's own
keys (`f4 Scenarios` on the investigate screen) is cut off at 80 columns.
"""

from __future__ import annotations

from textual import events
from textual.widgets import Footer

NARROW_FOOTER_BELOW = 100  # columns


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
