"""The budget gauge: model calls, tokens, deadline and run bytes, used against their limits.

Colours come from the theme through component classes (warning from 80 %, error when spent), and the
budget that ended the run is named, so an operator sees at a glance why a run stopped.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from rich.text import Text
from textual.widget import Widget

ROWS = (
    ("model_calls", "model calls"),
    ("tokens", "tokens"),
    ("deadline", "deadline"),
    ("run_bytes", "run bytes"),
)
SHORT = {"model_calls": "calls", "tokens": "tokens", "deadline": "time", "run_bytes": "bytes"}
WARN_AT = 0.8
LABEL_WIDTH = 12
NUMBER_WIDTH = 19


def _number(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float) and not value.is_integer():
        return f"{value:,.1f}"
    return f"{int(value):,}"


def gauge_row(key: str, gauge: dict[str, Any] | None, show_timings: bool) -> tuple[float | None, str]:
    """(fraction used or None when unknown, 'used / limit' text) for one budget."""
    gauge = gauge or {}
    if key == "deadline":
        limit = gauge.get("limit_s")
        elapsed = gauge.get("elapsed_s") if show_timings else None
        text = f"{_number(elapsed)} / {_number(limit)} s"
        used = elapsed
    else:
        limit = gauge.get("limit")
        used = gauge.get("used")
        # "~": some round's usage was not reported by the provider, so the count is an estimate.
        text = f"{'~' if gauge.get('estimated') else ''}{_number(used)} / {_number(limit)}"
    if used is None or not limit:
        return None, text
    return min(float(used) / float(limit), 1.0), text


class BudgetGauge(Widget):
    ALLOW_MAXIMIZE = True  # f8 maximises the whole panel

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "gauge--ok",
        "gauge--warn",
        "gauge--full",
        "gauge--empty",
        "gauge--label",
    }

    def __init__(self, *, show_timings: bool = True, id: str | None = None) -> None:
        super().__init__(id=id)
        self.show_timings = show_timings
        self.budget: Mapping[str, Any] | None = None
        self.ending: str | None = None
        # The console's own count of a running run's seconds: run events come only at round and tool
        # boundaries, so while a model round waits the deadline would stand still without it.
        self.running_s: float | None = None

    def update_budget(self, budget: Mapping[str, Any] | None, ending: str | None) -> None:
        """`budget`: the gauges (`agent.run_events.BudgetGauges`), and `exhausted` once a run reports it."""
        self.budget = budget
        self.ending = ending
        self.refresh()

    def tick(self, running_s: float | None) -> None:
        """The seconds the run has been going (None: it ended, the engine's last figure stands)."""
        self.running_s = running_s
        self.refresh()

    def gauge(self, key: str) -> dict[str, Any] | None:
        """One budget's figures; the deadline's elapsed time no older than the console's own count."""
        figures = (self.budget or {}).get(key)
        if key != "deadline" or self.running_s is None:
            return figures
        elapsed = (figures or {}).get("elapsed_s")
        return {**(figures or {}), "elapsed_s": max(elapsed or 0.0, self.running_s)}

    def level(self, key: str) -> str:
        """ok | warn | full for one budget (what the colour says)."""
        fraction, _ = gauge_row(key, self.gauge(key), self.show_timings)
        if key == self.ending or (fraction is not None and fraction >= 1.0):
            return "full"
        if fraction is not None and fraction >= WARN_AT:
            return "warn"
        return "ok"

    def render(self) -> Text:
        if self.has_class("-compact"):
            return self.render_compact()
        bar_width = max(self.size.width - LABEL_WIDTH - NUMBER_WIDTH - 2, 4)
        label_style = self.get_component_rich_style("gauge--label")
        empty_style = self.get_component_rich_style("gauge--empty")
        out = Text(no_wrap=True, overflow="ellipsis")
        for key, title in ROWS:
            fraction, numbers = gauge_row(key, self.gauge(key), self.show_timings)
            style = self.get_component_rich_style(f"gauge--{self.level(key)}")
            filled = round((fraction or 0.0) * bar_width)
            out.append(f"{title:<{LABEL_WIDTH}}", style=label_style)
            out.append("█" * filled, style=style)
            out.append("░" * (bar_width - filled), style=empty_style)
            out.append(f" {numbers:>{NUMBER_WIDTH}}", style=style if key == self.ending else "")
            out.append("\n")
        if self.ending is not None:
            title = dict(ROWS)[self.ending]
            out.append(f"{title} budget ended the run", style=self.get_component_rich_style("gauge--full"))
        elif self.budget and self.budget.get("exhausted"):
            out.append(f"stopped: {self.budget['exhausted']}", style=label_style)
        return out

    def render_compact(self) -> Text:
        """One line for narrow terminals: every budget's numbers, coloured by level, no bars."""
        label_style = self.get_component_rich_style("gauge--label")
        out = Text(no_wrap=True, overflow="ellipsis")
        out.append("budget ", style="bold")
        for key, _ in ROWS:
            _, numbers = gauge_row(key, self.gauge(key), self.show_timings)
            out.append(f" {SHORT[key]} ", style=label_style)
            level = self.level(key)
            out.append(numbers.replace(" / ", "/"), style=self.get_component_rich_style(f"gauge--{level}"))
        if self.ending is not None:
            out.append(
                f"  {dict(ROWS)[self.ending]} ended the run",
                style=self.get_component_rich_style("gauge--full"),
            )
        return out
