"""The message a screen shows instead of its panels when the terminal is below the smallest usable size.

Below MIN_WIDTH×MIN_HEIGHT no layout can show a query, a run and the keys at once; a clear message
beats panels squeezed to zero width. Screens add the `-tiny` class (`fit_screen`) and the shared CSS
shows this widget alone.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.geometry import Size
from textual.screen import Screen
from textual.widgets import Static

MIN_WIDTH, MIN_HEIGHT = 60, 18


class TooSmall(Static):
    def __init__(self) -> None:
        super().__init__(
            Text.assemble(
                (f"terminal too small (need {MIN_WIDTH}×{MIN_HEIGHT})", "bold"),
                ("\nenlarge the window; ctrl+q quits", "dim"),
                justify="center",
            ),
            id="too-small",
        )


def fit_screen(screen: Screen[Any], size: Size) -> None:
    screen.set_class(size.width < MIN_WIDTH or size.height < MIN_HEIGHT, "-tiny")
