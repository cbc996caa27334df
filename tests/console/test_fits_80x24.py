"""Every screen and dialog is usable at 80×24, the size most terminals open at (issue 22, item 11).

Driven like an operator: keys through the pilot at 80×24 (and 100×30), assertions on what the terminal
paints. The screenshots of each screen at both sizes are `test_snapshots_every_screen.py`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.cells import cell_len
from textual.widgets import OptionList

from console.app import DiagnoseApp
from tests.support.console import (
    LAST_MISSING,
    a_slow_run,
    audit_app,
    audit_loaded,
    engine_ready,
    long_draft_scenario,
    make_app,
    painted_text,
    run_to_end,
    settled,
    slow_app,
)

SMALL = [(80, 24), (100, 30)]
SCROLLBAR = re.compile("[▁▂▃▄▅▆▇█▉▊▋▌▍▎▏▔▕]")  # a scrollbar's glyphs, painted at the end of text lines
size_ids = pytest.mark.parametrize("size", SMALL, ids=lambda size: f"{size[0]}x{size[1]}")


def boxed_lines(screen: str) -> list[str]:
    """The painted lines between a dialog's top and bottom border (both included)."""
    lines = screen.splitlines()
    top = next(i for i, line in enumerate(lines) if line.lstrip().startswith("╭"))
    bottom = next(i for i in range(top + 1, len(lines)) if lines[i].lstrip().startswith("╰"))
    return lines[top : bottom + 1]


def assert_whole_box(screen: str, width: int) -> None:
    """A dialog drawn whole: top and bottom borders on screen, every line closed on the right."""
    box = boxed_lines(screen)
    assert box[0].rstrip().endswith("╮"), "\n".join(box)
    assert box[-1].rstrip().endswith("╯"), "\n".join(box)
    assert all(line.rstrip().endswith(("│", "╮", "╯")) for line in box), "\n".join(box)
    assert all(cell_len(line.rstrip()) <= width for line in box)


