"""The first frame the console paints is already the layout for the terminal it opens in.

The investigate screen and its run view are styled for the terminal's size as they are composed, so
the first frame at 80 columns shows the tabs and one-line gauges, not the wide layout squeezed for a
moment until the resize handlers restyle every widget (issue 13: that second pass also cost the first
frame a full restyle of the screen). What is captured is the frame Textual hands to the terminal.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from rich.console import RenderableType
from textual.screen import Screen

from console.app import DiagnoseApp
from tests.support.console import painted_text, pinned_options, settled


class FirstFrameApp(DiagnoseApp):
    """The console, keeping the text of the first frame painted with the app's own screen."""

    first_frame: str | None = None

    def _display(self, screen: Screen[Any], renderable: RenderableType | None) -> None:
        super()._display(screen, renderable)
        if self.first_frame is None and renderable is not None and screen.children:
            self.first_frame = painted_text(self)


async def first_and_settled_frames(tmp_path: Path, size: tuple[int, int]) -> tuple[str, str]:
    app = FirstFrameApp(audit_db=tmp_path / "audit.db", options=pinned_options(tmp_path))
    async with app.run_test(size=size) as pilot:
        await settled(pilot)
        assert app.first_frame is not None
        return app.first_frame, painted_text(app)


@pytest.mark.parametrize("size", [(80, 24), (100, 30)])
async def test_below_120_columns_the_first_frame_already_shows_the_tabs(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    first, settled_frame = await first_and_settled_frames(tmp_path, size)
    for frame in (first, settled_frame):
        assert "Timeline  Detail  Result" in frame  # the tab bar
        # One-line gauges.
        assert "budget  calls" in frame
        assert "protocol waiting for a run" in frame
        # No side-by-side panels.
        assert "╭─ Detail" not in frame
        assert "╭─ Budget" not in frame


async def test_wide_the_first_frame_shows_every_panel_side_by_side(tmp_path: Path) -> None:
    first, settled_frame = await first_and_settled_frames(tmp_path, (160, 45))
    for frame in (first, settled_frame):
        assert "╭─ Detail" in frame
        assert "╭─ Budget" in frame
        assert "╭─ Progress protocol" in frame
        assert "Timeline  Detail  Result" not in frame


async def test_below_60x18_the_first_frame_says_the_terminal_is_too_small(tmp_path: Path) -> None:
    first, _ = await first_and_settled_frames(tmp_path, (58, 16))
    assert "terminal too small (need 60×18)" in first
    assert "Query" not in first
