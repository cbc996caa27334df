"""The console as a new user meets it in the first hour, at 80×24 by keys: what the scripted model
is, the panels the keys lead to, export folders, the gauges and labels, the palette and the picker.
Each test drives the real app (a pilot) and reads what an operator would read.
"""

from __future__ import annotations

import stat
import time
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from rich.cells import cell_len
from textual.command import CommandPalette
from textual.widgets import Input, OptionList, Select, Static, TextArea
from textual.widgets._footer import FooterKey

import console.screens.investigate as investigate_module
from console.app import DiagnoseApp
from console.presentation import SCRIPTED_NOTICE, SCRIPTED_NOTICE_POINTER
from console.screens.export_dialog import ExportDialog
from console.screens.replay import ReplayScreen
from console.screens.scenarios import ScenarioPicker
from console.widgets.budget import BudgetGauge
from console.widgets.detail import DetailPanel
from console.widgets.result import ResultView
from console.widgets.run_view import RunView
from tests.support.console import (
    audit_app,
    audit_loaded,
    engine_ready,
    make_app,
    painted_text,
    pinned_options,
    plain,
    run_to_end,
    wait_until,
)

SMALL, WIDE = (80, 24), (200, 50)


async def export_into(pilot: Any, folder: Path | str) -> str:
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
    """docs/command-line.md, "Files the tool writes": one new folder at most; a file in the way and a
    missing folder above are told apart."""
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

        assert await export_into(pilot, "  ") == "type the folder to write into"  # never the cwd
        said = await export_into(pilot, tmp_path / "typo" / "incident-43")
        assert said == (
            f"cannot export there: folder {tmp_path / 'typo'} does not exist "
            "(only the last folder of a path is created)"
        )
        assert not (tmp_path / "typo").exists()


# ------------------------------------------------------------------ item 1: what the scripted model is
async def test_a_query_of_ones_own_says_the_scripted_scenario_does_not_read_it(tmp_path: Path) -> None:
    app = make_app(tmp_path, "evidence-backed-diagnosis")
    async with app.run_test(size=SMALL) as pilot:
        await run_to_end(pilot)  # the scenario's own query: the script is what was asked for
        assert SCRIPTED_NOTICE not in painted_text(app)
        assert not [n for n in app._notifications if n.title == SCRIPTED_NOTICE]

        await replace_query(pilot, "why is checkout slow since 09:00?")
        await run_to_end(pilot)
        shown = " ".join(painted_text(app).replace("│", " ").split())  # narrow: the Result tab is forward
        assert f"{SCRIPTED_NOTICE} {SCRIPTED_NOTICE_POINTER}" in shown
        assert shown.index(SCRIPTED_NOTICE) < shown.index("DRAFT / COMPLETED")  # read before the answer
        toasts = [n for n in app._notifications if n.title == SCRIPTED_NOTICE]
        assert len(toasts) == 1
        assert "diagnose demo model-server" in toasts[0].message

        await pilot.press("ctrl+f")  # a follow-up carries the Draft: the script does not read it either
        await replace_query(pilot, "and what about the refunds?")
        await run_to_end(pilot)
        assert len([n for n in app._notifications if n.title == SCRIPTED_NOTICE]) == 2
        assert SCRIPTED_NOTICE in painted_text(app)


async def test_a_blank_query_is_rejected_without_the_scripted_notice(tmp_path: Path) -> None:
    """Rejected before any model call, a blank query replays no script: nothing to warn about."""
    app = make_app(tmp_path, "evidence-backed-diagnosis")
    async with app.run_test(size=SMALL) as pilot:
        await engine_ready(pilot)  # the engine's start puts the scenario's query in the box
        await replace_query(pilot, "")
        await run_to_end(pilot)
        assert "QUERY_BLANK" in painted_text(app)
        assert SCRIPTED_NOTICE not in painted_text(app)
        assert not [n for n in app._notifications if n.title == SCRIPTED_NOTICE]


async def replace_query(pilot: Any, text: str) -> None:
    query = pilot.app.investigate.query_one("#query", TextArea)
    query.text = text
    await pilot.pause()


# ------------------------------------------------------------------ item 2: 80×24 by keys
def footer_keys_fit(app: DiagnoseApp) -> list[str]:
    """Every key the footer shows, each asserted whole on screen (none cut at the edge)."""
    width = app.size.width
    keys = list(app.screen.query(FooterKey)) or list(app.screen_stack[-2].query(FooterKey))
    shown = [key for key in keys if key.display and key.region.width]
    for key in shown:
        assert key.region.right <= width, f"{key.key_display} {key.description} is cut at {width} columns"
    return [f"{key.key_display} {key.description}".strip() for key in shown]


