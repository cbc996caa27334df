"""The progress-protocol panel: what the harness is waiting for and how close it is to stopping.

Counters and thresholds are operator-only (they come from `protocol_changed.state`); the model never
sees them. A replay from the audit has no counters, and the panel says so rather than guessing.
"""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual.widget import Widget

from agent.vocabulary import Outcome, ProtocolCode, StopReason
from console.presentation import STOP_CAUSE_TEXT
from console.run_state import RunState
from console.safe_text import neutralize

LABEL_WIDTH = 20


def final_opportunity(state: RunState) -> str:
    protocol = state.protocol or {}
    if not protocol.get("stop_required"):
        return "—"
    if state.collection_stopped:
        return "spent on a tool call (collection stopped)"
    if state.stop_reason == StopReason.COMPLETED_AFTER_STOP_REQUIRED:
        return "used: the final Draft"
    if state.result is not None:
        return "not used"
    return "open: the next round is the last"


def pending_text(state: RunState) -> str:
    """The observation the next call must evaluate. Once the run has ended nothing is awaited: a last
    FOUND the Draft came before is shown as never evaluated, not as still pending."""
    pending = (state.protocol or {}).get("pending_tool_call_id")
    shown = neutralize(str(pending), newlines=False) if pending else None
    if state.result is None:
        return shown or "none"
    return f"none: the run ended ({shown} never evaluated)" if shown else "none: the run ended"


def protocol_lines(state: RunState) -> list[tuple[str, str, str]]:
    """(label, value, level) rows; level is ok | warn | full."""
    protocol: dict[str, Any] = state.protocol or {}
    if state.protocol is None and state.outcome == Outcome.REJECTED:
        return [("protocol", "never started: the input was rejected before any model call", "ok")]
    if state.protocol is None and state.result is not None:
        progress = state.result.get("progress") or {}
        return [
            ("counters", "not recorded in the audit", "ok"),
            (ProtocolCode.STOP_REQUIRED, "yes" if progress.get("stop_required") else "no", "ok"),
            (
                "saturation",
                str(progress.get("saturation") or "—"),
                "full" if progress.get("saturation") else "ok",
            ),
        ]

    def counter(used: Any, limit: Any) -> tuple[str, str]:
        if used is None:
            return "—", "ok"
        level = (
            "full" if limit and used >= limit else ("warn" if limit and used >= limit - 1 and used else "ok")
        )
        return f"{used} / {limit if limit is not None else '—'}", level

    no_gain, no_gain_level = counter(
        protocol.get("consecutive_no_gain"), protocol.get("max_consecutive_no_gain")
    )
    violations, violations_level = counter(
        protocol.get("protocol_violations"), protocol.get("max_protocol_violations")
    )
    stop = "no"
    if protocol.get("stop_required"):
        stop = f"yes · {STOP_CAUSE_TEXT.get(str(state.stop_cause), str(state.stop_cause).lower())}"
    saturation = protocol.get("saturation")
    return [
        ("pending observation", pending_text(state), "ok"),
        ("no-gain streak", no_gain, no_gain_level),
        ("violations", violations, violations_level),
        (ProtocolCode.STOP_REQUIRED, stop, "full" if protocol.get("stop_required") else "ok"),
        ("final opportunity", final_opportunity(state), "warn" if protocol.get("stop_required") else "ok"),
        ("saturation", str(saturation or "—"), "full" if saturation else "ok"),
    ]


COMPACT_SKIP = {"pending observation", "final opportunity"}  # the one-line form keeps the counters and stops


def compact_lines(lines: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    """The one-line form's rows: a saturation first (it is why the run stopped, and the end of an
    80-column line is what gets cut), then the rest in order, counters as `1/3`."""
    kept = [
        (label, value.replace(" / ", "/"), level)
        for label, value, level in lines
        if label not in COMPACT_SKIP
    ]
    saturated = [row for row in kept if row[0] == "saturation" and row[2] == "full"]
    return saturated + [row for row in kept if row not in saturated]


class ProtocolPanel(Widget):
    ALLOW_MAXIMIZE = True  # f8 maximises the whole panel

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "protocol--ok",
        "protocol--warn",
        "protocol--full",
        "protocol--label",
    }

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.lines: list[tuple[str, str, str]] = []

    def update_state(self, state: RunState) -> None:
        self.lines = protocol_lines(state) if (state.protocol is not None or state.result) else []
        self.refresh()

    def render(self) -> Text:
        out = Text(no_wrap=True, overflow="ellipsis")
        if self.has_class("-compact"):
            out.append("protocol ", style="bold")
        if not self.lines:
            out.append("waiting for a run", style=self.get_component_rich_style("protocol--label"))
            return out
        label_style = self.get_component_rich_style("protocol--label")
        if self.has_class("-compact"):  # one line for narrow terminals: the rows side by side
            for label, value, level in compact_lines(self.lines):
                out.append(f" {label} ", style=label_style)
                out.append(value, style=self.get_component_rich_style(f"protocol--{level}"))
            return out
        for i, (label, value, level) in enumerate(self.lines):
            out.append(f"{label:<{LABEL_WIDTH}}", style=label_style)
            out.append(value, style=self.get_component_rich_style(f"protocol--{level}"))
            if i < len(self.lines) - 1:
                out.append("\n")
        return out
