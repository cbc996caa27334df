"""The console marks token counts that are estimates (the provider reported no usable usage) with `~`."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from console.app import DiagnoseApp
from console.widgets.budget import BudgetGauge
from tests.support.console import SIZE, has_row, run_to_end, timeline_labels

NO_CONCLUSION = json.dumps(
    {
        "conclusion": None,
        "analysis": [],
        "action_plan": [],
        "recommendations": [],
        "limitations": {"checked_scope": [], "missing_info": ["the time window"]},
    }
)


def _scenario(tmp_path: Path, usage: dict[str, int] | None) -> Path:
    path = tmp_path / "usage.json"
    text_round: dict[str, object] = {"text": NO_CONCLUSION}
    if usage is not None:
        text_round["usage"] = usage
    path.write_text(json.dumps({"name": "usage", "query": "q", "rounds": [text_round]}), encoding="utf-8")
    return path


async def test_estimated_usage_is_marked_in_the_gauge_and_the_timeline(
    app_factory: Callable[..., DiagnoseApp], tmp_path: Path
) -> None:
    app = app_factory(str(_scenario(tmp_path, None)))
    async with app.run_test(size=SIZE) as pilot:
        await run_to_end(pilot)
        gauge = app.investigate.query_one(BudgetGauge).render().plain
        tokens_row = next(line for line in gauge.splitlines() if line.startswith("tokens"))
        assert "~" in tokens_row
        assert tokens_row.rstrip().endswith("/ 64,000")
        assert has_row(timeline_labels(app), "round 1", "~")


async def test_reported_usage_carries_no_estimate_mark(
    app_factory: Callable[..., DiagnoseApp], tmp_path: Path
) -> None:
    app = app_factory(str(_scenario(tmp_path, {"prompt_tokens": 1200, "completion_tokens": 80})))
    async with app.run_test(size=SIZE) as pilot:
        await run_to_end(pilot)
        gauge = app.investigate.query_one(BudgetGauge).render().plain
        tokens_row = next(line for line in gauge.splitlines() if line.startswith("tokens"))
        assert "~" not in tokens_row
        assert "1,280 / 64,000" in tokens_row
        assert has_row(timeline_labels(app), "round 1", "1200+80 tok")
        assert not has_row(timeline_labels(app), "~")