@pytest.mark.parametrize("size", [SMALL, WIDE], ids=["80x24", "200x50"])
async def test_enter_on_the_timeline_shows_the_entry_and_no_footer_key_is_cut(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    app = make_app(tmp_path, "evidence-backed-diagnosis")
    async with app.run_test(size=size) as pilot:
        await run_to_end(pilot)
        await pilot.press("f5", "down", "down", "down")  # round 1, call-1, round 2, call-2
        keys = footer_keys_fit(app)
        assert "f1 Help" in keys
        assert {"⏎ Detail", "space Fold"} <= set(keys)
        await pilot.press("enter")
        await pilot.pause()
        view = app.investigate.run_view
        assert view.query_one(DetailPanel).key == ("call", "call-2")
        if size == SMALL:  # Detail is a tab of its own: it comes forward, with the keyboard
            assert view.panel == "detail"
            assert view.query_one(DetailPanel).has_focus
            assert "call-2  query_logs" in painted_text(app)
        await pilot.press("ctrl+s")  # the export dialog over it: the footer still fits
        await wait_until(lambda: isinstance(app.screen, ExportDialog), pilot, what="the dialog")
        footer_keys_fit(app)
        await pilot.press("escape", "ctrl+p")
        await pilot.pause(0.3)
        footer_keys_fit(app)


async def test_a_new_runs_result_opens_at_its_headline(tmp_path: Path) -> None:
    app = make_app(tmp_path, "evidence-backed-diagnosis")
    async with app.run_test(size=SMALL) as pilot:
        await run_to_end(pilot)
        result = app.investigate.query_one(ResultView)
        result.scroll_end(animate=False, immediate=True)
        await pilot.pause()
        assert result.scroll_y > 0
        assert "DRAFT / COMPLETED" not in painted_text(app)
        await run_to_end(pilot)
        assert result.scroll_y == 0
        assert "DRAFT / COMPLETED   exit 0" in painted_text(app)
        assert "run run-0002" in painted_text(app)


async def test_the_one_line_protocol_panel_keeps_the_saturation(tmp_path: Path) -> None:
    app = make_app(tmp_path, "stop-required-ignored")
    async with app.run_test(size=SMALL) as pilot:
        await run_to_end(pilot)
        line = next(line for line in painted_text(app).splitlines() if line.startswith(" protocol"))
        assert "saturation INFORMATION_SATURATED" in line
        assert "…" not in line


async def test_the_audit_filters_stay_on_their_line_at_80_columns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, recorded_runs: Any
) -> None:
    app = audit_app(tmp_path, monkeypatch, recorded_runs)
    async with app.run_test(size=SMALL) as pilot:
        await audit_loaded(pilot)
        runs_search = app.screen.query_one("#runs-text", Input)
        assert cell_len(runs_search.placeholder) <= runs_search.content_region.width
        await pilot.press("ctrl+o")
        await pilot.pause()
        search, tool = app.screen.query_one("#inv-text", Input), app.screen.query_one("#inv-tool", Select)
        tool.value = "lookup_knowledge"
        await pilot.pause()
        assert tool.region.height == 1
        assert search.region.height == 1
        assert cell_len(search.placeholder) <= search.content_region.width  # the hint is read whole
        filters = next(line for line in painted_text(app).splitlines() if search.placeholder in line)
        assert "lookup_knowled…" in filters


async def test_the_replay_takes_f5_f6_f7_and_its_footer_offers_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, recorded_runs: Any
) -> None:
    app = audit_app(tmp_path, monkeypatch, recorded_runs)
    async with app.run_test(size=SMALL) as pilot:
        await audit_loaded(pilot)
        await pilot.press("enter")
        await wait_until(lambda: isinstance(app.screen, ReplayScreen), pilot, what="the replay")
        view = app.screen.query_one(RunView)
        await wait_until(lambda: view.state.result is not None, pilot, what="the replayed run")
        keys = footer_keys_fit(app)
        assert {"f5 Timeline", "f6 Detail", "f7 Citations", "esc Back", "f1 Help"} <= set(keys)
        await pilot.press("f6")
        assert view.panel == "detail"
        assert view.query_one(DetailPanel).has_focus
        await pilot.press("f7")
        assert view.panel == "result"
        await pilot.press("f5")
        assert view.panel == "timeline"
        assert view.timeline.has_focus


