"""The investigate screen driven like an operator: real runs of built-in scenarios through the real engine.

Each test reads what the widgets show (timeline rows, gauge, protocol panel, result), not internals.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.json import JSON
from textual.widgets import OptionList, Static, TextArea

from console.app import DiagnoseApp
from console.export import draft_markdown
from console.screens.scenarios import ScenarioPicker
from console.widgets.budget import BudgetGauge
from console.widgets.detail import DetailPanel, entry_detail
from console.widgets.protocol import ProtocolPanel
from console.widgets.result import ResultView
from tests.support.console import (
    SIZE,
    engine_ready,
    fail_reloads,
    has_row,
    plain,
    result_text,
    run_to_end,
    settled,
    timeline_labels,
)

AppFactory = Callable[..., DiagnoseApp]


def gauge_text(app: DiagnoseApp) -> str:
    return app.investigate.query_one(BudgetGauge).render().plain


def protocol_text(app: DiagnoseApp) -> str:
    return " ".join(app.investigate.query_one(ProtocolPanel).render().plain.split())


async def test_evidence_backed_diagnosis(app_factory: AppFactory) -> None:
    app = app_factory("evidence-backed-diagnosis")
    async with app.run_test(size=SIZE) as pilot:
        await run_to_end(pilot)
        labels = timeline_labels(app)
        assert has_row(labels, "round 1", "1850+62 tok", "1 tool call")
        assert has_row(labels, "call-1", "lookup_knowledge", "FOUND", "eval GAINED", 'query="payment-service')
        assert has_row(labels, "call-2", "query_logs", "FOUND", "eval GAINED", "payment-service")
        assert has_row(labels, "call-3", "query_logs", "FOUND")
        assert has_row(labels, "round 4", "4105+420 tok", "final text")
        assert labels[-1].startswith("■ DRAFT / COMPLETED exit 0")

        gauge = gauge_text(app)
        assert "4 / 8" in gauge
        assert "12,346 / 64,000" in gauge
        assert "6,305 / 262,144" in gauge
        assert "— / 300 s" in gauge  # elapsed time is hidden in pinned (snapshot) mode
        assert {app.investigate.query_one(BudgetGauge).level(k) for k in ("model_calls", "tokens")} == {"ok"}

        protocol = protocol_text(app)
        # the last FOUND, never evaluated: the Draft came next, and nothing is pending once the run ended
        assert "pending observation none: the run ended (call-3 never evaluated)" in protocol
        assert "no-gain streak 0 / 3" in protocol
        assert "violations 0 / 3" in protocol
        assert "STOP_REQUIRED no" in protocol
        assert "saturation —" in protocol

        result = result_text(app)
        assert "DRAFT / COMPLETED exit 0: a Draft was produced" in result
        assert "run run-0001 · 4 model calls · 12,346 tokens" in result
        assert "payment-service v2.14.0" in result
        assert "FINDING" in result
        assert "↳ call-2 query_logs FOUND eval GAINED" in result
        assert "Action plan" in result
        assert "Limitations: missing information" in result


async def test_citation_jumps_to_the_call_and_detail_shows_exactly_the_observation(
    app_factory: AppFactory,
) -> None:
    app = app_factory("evidence-backed-diagnosis")
    async with app.run_test(size=SIZE) as pilot:
        await run_to_end(pilot)
        screen = app.investigate
        options = screen.query_one(ResultView).query_one(OptionList)
        options.focus()
        citation = next(
            i
            for i in range(options.option_count)
            if "↳ call-2" in plain(options.get_option_at_index(i).prompt)
        )
        options.highlighted = citation
        await pilot.press("enter")
        await pilot.pause()

        timeline = screen.run_view.timeline
        assert timeline.has_focus
        assert timeline.cursor_node is not None
        assert timeline.cursor_node.data == ("call", "call-2")
        assert screen.query_one(DetailPanel).key == ("call", "call-2")

        seen = next(
            e for e in screen.state.events if e["type"] == "tool_finished" and e["tool_call_id"] == "call-2"
        )
        blocks = entry_detail(screen.state, ("call", "call-2"))
        observation_block = blocks[
            blocks.index(next(b for b in blocks if "exactly what the model saw" in str(b))) + 1
        ]
        assert isinstance(observation_block, JSON)
        assert json.loads(observation_block.text.plain) == seen["observation"]


async def test_stop_required_ignored_is_a_controlled_stop(app_factory: AppFactory) -> None:
    app = app_factory("stop-required-ignored")
    async with app.run_test(size=SIZE) as pilot:
        await run_to_end(pilot)
        labels = timeline_labels(app)
        assert has_row(labels, "call-1", "query_logs", "EMPTY")
        assert has_row(labels, "call-2", "query_logs", "EMPTY", "SATURATED", "STOP_REQUIRED") is False
        assert has_row(labels, "call-2", "query_logs", "EMPTY", "STOP_REQUIRED")
        assert has_row(labels, "call-3", "not executed", "STOP_REQUIRED")
        assert has_row(labels, "⚑ COLLECTION_STOPPED", "call-3")

        protocol = protocol_text(app)
        assert "no-gain streak 2 / 2" in protocol
        assert "STOP_REQUIRED yes · saturation" in protocol
        assert "final opportunity spent on a tool call (collection stopped)" in protocol
        assert "saturation INFORMATION_SATURATED" in protocol
        assert app.investigate.query_one(ProtocolPanel).lines[1][2] == "full"

        assert "3 / 8" in gauge_text(app)
        result = result_text(app)
        assert "CONTROLLED_STOP / INFORMATION_SATURATED exit 10" in result
        assert "stop_required: yes · saturation: INFORMATION_SATURATED" in result
        assert "call-1 query_logs EMPTY" in result
        assert "call-2 query_logs EMPTY" in result


async def test_model_call_budget_exhausted_names_the_budget(app_factory: AppFactory) -> None:
    app = app_factory("model-call-budget-exhausted")
    async with app.run_test(size=SIZE) as pilot:
        await run_to_end(pilot)
        labels = timeline_labels(app)
        assert has_row(labels, "⚑ STOP_REQUIRED", "one model call left")
        assert has_row(labels, "call-3", "not executed", "STOP_REQUIRED")
        assert labels[-1].startswith("■ BUDGET_EXHAUSTED / MODEL_CALLS_EXHAUSTED exit 11")

        gauge = app.investigate.query_one(BudgetGauge)
        assert "3 / 3" in gauge_text(app)
        assert "model calls budget ended the run" in gauge_text(app)
        assert gauge.level("model_calls") == "full"
        assert gauge.level("tokens") == "ok"

        protocol = protocol_text(app)
        assert "pending observation none: the run ended (call-2 never evaluated)" in protocol
        assert "STOP_REQUIRED yes · one model call left" in protocol
        assert "final opportunity spent on a tool call" in protocol

        result = result_text(app)
        assert "BUDGET_EXHAUSTED / MODEL_CALLS_EXHAUSTED exit 11: a run budget ran out" in result
        assert "budget that ended the run: model calls" in result


async def test_missing_context_is_an_explicit_no_conclusion(app_factory: AppFactory) -> None:
    app = app_factory("missing-context-zero-tools")
    async with app.run_test(size=SIZE) as pilot:
        await run_to_end(pilot)
        labels = timeline_labels(app)
        assert len(labels) == 2
        assert has_row(labels, "round 1", "final text")
        result = result_text(app)
        assert "DRAFT / COMPLETED" in result
        assert "No conclusion: the evidence does not support one (conclusion: null)." in result
        assert app.investigate.state.draft is not None
        for missing in app.investigate.state.draft["limitations"]["missing_info"]:
            assert " ".join(missing.split()) in result


async def test_oversized_query_is_rejected_before_any_model_call(app_factory: AppFactory) -> None:
    app = app_factory("oversized-query-rejected")
    async with app.run_test(size=SIZE) as pilot:
        await run_to_end(pilot)
        assert timeline_labels(app) == [
            "■ REJECTED / QUERY_TOO_LARGE exit 2: the input was rejected before any model call"
        ]
        result = result_text(app)
        assert "the query exceeds its size limit (it is never truncated)" in result
        assert "failure QUERY_TOO_LARGE (detail: the query is" in result
        assert "never started" in protocol_text(app)
        assert "— / —" in gauge_text(app)


async def test_copy_draft_and_export(app_factory: AppFactory, tmp_path: Any) -> None:
    app = app_factory("evidence-backed-diagnosis")
    async with app.run_test(size=SIZE) as pilot:
        await run_to_end(pilot)
        await pilot.press("ctrl+g")
        assert app.clipboard == draft_markdown(app.investigate.state.draft or {})

        await pilot.press("ctrl+s")
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause()
        exported = json.loads((tmp_path / "diagnosis-run-0001.json").read_text(encoding="utf-8"))
        assert exported["result"]["outcome"] == "DRAFT"
        assert [e["type"] for e in exported["events"]][-1] == "run_finished"
        markdown = (tmp_path / "diagnosis-run-0001.md").read_text(encoding="utf-8")
        assert markdown.startswith("# Diagnosis run run-0001")
        assert "Exported: 2026-11-30T03:00:00+00:00" in markdown


async def test_follow_up_sends_exactly_the_carried_previous_turn(app_factory: AppFactory) -> None:
    app = app_factory("evidence-backed-diagnosis")
    async with app.run_test(size=SIZE) as pilot:
        await run_to_end(pilot)
        screen = app.investigate
        first_query = screen.state.query
        draft = screen.state.draft
        assert draft is not None
        assert first_query

        await pilot.press("ctrl+f")
        expected = {
            "query": first_query,
            "conclusion": draft["conclusion"],
            "limitations": draft["limitations"],
        }
        assert screen.carry == expected
        shown = plain(screen.query_one("#carry", Static).content, width=2000)
        assert json.dumps(expected, ensure_ascii=False) in shown  # exactly what will be sent, before sending
        assert screen.query_one("#query", TextArea).text == ""

        await pilot.press(*"rollback?")
        await run_to_end(pilot)

        started = next(e for e in screen.state.events if e["type"] == "run_started")
        assert started["previous_turn"] == expected
        assert started["query"] == "rollback?"
        user = next(m for m in screen.use_case.chat_generator.received[0] if m.role.value == "user")
        assert json.loads(user.text) == {"query": "rollback?", "previous_turn": expected}
        assert screen.carry is None  # consumed by the run that sent it


async def test_escape_when_idle_and_a_failed_engine(app_factory: AppFactory) -> None:
    app = app_factory()
    fail_reloads(app, "unknown scenario 'no-such-scenario'")
    async with app.run_test(size=SIZE) as pilot:
        await engine_ready(pilot)
        app.investigate.clear_run()
        app.load_engine("no-such-scenario")
        await settled(pilot)
        assert app.engine_status.state == "failed"
        assert "unknown scenario 'no-such-scenario'" in (app.engine_status.message or "")
        await pilot.press("escape")
        await pilot.press("ctrl+r")
        await pilot.pause()
        assert app.investigate.state.phase == "idle"
        assert app.investigate.use_case is None


async def test_scenario_picker_reopens_the_environment(app_factory: AppFactory) -> None:
    app = app_factory()
    async with app.run_test(size=SIZE) as pilot:
        await engine_ready(pilot)
        assert app.engine_status.label == "scripted: evidence-backed-diagnosis"
        await pilot.press("f4")
        await pilot.pause()
        picker = app.screen
        assert isinstance(picker, ScenarioPicker)
        options = picker.query_one(OptionList)
        options.highlighted = next(
            i for i, c in enumerate(picker.choices) if c.name == "stop-required-ignored"
        )
        await pilot.press("enter")
        await engine_ready(pilot)
        assert app.engine_status.label == "scripted: stop-required-ignored"
        assert app.env is not None
        assert app.env.scenario is not None
        assert app.investigate.query_one("#query", TextArea).text == app.env.scenario.query
        await run_to_end(pilot)
        assert app.investigate.state.outcome == "CONTROLLED_STOP"


async def test_scenario_picker_lists_a_trainers_folder(app_factory: AppFactory, tmp_path: Path) -> None:
    """Scenario files from `--scenario-dir` appear after the built-ins; a broken file is listed last,
    and cannot be opened."""
    folder = tmp_path / "class"
    folder.mkdir()
    (folder / "lesson-1.yaml").write_text(
        "name: lesson-1\ntitle: Lesson one\ndescription: Stop without evidence\nquery: 'q'\n"
        "rounds:\n  - text: '{}'\n",
        encoding="utf-8",
    )
    (folder / "broken.yaml").write_text("rounds: [", encoding="utf-8")
    app = app_factory(scenario_dir=folder)
    async with app.run_test(size=SIZE) as pilot:
        await engine_ready(pilot)
        await pilot.press("f4")
        await pilot.pause()
        picker = app.screen
        assert isinstance(picker, ScenarioPicker)
        usable = [c for c in picker.choices if c.usable]
        assert usable[-1].name == "lesson-1"
        assert "broken" not in [c.name for c in usable]
        assert usable[-1].source == str(folder / "lesson-1.yaml")
        assert usable[-1].title == "Lesson one"
        assert picker.choices[-1].name == "broken.yaml"
        assert not picker.choices[-1].usable