# ------------------------------------------------------------------ the scenario picker
@size_ids
async def test_the_scenario_picker_fits_and_opens_the_entry_on_screen(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    """Down many times, then enter: the highlighted scenario is painted, and it is the one that opens."""
    app = make_app(tmp_path)
    async with app.run_test(size=size) as pilot:
        await engine_ready(pilot)
        await pilot.press("f4")
        await pilot.pause()
        picker = app.screen
        names = [choice.name for choice in picker.choices]  # type: ignore[attr-defined]
        for _ in range(len(names) - 2):
            await pilot.press("down")
        await pilot.pause()
        highlighted = names[picker.query_one(OptionList).highlighted or 0]
        screen = painted_text(app)
        assert "Scenarios  type to filter · enter opens · escape closes" in screen
        assert_whole_box(screen, size[0])
        assert any(highlighted in line for line in boxed_lines(screen)), screen
        await pilot.press("enter")
        await settled(pilot)
        assert app.engine_status.scenario == highlighted


# ------------------------------------------------------------------ the status bar
def top_lines(app: DiagnoseApp, count: int = 3) -> str:
    """The status bar as painted (its first `count` lines), as one line of words."""
    return " ".join(" ".join(painted_text(app).splitlines()[:count]).split())


@size_ids
async def test_the_status_bar_keeps_the_model_and_the_outcome(tmp_path: Path, size: tuple[int, int]) -> None:
    app = make_app(tmp_path, "evidence-backed-diagnosis")
    async with app.run_test(size=size) as pilot:
        await engine_ready(pilot)
        assert "scripted: evidence-backed-diagnosis" in top_lines(app)
        await run_to_end(pilot)
        shown = top_lines(app)
        assert "finished: DRAFT (exit 0)" in shown
        assert "scripted: evidence-backed-diagnosis" in shown


LONG_ERROR = (
    "config file /etc/diagnose/diagnose.toml: [mysql] dsn must look like "
    "mysql://user@host:3306/database, not 'localhost:3306' (the port belongs after the host)"
)


def failing_engine(scenario: str | None) -> Any:
    raise RuntimeError(LONG_ERROR)


@size_ids
async def test_an_engine_error_is_shown_whole_in_the_status_bar(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    """Once its toast is gone, the status bar is the only place that names an engine error."""
    app = make_app(tmp_path, env_factory=failing_engine)
    async with app.run_test(size=size) as pilot:
        await settled(pilot)
        app.clear_notifications()
        await pilot.pause()
        assert app.engine_status.state == "failed"
        assert " ".join(LONG_ERROR.split()) in top_lines(app, 5)


# What reaches the bar: neutralised text (no control or format characters), Latin to CJK.
SHOWN = st.characters(
    min_codepoint=0x20, max_codepoint=0x4E10, blacklist_categories=("Cc", "Cs", "Cf", "Zl", "Zp", "Mn", "Me")
)


@settings(max_examples=200, deadline=None)
@given(
    width=st.integers(min_value=60, max_value=220),
    place=st.sampled_from(["Investigate", "Audit", "Replay"]),
    activity=st.lists(st.text(SHOWN, max_size=40), max_size=4),
    label=st.text(SHOWN, min_size=1, max_size=160),
    failed=st.booleans(),
)
def test_status_lines_fit_and_keep_the_model_whole(
    width: int, place: str, activity: list[str], label: str, failed: bool
) -> None:
    """Whatever the width and texts: no line is wider than the terminal, the model (or engine error)
    is shown whole whenever a line can hold it, and the bar never grows past the lines it may take."""
    from console.widgets.status_bar import MAX_LINES, EnginePart, status_lines

    activity_text = " · ".join(part.replace(" · ", " ") for part in activity)
    engine = (
        EnginePart("engine: ", label, "bold red", prefix_required=True, max_lines=4)
        if failed
        else EnginePart("", label, "bold")
    )
    lines = status_lines(width, place, activity_text, engine)
    assert 1 <= len(lines) <= 1 + engine.max_lines <= MAX_LINES
    assert all(line.cell_len <= width for line in lines)
    shown = "".join("".join(line.plain.split()) for line in (lines[1:] if len(lines) > 1 else lines))
    if cell_len(engine.prefix + label) <= width:
        assert "".join(label.split()) in shown
    if failed:
        assert "engine: " in "".join(line.plain for line in lines)


# ------------------------------------------------------------------ help
@size_ids
async def test_help_fits_and_every_key_can_be_read(tmp_path: Path, size: tuple[int, int]) -> None:
    app = make_app(tmp_path)
    async with app.run_test(size=size) as pilot:
        await engine_ready(pilot)
        await pilot.press("f1")
        await pilot.pause()
        seen = painted_text(app)
        assert_whole_box(seen, size[0])
        for _ in range(8):  # page to the end, as an operator would
            await pilot.press("pagedown")
            seen += "\n" + painted_text(app)
            if "Write the files" in seen:
                break
        words = " ".join(seen.replace("│", " ").split())
        assert "Quit (during a run it asks first: quitting cancels the run)" in words
        assert "Export dialog" in words
        assert "Write the files" in words


# ------------------------------------------------------------------ audit lists
@size_ids
async def test_the_audit_lists_show_calls_tokens_and_query(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, recorded_runs: dict[str, Any], size: tuple[int, int]
) -> None:
    app = audit_app(tmp_path, monkeypatch, recorded_runs)
    async with app.run_test(size=size) as pilot:
        await audit_loaded(pilot)
        lines = painted_text(app).splitlines()
        header = next(line for line in lines if "outcome" in line and "calls" in line).split()
        assert header[header.index("outcome") :] == ["outcome", "calls", "tokens", "query"]
        assert any("DRAFT" in line and "12346" in line and "2026-11-30" in line for line in lines)
        if "run" not in header:  # a left-out column is in the line under the table
            assert "run run-0006" in " ".join(lines)

        await pilot.press("ctrl+o")
        await pilot.pause()
        lines = painted_text(app).splitlines()
        columns = next(line for line in lines if "call" in line and "status" in line).split()
        assert {"call", "tool", "status", "error", "input"} <= set(columns)
        assert any("query_mysql" in line and "ERROR" in line and "UNAVAILABLE" in line for line in lines)
        if "run" not in columns:  # the run of the highlighted invocation, under the table
            assert "run run-0006" in " ".join(" ".join(lines).split())
        assert "f4 Scenarios" in lines[-1]  # the footer's last key is on screen too


# ------------------------------------------------------------------ the follow-up preview
@size_ids
async def test_a_long_follow_up_preview_can_be_read_to_its_end(tmp_path: Path, size: tuple[int, int]) -> None:
    """ctrl+f arms the follow-up; its carried turn is longer than the room under the query box: tab
    into it and scroll, and every word the next run sends is shown."""
    app = make_app(tmp_path, str(long_draft_scenario(tmp_path)))
    async with app.run_test(size=size) as pilot:
        await run_to_end(pilot)
        await pilot.press("ctrl+f")
        await pilot.pause()
        assert "carried over to the next run" in painted_text(app)
        await pilot.press("tab", "down", "end")
        await pilot.pause()
        words = " ".join(SCROLLBAR.sub(" ", painted_text(app)).split())
        assert " ".join(LAST_MISSING.split()) in words
        assert "f4 Scenarios" in painted_text(app).splitlines()[-1]


# ------------------------------------------------------------------ the other dialogs
@size_ids
async def test_the_export_and_quit_dialogs_fit(tmp_path: Path, size: tuple[int, int]) -> None:
    app = make_app(tmp_path / "export", "evidence-backed-diagnosis")
    async with app.run_test(size=size) as pilot:
        await run_to_end(pilot)
        await pilot.press("ctrl+s")
        await pilot.pause()
        screen = painted_text(app)
        assert_whole_box(screen, size[0])
        assert "Export run  Markdown + JSON · enter writes · escape cancels" in screen
        await pilot.press("escape")

    (tmp_path / "quit").mkdir()
    app = slow_app(tmp_path / "quit")
    async with app.run_test(size=size) as pilot:
        await a_slow_run(pilot)
        await pilot.press("ctrl+q")
        await pilot.pause()
        screen = painted_text(app)
        assert "A run is in progress." in screen
        assert "or escape stays" in screen
        await pilot.press("n")


def test_the_status_bar_neutralises_what_the_model_named() -> None:
    """An activity names tool call IDs the model chose: a newline or an escape sequence in one must
    neither split the bar nor reach the terminal."""
    from console.widgets.status_bar import StatusBar

    bar = StatusBar("Investigate")
    bar.activity = "running: call-1\n\x1b[2J\x1b]52;c;cGF5bG9hZA==\x07 query_logs · escape cancels"
    for width in (60, 80, 120):
        lines = bar.lines(width)
        assert len(lines) <= 2
        assert all(line.cell_len <= width for line in lines)
        painted = "".join(line.plain for line in lines)
        assert "\x1b" not in painted
        assert "\n" not in painted
        assert "\x07" not in painted
