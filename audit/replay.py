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

from agent.events.run_events import (
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
)
from agent.vocabulary import InvocationStatus, Outcome, ProtocolCode, StopReason
from tools.vocabulary import ErrorCode, Evaluation

if TYPE_CHECKING:
    from audit.browse import RunTimeline

W = TypeVar("W", bound=StrEnum)


def stored_number(value: Any) -> Any:
    """A stored limit, if it is a number: the file may have been edited by anyone."""
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def run_limits(run: dict[str, Any]) -> RunLimits | None:
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
    ids = (str(run["run_id"]), str(run.get("session_id")))
    seq = itertools.count(1)
    events: list[RunEvent] = []
    limits = run_limits(run)
    if run.get("started_at"):
        events.append(
            RunStarted(
                *ids,
                next(seq),
                run["started_at"],
                query=run.get("query") or "",
                previous_turn=None,
                model=_text_or_none(run.get("model")),
                limits=limits,
            )
        )
    for entry in timeline.entries:
        row = entry.data
        if entry.kind == "model_round":
            if row.get("started_at"):
                events.append(ModelRoundStarted(*ids, next(seq), row["started_at"], round=row["round"]))
            if row.get("finished_at"):
                events.append(
                    ModelRoundFinished(
                        *ids,
                        next(seq),
                        row["finished_at"],
                        round=row["round"],
                        duration_ms=row.get("duration_ms"),
                        prompt_tokens=row.get("prompt_tokens"),
                        completion_tokens=row.get("completion_tokens"),
                        usage_estimated=bool(row.get("usage_estimated")),
                        tool_call_ids=_parsed(row.get("tool_call_ids")) or [],
                        has_text=bool(row.get("has_text")),
                    )
                )
        elif entry.kind == "invocation":
            call = {"round": row.get("round"), "tool_call_id": row["tool_call_id"], "tool": row["tool"]}
            business = _parsed(row.get("input_json"))
            events.append(ToolStarted(*ids, next(seq), row["started_at"], **call, input=business))
            if row.get("status") != InvocationStatus.STARTED:
                events.append(
                    ToolFinished(
                        *ids,
                        next(seq),
                        row.get("finished_at") or "",
                        **call,
                        status=_word(InvocationStatus, row.get("status")),
                        error_code=_maybe(ErrorCode, row.get("error_code")),
                        reason=row.get("reason"),
                        projection=_parsed(row.get("projection_json")),
                        duration_ms=row.get("duration_ms"),
                        observation=None,  # the audit keeps the projection, not what the model saw
                        evaluation=_maybe(Evaluation, row.get("evaluation")),
                    )
                )
        else:
            events.append(
                ProtocolChanged(
                    *ids,
                    next(seq),
                    row.get("at") or "",
                    code=_word(ProtocolCode, row["code"]),
                    tool_call_id=row.get("tool_call_id"),
                    detail=_parsed(row.get("detail_json")) or {},
                )
            )
    if run.get("finished_at") or run.get("outcome"):
        events.append(
            BudgetChanged(
                *ids,
                next(seq),
                run.get("finished_at") or "",
                model_calls={"used": run.get("model_calls"), "limit": limits and limits["max_model_calls"]},
                tokens={
                    "used": run.get("total_tokens"),
                    "limit": limits and limits["max_total_tokens"],
                    "estimated": any(
                        e.kind == "model_round" and e.data.get("usage_estimated") for e in timeline.entries
                    ),
                },
                run_bytes={"used": None, "limit": limits and limits["max_run_bytes"]},
                deadline={
                    "elapsed_s": _elapsed_s(run.get("started_at"), run.get("finished_at")),
                    "limit_s": limits and limits["deadline_s"],
                },
                exhausted=None,
            )
        )
    if run.get("outcome"):
        result = _parsed(run.get("result_json")) or {
            "run_id": run["run_id"],
            "session_id": run.get("session_id"),
        }
        events.append(
            RunFinished(
                *ids,
                next(seq),
                run.get("finished_at") or "",
                outcome=_word(Outcome, run["outcome"]),
                stop_reason=_word(StopReason, run.get("stop_reason")),
                result=result,
            )
        )
    return events
