"""Model and tool text is shown literally: markup in a query, a tool input or a Draft is never interpreted."""

from __future__ import annotations

from pathlib import Path

from tests.support.console import SIZE, has_row, make_app, result_text, run_to_end, timeline_labels

HOSTILE = "[bold red]boom[/] [@click=app.quit]x[/]"
SCENARIO = """\
name: markup-in-model-text
title: "[blink]a title[/blink]"
description: Markup everywhere the model or a trainer writes text.
query: "payment-service [b]timeouts[/b]"
rounds:
  - tool_calls:
      - {id: call-1, name: lookup_knowledge,
         arguments: {previous_observation: null, input: {query: "HOSTILE", top_k: 1}}}
  - text: '{"conclusion": null, "analysis": [{"kind": "NEGATIVE_OBSERVATION", "statement": "HOSTILE",
      "scope": "[i]scope[/i]", "evidence": "NO_EVIDENCE"}], "action_plan": ["HOSTILE"], "recommendations": [],
      "limitations": {"checked_scope": ["[u]runbooks[/u]"], "missing_info": ["[s]logs[/s]"]}}'
""".replace("HOSTILE", HOSTILE)


async def test_markup_is_never_interpreted(tmp_path: Path) -> None:
    scenario = tmp_path / "markup.yaml"
    scenario.write_text(SCENARIO, encoding="utf-8")
    app = make_app(tmp_path, str(scenario))
    async with app.run_test(size=SIZE) as pilot:
        await run_to_end(pilot)
        assert app.is_running  # the [@click=app.quit] text did nothing
        assert app.investigate.state.outcome == "DRAFT"
        assert has_row(timeline_labels(app), "call-1", "[bold red]boom[/]")
        shown = result_text(app)
        assert shown.count(HOSTILE) == 2
        assert "[i]scope[/i]" in shown
        assert "[u]runbooks[/u]" in shown
        assert "[s]logs[/s]" in shown
