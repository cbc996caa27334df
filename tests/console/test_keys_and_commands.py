"""Discoverability: every key is in the footer/help and the README table, every action in the palette."""

from __future__ import annotations

from pathlib import Path

from textual.binding import Binding

from console.app import DiagnoseApp
from console.screens.audit import AuditScreen
from console.screens.help import HelpScreen, key_table
from console.screens.investigate import InvestigateScreen
from tests.support.console import SIZE, engine_ready, make_app, plain

README = Path(__file__).parents[2] / "README.md"


async def test_every_action_has_a_palette_command(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE):
        commands = {cmd.callback.__name__ for cmd in app.get_system_commands(app.screen)}
    bindings = [b for b in (*DiagnoseApp.BINDINGS, *InvestigateScreen.BINDINGS) if isinstance(b, Binding)]
    for binding in bindings:
        assert f"action_{binding.action}" in commands, binding
    assert {"action_audit", "action_investigate", "action_copy_draft_json"} <= commands
    audit = [b for b in AuditScreen.BINDINGS if isinstance(b, Binding)]
    assert all(b.action.startswith("app.") or b.action in {"focus_search", "switch_tab"} for b in audit)


def test_the_readme_key_table_lists_every_key(tmp_path: Path) -> None:
    readme = README.read_text(encoding="utf-8")
    for _, rows in make_app(tmp_path).key_sections():
        for keys, what in rows:
            assert any(f"`{keys}`" in line and what in line for line in readme.splitlines()), (keys, what)


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
                assert keys in shown and what in shown
        await pilot.press("escape")
        assert app.theme == "textual-dark"
        await pilot.press("ctrl+l")
        assert app.theme == "textual-light"
        app.investigate.run_view.timeline.focus()
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
