"""The footer follows the run by itself: `running` and `carry` are reactives that refresh the bindings."""

from __future__ import annotations

from pathlib import Path

from textual.widgets._footer import FooterKey

from console.app import DiagnoseApp
from tests.support.console import SIZE, engine_ready, make_app, wait_until

SLOW = """\
name: slow
title: The model takes its time in round 2
description: A run that stays in progress until it is cancelled.
query: "payment-service 2026-11-30 02:00-03:00 UTC 支付超时，请诊断。"
rounds:
  - tool_calls:
      - {id: call-1, name: lookup_knowledge,
         arguments: {previous_observation: null, input: {query: "payment-service 支付超时", top_k: 2}}}
    usage: {prompt_tokens: 812, completion_tokens: 64}
  - text: '{"conclusion": null}'
    usage: {prompt_tokens: 1400, completion_tokens: 210}
    delay_ms: 600000
"""


def footer(app: DiagnoseApp) -> set[str]:
    """The keys the footer offers as usable (a key the screen disables is shown dimmed, not offered)."""
    return {key.description for key in app.screen.query(FooterKey) if not key.has_class("-disabled")}


async def test_footer_offers_what_the_run_allows(tmp_path: Path) -> None:
    scenario = tmp_path / "slow.yaml"
    scenario.write_text(SLOW, encoding="utf-8")
    app = make_app(tmp_path, str(scenario))
    async with app.run_test(size=SIZE) as pilot:
        await engine_ready(pilot)
        screen = app.investigate
        assert {"Run"} <= footer(app)
        assert not {"Cancel", "Follow-up", "Copy", "Export"} & footer(app)

        await pilot.press("ctrl+r")
        await wait_until(lambda: screen.state.round_in_flight == 2, pilot, what="model round 2")
        assert screen.running
        assert "Cancel" in footer(app)
        assert "Run" not in footer(app)

        await pilot.press("escape")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert not screen.running
        assert "Run" in footer(app)
        assert "Cancel" not in footer(app)
        assert screen.state.outcome == "CANCELLED"
        assert "Export" in footer(app)


async def test_a_carried_turn_offers_dropping_it(tmp_path: Path) -> None:
    app = make_app(tmp_path, "evidence-backed-diagnosis")
    async with app.run_test(size=SIZE) as pilot:
        await engine_ready(pilot)
        screen = app.investigate
        assert "Follow-up" not in footer(app)
        screen.carry = {
            "query": "q",
            "conclusion": None,
            "limitations": {"checked_scope": [], "missing_info": []},
        }
        await pilot.pause()
        assert "Follow-up" in footer(app)
        assert screen.query_one("#carry").display
        await pilot.press("ctrl+f")  # drops it
        await pilot.pause()
        assert screen.carry is None
        assert "Follow-up" not in footer(app)
        assert not screen.query_one("#carry").display
