"""Audit rows back into run events: an audited run as the events it would have produced, as far as the
audit recorded them (the sink, `audit.sink`, is the other direction).

The replay screen feeds them to the console's reducer and `diagnose audit export --otlp` to the trace
sink, so a replayed run is drawn and traced by the same code as a live one. Only what the audit keeps
comes back: no model-facing observations (the projection stands for them), no protocol counters, no
previous turn; the events leave those fields out (docs/contracts.md, "Audit replay"). No Textual
here: the command line uses it too.
"""

from __future__ import annotations

import itertools
import json
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any, TypeVar, cast

from agent.run_events import (
    BudgetChanged,
    ModelRoundFinished,
    ModelRoundStarted,
    ProtocolChanged,
    RunEvent,
    RunFinished,
    RunLimits,
    RunStarted,
    ToolFinished,
    ToolStarted,
    budget_gauges,
)
from agent.vocabulary import InvocationStatus, Outcome, ProtocolCode, StopReason
from tools.vocabulary import ErrorCode, Evaluation

if TYPE_CHECKING:
    from collections.abc import Iterator

    from audit.browse import RunTimeline
    from audit.rows import InvocationRow, ModelRoundRow, ProtocolEventRow, RunRow

W = TypeVar("W", bound=StrEnum)


def stored_number(value: Any) -> Any:
    """A stored limit, if it is a number: the file may have been edited by anyone."""
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def run_limits(run: RunRow) -> RunLimits | None:
    """The limits the run started with (schema v4); None for runs recorded before they were kept."""
    values = {key: stored_number(run.get(key)) for key in RunLimits.__annotations__}
    if all(value is None for value in values.values()):
        return None
    return cast(RunLimits, values)


def _parsed(text: Any) -> Any:
    if text is None or not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except ValueError:
        return text


def _word(kind: type[W], value: Any) -> W:
    """A stored word as its enum member; a word this version does not know is shown as it is."""
    try:
        return kind(value)
    except ValueError:
        return cast(W, value)


def _maybe(kind: type[W], value: Any) -> W | None:
    return None if value is None else _word(kind, value)


def _elapsed_s(started: str | None, finished: str | None) -> float | None:
    try:
        return (datetime.fromisoformat(str(finished)) - datetime.fromisoformat(str(started))).total_seconds()
    except (TypeError, ValueError):
        return None


def _text_or_none(value: Any) -> str | None:
    return None if value is None else str(value)


def timeline_events(timeline: RunTimeline) -> list[RunEvent]:
    """The run events an audited run would have produced, as far as the audit recorded them."""
    run = timeline.run
    ids = (str(run["run_id"]), str(run["session_id"]))
    seq = itertools.count(1)
    events: list[RunEvent] = []
    limits = run_limits(run)
    if run["started_at"]:
        events.append(
            RunStarted(
                *ids,
                next(seq),
                run["started_at"],
                query=run["query"] or "",
                previous_turn=None,
                model=_text_or_none(run["model"]),
                limits=limits,
            )
        )
    for entry in timeline.entries:
        if entry.kind == "model_round":
            events += _round_events(ids, seq, entry.data)
        elif entry.kind == "invocation":
            events += _invocation_events(ids, seq, entry.data)
        else:
            events.append(_protocol_event(ids, seq, entry.data))
    if run["finished_at"] or run["outcome"]:
        estimated = any(e.kind == "model_round" and e.data["usage_estimated"] for e in timeline.entries)
        gauges = budget_gauges(
            limits,
            model_calls=run["model_calls"],
            tokens=run["total_tokens"],
            tokens_estimated=estimated,
            elapsed_s=_elapsed_s(run["started_at"], run["finished_at"]),
        )
        events.append(BudgetChanged(*ids, next(seq), run["finished_at"] or "", **gauges, exhausted=None))
    if run["outcome"]:
        result = _parsed(run["result_json"]) or {"run_id": run["run_id"], "session_id": run["session_id"]}
        events.append(
            RunFinished(
                *ids,
                next(seq),
                run["finished_at"] or "",
                outcome=_word(Outcome, run["outcome"]),
                stop_reason=_word(StopReason, run["stop_reason"]),
                result=result,
            )
        )
    return events


def _round_events(ids: tuple[str, str], seq: Iterator[int], row: ModelRoundRow) -> list[RunEvent]:
    events: list[RunEvent] = []
    if row["started_at"]:
        events.append(ModelRoundStarted(*ids, next(seq), row["started_at"], round=row["round"]))
    if row["finished_at"]:
        events.append(
            ModelRoundFinished(
                *ids,
                next(seq),
                row["finished_at"],
                round=row["round"],
                duration_ms=row["duration_ms"],
                prompt_tokens=row["prompt_tokens"],
                completion_tokens=row["completion_tokens"],
                usage_estimated=bool(row["usage_estimated"]),
                tool_call_ids=_parsed(row["tool_call_ids"]) or [],
                has_text=bool(row["has_text"]),
            )
        )
    return events


def _invocation_events(ids: tuple[str, str], seq: Iterator[int], row: InvocationRow) -> list[RunEvent]:
    call_round, tool_call_id, tool = row["round"], row["tool_call_id"], row["tool"]
    business = _parsed(row["input_json"])
    events: list[RunEvent] = [
        ToolStarted(
            *ids,
            next(seq),
            row["started_at"],
            round=call_round,
            tool_call_id=tool_call_id,
            tool=tool,
            input=business,
        )
    ]
    if row["status"] != InvocationStatus.STARTED:
        events.append(
            ToolFinished(
                *ids,
                next(seq),
                row["finished_at"] or "",
                round=call_round,
                tool_call_id=tool_call_id,
                tool=tool,
                status=_word(InvocationStatus, row["status"]),
                error_code=_maybe(ErrorCode, row["error_code"]),
                reason=row["reason"],
                projection=_parsed(row["projection_json"]),
                duration_ms=row["duration_ms"],
                observation=None,  # the audit keeps the projection, not what the model saw
                evaluation=_maybe(Evaluation, row["evaluation"]),
            )
        )
    return events


def _protocol_event(ids: tuple[str, str], seq: Iterator[int], row: ProtocolEventRow) -> ProtocolChanged:
    return ProtocolChanged(
        *ids,
        next(seq),
        row["at"] or "",
        code=_word(ProtocolCode, row["code"]),
        tool_call_id=row["tool_call_id"],
        detail=_parsed(row["detail_json"]) or {},
    )
