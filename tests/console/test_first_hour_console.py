"""The console as a new user meets it in the first hour, at 80×24 by keys: what the scripted model
is, the panels the keys lead to, export folders, the gauges and labels, the palette and the picker.
Each test drives the real app (a pilot) and reads what an operator would read.
"""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

from textual.widgets import Input, Static

from console.screens.export_dialog import ExportDialog
from tests.support.console import make_app, plain, run_to_end, wait_until

SMALL = (80, 24)


async def export_into(pilot: Any, folder: Path) -> str:
    """ctrl+s, type `folder`, enter: what the dialog says (empty when it closed to write)."""
    app = pilot.app
    await pilot.press("ctrl+s")
    await wait_until(lambda: isinstance(app.screen, ExportDialog), pilot, what="the export dialog")
    app.screen.query_one(Input).value = str(folder)
    await pilot.press("enter")
    await pilot.pause()
    if isinstance(app.screen, ExportDialog):
        said = plain(app.screen.query_one("#export-error", Static).content, width=200).strip()
        await pilot.press("escape")
        await pilot.pause()
        return said
    return ""


async def test_an_export_into_a_new_folder_creates_it_and_other_paths_say_what_is_wrong(
    tmp_path: Path,
) -> None:
    """README, "Files the tool writes": one new folder at most; a file in the way and a missing folder
    above are told apart."""
    app = make_app(tmp_path, "evidence-backed-diagnosis")
    async with app.run_test(size=SMALL) as pilot:
        await run_to_end(pilot)
        new = tmp_path / "incident-42"
        assert await export_into(pilot, new) == ""
        await wait_until(lambda: new.is_dir() and len(list(new.iterdir())) == 2, pilot, what="the export")
        assert sorted(p.name for p in new.iterdir()) == ["diagnosis-run-0001.json", "diagnosis-run-0001.md"]
        assert stat.S_IMODE(new.stat().st_mode) == 0o700

        plain_file = tmp_path / "notes.txt"
        plain_file.write_text("mine\n", encoding="utf-8")
        said = await export_into(pilot, plain_file)
        assert said == f"cannot export there: {plain_file} is a file, not a folder"
        assert plain_file.read_text(encoding="utf-8") == "mine\n"

        said = await export_into(pilot, tmp_path / "typo" / "incident-43")
        assert said == (
            f"cannot export there: folder {tmp_path / 'typo'} does not exist "
            "(only the last folder of a path is created)"
        )
        assert not (tmp_path / "typo").exists()
