"""Discoverability: every key is in the footer/help and the README table, every action in the palette."""

from __future__ import annotations

import asyncio
import itertools
import os
from pathlib import Path

from textual.app import SystemCommand
from textual.binding import Binding

from console.app import DiagnoseApp
from console.screens.audit import AuditScreen
from console.screens.help import HelpScreen, key_table
from console.screens.investigate import InvestigateScreen
from tests.support.console import SIZE, engine_ready, make_app, plain, run_to_end

README = Path(__file__).parents[2] / "README.md"


def palette(app: DiagnoseApp) -> dict[str, SystemCommand]:
    return {command.title: command for command in app.get_system_commands(app.screen)}


async def test_the_palette_offers_what_applies_now_with_keys_from_the_bindings(tmp_path: Path) -> None:
    app = make_app(tmp_path, "evidence-backed-diagnosis")
    async with app.run_test(size=SIZE) as pilot:
        await engine_ready(pilot)
        idle = palette(app)
        assert idle["Run query"].help.endswith("(ctrl+r)")
        assert idle["Help"].help.endswith("(f1)")
        assert (
            not {"Cancel run", "Copy Draft", "Export run", "Investigate"} & idle.keys()
        )  # nothing to act on
        assert not {"Keys", "Maximize", "Minimize"} & idle.keys()  # Textual's own, replaced by ours
        seen = {command.callback.__name__ for command in idle.values()}
        await run_to_end(pilot)
        finished = palette(app)
        assert {"Copy Draft", "Copy Draft as JSON", "Export run", "Follow-up"} <= finished.keys()
        assert finished["Export run"].help.endswith("(ctrl+s)")
        seen |= {command.callback.__name__ for command in finished.values()}
        await pilot.press("f3")
        await pilot.pause()
        on_audit = palette(app)
        assert "Investigate" in on_audit
        assert "Run query" not in on_audit
        seen |= {command.callback.__name__ for command in on_audit.values()}

        on_audit["Screenshot"].callback()
        await pilot.pause()
        saved = [n.message for n in app._notifications if n.title == "Screenshot saved"]
    assert saved
    assert Path(saved[0]).parent == tmp_path
    assert Path(saved[0]).suffix == ".svg"
    assert await asyncio.to_thread(os.path.getsize, saved[0]) > 0
    bindings = [b for b in (*DiagnoseApp.BINDINGS, *InvestigateScreen.BINDINGS) if isinstance(b, Binding)]
    for binding in bindings:
        if (
            binding.action != "cancel_run"
        ):  # offered only during a run (tests/console/test_operator_actions.py)
            assert f"action_{binding.action}" in seen, binding
    audit = [b for b in AuditScreen.BINDINGS if isinstance(b, Binding)]
    assert all(b.action.startswith("app.") or b.action in {"focus_search", "switch_tab"} for b in audit)


def readme_key_table() -> list[tuple[str, str, str]]:
    """README's "Keys" table as (where, keys, what) rows, in its order."""
    lines = README.read_text(encoding="utf-8").split("\n### Keys\n", 1)[1].splitlines()
    from_table = itertools.dropwhile(lambda line: not line.startswith("|"), lines)
    table = list(itertools.takewhile(lambda line: line.startswith("|"), from_table))
    assert table[0] == "| where | key | what it does |"
    assert table[1] == "|---|---|---|"
    rows = []
    for line in table[2:]:
        where, keys, what = (cell.strip() for cell in line.strip("|").split(" | "))
        assert keys.startswith("`"), line
        assert keys.endswith("`"), line
        rows.append((where, keys[1:-1], what))
    return rows


def test_the_readme_key_table_is_the_help(tmp_path: Path) -> None:
    """README's table and the bindings agree both ways: no key missing, none extra, same words."""
    help_rows = [
        (where, keys, what) for where, rows in make_app(tmp_path).key_sections() for keys, what in rows
    ]
    readme_rows = readme_key_table()
    assert [row for row in help_rows if row not in readme_rows] == []  # keys README lacks
    assert [row for row in readme_rows if row not in help_rows] == []  # README keys no binding has
    assert readme_rows == help_rows  # and in the help's order


async def test_help_screen_shows_every_key_and_theme_toggles(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await engine_ready(pilot)
        await pilot.press("f1")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        shown = plain(key_table(app.key_sections()), width=120)
        for _, rows in app.key_sections():
            for keys, what in rows:
                assert keys in shown
                assert what in shown
        await pilot.press("escape")
        assert app.theme == "textual-dark"
        await pilot.press("ctrl+l")
        assert app.theme == "textual-light"
        app.investigate.run_view.timeline.focus()
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