# ------------------------------------------------------------------ item 6: gauges and labels
async def test_the_deadline_gauge_counts_while_the_model_waits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No run event arrives while a model round waits; the gauge counts the seconds as the status bar
    does. (The clock the screen reads is moved by hand: no test waits real seconds.)"""
    clock = {"now": 1000.0}
    clocks = SimpleNamespace(monotonic=lambda: clock["now"], perf_counter=time.perf_counter)
    monkeypatch.setattr(investigate_module, "time", clocks)  # the screen's clock only, not the loop's
    options = replace(pinned_options(tmp_path), show_timings=True)
    app = make_app(tmp_path, "slow-model-cancel", options=options)
    async with app.run_test(size=SMALL) as pilot:
        await engine_ready(pilot)
        await pilot.press("ctrl+r")
        screen = app.investigate
        await wait_until(lambda: screen.state.round_in_flight is not None, pilot, what="a model round")
        clock["now"] += 20.4
        screen._tick()  # the screen's one-second timer
        await pilot.pause()
        gauge = plain(screen.run_view.query_one(BudgetGauge).render(), width=200)
        assert "time 20.4/" in gauge
        assert "running 20 s: model round 1" in screen.activity
        await pilot.press("escape")
        await wait_until(lambda: not screen.running, pilot, what="the cancel")
        gauge = plain(screen.run_view.query_one(BudgetGauge).render(), width=200)
        assert "time 20.4/" not in gauge  # the run's own figure stands once it has ended


@pytest.mark.parametrize("size", [SMALL, WIDE], ids=["80x24", "200x50"])
async def test_the_model_label_is_spelled_one_way_before_and_after_a_run(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    app = make_app(tmp_path, "evidence-backed-diagnosis")
    async with app.run_test(size=size) as pilot:
        await engine_ready(pilot)
        before = painted_text(app).splitlines()[0]
        await run_to_end(pilot)
        after = painted_text(app).splitlines()[0]
        for line in (before, after):
            label = line.rstrip().rsplit("│", 1)[-1].strip()
            assert label == "scripted: evidence-backed-diagnosis"
            assert "model:" not in line


async def test_ctrl_c_with_no_run_says_how_to_quit_and_still_copies_a_selection(tmp_path: Path) -> None:
    app = make_app(tmp_path, "evidence-backed-diagnosis")
    async with app.run_test(size=SMALL) as pilot:
        await engine_ready(pilot)
        await pilot.press("ctrl+c")
        await pilot.pause()
        said = [n.message for n in app._notifications]
        assert said
        assert "ctrl+q quits the console" in said[-1]
        query = app.investigate.query_one("#query", TextArea)
        query.select_all()
        await pilot.press("ctrl+c")
        assert app.clipboard == query.text
        assert len(app._notifications) == len(said)


async def test_the_palette_lists_what_cannot_act_now_dimmed_with_the_reason(tmp_path: Path) -> None:
    app = make_app(tmp_path, "evidence-backed-diagnosis")
    async with app.run_test(size=SMALL) as pilot:
        await engine_ready(pilot)
        await pilot.press("ctrl+p")
        await wait_until(lambda: isinstance(app.screen, CommandPalette), pilot, what="the palette")
        await pilot.press(*"copy d")
        await pilot.pause(0.5)
        shown = painted_text(app)
        assert "No matches found" not in shown
        assert "Copy Draft" in shown
        assert "not now: no Draft to copy · ctrl+r runs the query" in shown
        prompt = app.screen.query_one(OptionList).get_option_at_index(0).prompt
        assert "dim" in " ".join(str(span.style) for span in getattr(prompt, "spans", []))  # as in the footer
        await pilot.press("enter")  # chosen anyway: it says why, as its key does
        await pilot.pause()
        assert app.investigate.activity == "no Draft to copy · ctrl+r runs the query"


async def test_typing_in_the_scenario_picker_filters_it(tmp_path: Path) -> None:
    folder = tmp_path / "class"
    folder.mkdir()
    (folder / "broken.yaml").write_text("rounds: [", encoding="utf-8")
    app = make_app(tmp_path, "evidence-backed-diagnosis", scenario_dir=folder)
    async with app.run_test(size=SMALL) as pilot:
        await engine_ready(pilot)
        await pilot.press("f4")
        await wait_until(lambda: isinstance(app.screen, ScenarioPicker), pilot, what="the picker")
        picker = app.screen
        assert isinstance(picker, ScenarioPicker)
        listed = picker.query_one(OptionList)
        assert listed.option_count == 18  # the 17 built-ins and the broken file, dimmed, last
        await pilot.press(*"budget ex")
        await pilot.pause()
        names = [picker.choices[i].name for i in picker.shown]
        assert names == ["model-call-budget-exhausted", "token-budget-exhausted"]
        assert listed.option_count == 2
        assert "filter budget ex  2 of 18" in painted_text(app)
        await pilot.press("down", "enter")
        await engine_ready(pilot)
        assert app.engine_status.label == "scripted: token-budget-exhausted"

        await pilot.press("f4")
        await wait_until(lambda: isinstance(app.screen, ScenarioPicker), pilot, what="the picker again")
        await pilot.press(*"broken")
        await pilot.pause()
        assert "not valid YAML" in painted_text(app)
        await pilot.press("enter")  # a file that does not load is never opened
        await pilot.pause()
        assert isinstance(app.screen, ScenarioPicker)
        await pilot.press(*("backspace",) * 6)
        assert app.screen.query_one(OptionList).option_count == 18
