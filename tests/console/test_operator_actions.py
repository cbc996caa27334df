"""Nothing the operator does is dropped, and every size from 60×18 up is usable (issue 12, items 1 and 3–7).

Driven like an operator: keys through the pilot, assertions on what the screen paints or what the
console did (the run that started, the screen shown), real built-in scenarios through the real engine.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from textual.widgets import OptionList, TextArea

from console.app import DiagnoseApp
from console.screens.confirm_quit import ConfirmQuit
from console.screens.scenarios import ScenarioPicker
from console.widgets.budget import BudgetGauge
from console.widgets.detail import DetailPanel
from console.widgets.result import ResultView
from console.widgets.timeline import Timeline
from tests.support.console import (
    SIZE,
    a_slow_run,
    engine_ready,
    fail_reloads,
    make_app,
    painted_text,
    run_to_end,
    settled,
    slow_app,
    wait_until,
)

AppFactory = Callable[..., DiagnoseApp]


def gated_environment(gate: threading.Event, audit_db: Path) -> Callable[[str | None], Any]:
    """The real run environment, opened only once the test opens the gate (a slow engine import)."""

    def factory(scenario: str | None) -> Any:
        from console.wiring import open_run_environment

        assert gate.wait(30), "the test never opened the gate"
        return open_run_environment(config=None, scenario=scenario, audit_db=audit_db)

    return factory


# ------------------------------------------------------------------ item 1: responsive layout
async def test_at_80x24_a_finished_run_shows_outcome_conclusion_and_calls(app_factory: AppFactory) -> None:
    app = app_factory("evidence-backed-diagnosis")
    async with app.run_test(size=(80, 24)) as pilot:
        await run_to_end(pilot)
        screen = painted_text(app)
        assert "finished: DRAFT (exit 0)" in screen  # the status bar keeps the outcome
        assert "DRAFT / COMPLETED" in screen
        assert "Conclusion" in screen
        assert "payment-service v2.14.0" in screen  # the Draft's conclusion itself
        assert "↳ call-2  query_logs  FOUND" in screen
        assert app.investigate.run_view.panel == "result"
        await pilot.press("f5")  # the calls: the timeline tab
        await pilot.pause()
        screen = painted_text(app)
        for call in ("call-1   lookup_knowledge FOUND", "call-2   query_logs", "call-3   query_logs"):
            assert call in screen
        # The gauges, one line each.
        assert "budget " in screen
        assert "calls 4/8" in screen


async def test_wide_terminals_show_every_panel_side_by_side(app_factory: AppFactory) -> None:
    app = app_factory("evidence-backed-diagnosis")
    async with app.run_test(size=(160, 45)) as pilot:
        await run_to_end(pilot)
        view = app.investigate.run_view
        assert not view.narrow
        for widget in (view.timeline, view.query_one(DetailPanel), view.query_one(ResultView)):
            assert widget.region.width > 30
            assert widget.region.height > 5
        assert "■ DRAFT / COMPLETED" in painted_text(app)
        assert "Progress protocol" in painted_text(app)


async def test_below_60x18_the_console_says_it_is_too_small(app_factory: AppFactory) -> None:
    app = app_factory("evidence-backed-diagnosis")
    async with app.run_test(size=(58, 16)) as pilot:
        await engine_ready(pilot)
        assert "terminal too small (need 60×18)" in painted_text(app)
        await pilot.resize_terminal(60, 20)
        await pilot.pause()
        screen = painted_text(app)
        assert "too small" not in screen
        assert "Query" in screen


# ------------------------------------------------------------------ item 3: f8 on every panel
async def test_f8_maximises_the_panel_around_the_focus(app_factory: AppFactory) -> None:
    app = app_factory("evidence-backed-diagnosis")
    async with app.run_test(size=SIZE) as pilot:
        await run_to_end(pilot)
        screen = app.investigate
        query = screen.query_one("#query", TextArea)
        citations = screen.query_one("#result-citations", OptionList)
        for focus, panel in (
            (query, query),
            (citations, screen.query_one(ResultView)),
            (screen.run_view.timeline, screen.run_view.timeline),
            (screen.query_one(DetailPanel), screen.query_one(DetailPanel)),
        ):
            focus.focus()
            await pilot.press("f8")
            await pilot.pause()
            assert screen.maximized is panel
            assert panel.region.height >= SIZE[1] - 3, (panel, panel.region)  # fills the screen
            await pilot.press("f8")
            await pilot.pause()
            assert screen.maximized is None


# ------------------------------------------------------------------ item 4: citations reachable
async def test_f7_goes_to_the_citations_with_a_visible_cursor(app_factory: AppFactory) -> None:
    app = app_factory("evidence-backed-diagnosis")
    async with app.run_test(size=SIZE) as pilot:
        await run_to_end(pilot)
        citations = app.investigate.query_one("#result-citations", OptionList)
        assert citations.highlighted == 0  # the cursor is there before the list is focused
        await pilot.press("f7")
        await pilot.press("down", "enter")
        await pilot.pause()
        timeline = app.investigate.run_view.timeline
        assert timeline.has_focus
        assert timeline.cursor_node is not None
        assert timeline.cursor_node.data[0] == "call"
        assert app.investigate.query_one(DetailPanel).key == timeline.cursor_node.data


# ------------------------------------------------------------------ item 5: ctrl+r while loading
async def test_ctrl_r_while_the_engine_loads_is_queued_and_runs(tmp_path: Path) -> None:
    gate = threading.Event()
    factory = gated_environment(gate, tmp_path / "audit.db")
    app = make_app(tmp_path, "evidence-backed-diagnosis", env_factory=factory)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert app.engine_status.state == "loading"
        await pilot.press("ctrl+r")
        await pilot.pause()
        assert "run queued: it starts as soon as the engine is ready" in painted_text(app)
        gate.set()
        await settled(pilot)
        await wait_until(
            lambda: app.investigate.state.result is not None and not app.investigate.running,
            pilot,
            what="the queued run to end",
        )
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert app.investigate.state.outcome == "DRAFT"
        assert app.investigate.last_query == app.investigate.query_one("#query", TextArea).text
        assert "queued" not in painted_text(app)


async def test_ctrl_r_when_the_engine_failed_says_why(app_factory: AppFactory) -> None:
    app = app_factory()
    fail_reloads(app, "audit unavailable: the disk is gone")
    async with app.run_test(size=SIZE) as pilot:
        await engine_ready(pilot)
        app.load_engine("stop-required-ignored")
        await settled(pilot)
        await pilot.press("ctrl+r")
        await pilot.pause()
        said = [n.message for n in app._notifications]
        assert any(m.startswith("Cannot run: audit unavailable: the disk is gone") for m in said), said
        assert app.investigate.use_case is None
        assert app.investigate.activity == "no engine: nothing can run · f4 picks another scenario"


# ------------------------------------------------------------------ item 6: scenario switch clears
async def pick_scenario(app: DiagnoseApp, pilot: Any, name: str) -> None:
    """f4, highlight `name` in the picker, enter: what an operator does to switch scenario."""
    await pilot.press("f4")
    await pilot.pause()
    picker = app.screen
    assert isinstance(picker, ScenarioPicker)
    picker.query_one(OptionList).highlighted = next(i for i, c in enumerate(picker.choices) if c.name == name)
    await pilot.press("enter")


async def test_switching_scenario_clears_the_previous_run(app_factory: AppFactory) -> None:
    app = app_factory("evidence-backed-diagnosis")
    async with app.run_test(size=SIZE) as pilot:
        await run_to_end(pilot)
        await pilot.press("ctrl+f")  # a carried turn from the Draft
        assert app.investigate.carry is not None
        await pick_scenario(app, pilot, "stop-required-ignored")
        await engine_ready(pilot)
        screen = painted_text(app)
        assert "finished:" not in screen
        assert "DRAFT / COMPLETED" not in screen
        assert "idle · ctrl+r runs the query" in screen
        assert "No result yet." in screen
        assert app.investigate.carry is None
        assert app.investigate.state.draft is None
        assert app.investigate.run_view.timeline.line_count == 0


async def test_a_run_queued_while_loading_does_not_start_for_another_scenario(tmp_path: Path) -> None:
    """ctrl+r while the engine loads, then f4 to another scenario: the new scenario's query was never
    submitted, so nothing may run when its engine is ready."""
    gate = threading.Event()
    app = make_app(
        tmp_path, "evidence-backed-diagnosis", env_factory=gated_environment(gate, tmp_path / "audit.db")
    )
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("ctrl+r")
        await pilot.pause()
        assert app.investigate.queued is not None
        await pick_scenario(app, pilot, "stop-required-ignored")
        gate.set()
        await engine_ready(pilot)
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert app.investigate.queued is None
        assert app.investigate.state.result is None
        assert not app.investigate.running
        assert "queued" not in painted_text(app)


# ------------------------------------------------------------------ item 7: ctrl+q / ctrl+r in a run
async def test_ctrl_q_during_a_run_asks_and_ctrl_r_says_why(tmp_path: Path) -> None:
    app = slow_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await a_slow_run(pilot)
        assert app.investigate.running
        assert "Cancel run" in {c.title for c in app.get_system_commands(app.screen)}
        await pilot.press("ctrl+r")
        await pilot.pause()
        said = [n.message for n in app._notifications]
        assert "A run is in progress: wait for it to finish, or escape cancels it." in said
        await pilot.press("ctrl+q")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmQuit)
        assert app.is_running
        assert "Quitting cancels it" in painted_text(app)
        await pilot.press("n")
        await pilot.pause()
        # The run goes on.
        assert app.investigate.running
        assert app.return_code is None
        assert not isinstance(app.screen, ConfirmQuit)
        await pilot.press("ctrl+q")
        await pilot.pause()
        await pilot.press("y")
        await pilot.pause()
        assert app.return_code == 0  # quit


async def test_ctrl_q_when_idle_quits_at_once(app_factory: AppFactory) -> None:
    app = app_factory()
    async with app.run_test(size=SIZE) as pilot:
        await engine_ready(pilot)
        await pilot.press("ctrl+q")
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmQuit)
        assert app.return_code == 0


# ------------------------------------------------------------------ item 13: budget before a run
async def test_the_budget_shows_the_limits_before_the_first_run(app_factory: AppFactory) -> None:
    app = app_factory("evidence-backed-diagnosis")
    async with app.run_test(size=SIZE) as pilot:
        await engine_ready(pilot)
        gauge = app.investigate.query_one(BudgetGauge)
        assert gauge.budget is not None
        assert gauge.budget["model_calls"]["limit"] == 8
        assert "— / 8" in painted_text(app)
        assert "— / —" not in painted_text(app)
        assert isinstance(app.investigate.run_view.timeline, Timeline)


async def test_panel_borders_stand_out_in_both_themes(app_factory: AppFactory) -> None:
    app = app_factory("evidence-backed-diagnosis")
    async with app.run_test(size=SIZE) as pilot:
        await engine_ready(pilot)
        for theme in ("textual-dark", "textual-light"):
            app.theme = theme
            await pilot.pause()
            for widget in (app.investigate.run_view.timeline, app.investigate.query_one("#query", TextArea)):
                widget.blur()
                await pilot.pause()
                background = widget.styles.background
                border = background + widget.styles.border_top[1]  # the border colour as painted
                assert abs(border.brightness - background.brightness) > 0.2, (theme, widget, border)


async def test_the_footer_names_the_focused_panels_keys(app_factory: AppFactory) -> None:
    app = app_factory("evidence-backed-diagnosis")
    async with app.run_test(size=(160, 45)) as pilot:
        await run_to_end(pilot)
        await pilot.press("f5")
        await pilot.pause()
        footer = painted_text(app).splitlines()[-1]
        assert "Detail" in footer
        assert "Fold" in footer
        await pilot.press("f7")
        await pilot.pause()
        assert "Show call" in painted_text(app).splitlines()[-1]


async def test_a_cancelled_round_no_longer_says_it_is_waiting(tmp_path: Path) -> None:
    from tests.console.test_bindings import SLOW
    from tests.support.console import timeline_labels

    scenario = tmp_path / "slow.yaml"
    scenario.write_text(SLOW, encoding="utf-8")
    app = make_app(tmp_path, str(scenario))
    async with app.run_test(size=SIZE) as pilot:
        await engine_ready(pilot)
        await pilot.press("ctrl+r")
        await wait_until(lambda: app.investigate.state.round_in_flight == 2, pilot, what="model round 2")
        assert any("round 2" in label and "waiting for the model" in label for label in timeline_labels(app))
        await pilot.press("escape")
        await app.workers.wait_for_complete()
        await pilot.pause()
        labels = timeline_labels(app)
        assert app.investigate.state.outcome == "CANCELLED"
        assert not any("waiting for the model" in label for label in labels)
        assert any("round 2" in label and "no reply: the run ended first" in label for label in labels)
