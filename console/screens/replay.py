"""Replaying an audited run in the same widgets as a live one.

The audit rows are converted back into typed run events and fed to the same RunState reducer. Only
what the audit keeps is replayed: no model-facing observations (the projection is shown instead), no
protocol counters, no previous turn, no limits; the events leave those fields out and the widgets say
so rather than inventing them (docs/architecture.md, "Audit replay").
"""

from __future__ import annotations

import itertools
import json
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar, cast

from rich.text import Text
from textual import getters, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import Static

from console.host import ConsoleHost
from console.run_setup import run_limits, run_setup_text
from console.safe_text import neutralize
from console.widgets.footer import ConsoleFooter
from console.widgets.run_state import RunState
from console.widgets.run_view import RunView
from console.widgets.status_bar import StatusBar
from tools.run_events import (
    BudgetChanged,
    ModelRoundFinished,
    ModelRoundStarted,
    ProtocolChanged,
    RunEvent,
    RunFinished,
    RunStarted,
    ToolFinished,
    ToolStarted,
)
from tools.vocabulary import ErrorCode, Evaluation, InvocationStatus, Outcome, ProtocolCode, StopReason

if TYPE_CHECKING:
    from audit.browse import RunTimeline

W = TypeVar("W", bound=StrEnum)


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


class ReplayScreen(Screen[None]):
    CSS_PATH = Path(__file__).with_name("replay.tcss")
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "close", "Back", tooltip="Back to the audit")]

    app = getters.app(ConsoleHost)

    def __init__(self, run_id: str, focus_call: str | None = None) -> None:
        super().__init__(id="replay")
        self.run_id = run_id
        self.focus_call = focus_call

    def compose(self) -> ComposeResult:
        # The run's ID leads the activity: a narrow bar keeps it over the caveats that follow it.
        yield StatusBar("Replay", model="not recorded in the audit", id="status")
        yield Static(id="replay-query")
        yield RunView(show_timings=self.app.options.show_timings, id="run")
        yield ConsoleFooter(self.app.size.width)

    def on_mount(self) -> None:
        run = neutralize(self.run_id, newlines=False)
        self.query_one(StatusBar).set_activity(f"run {run} · audited: no observations or counters")
        self._load()

    @work(thread=True, exclusive=True, group="replay", exit_on_error=False)
    def _load(self) -> None:
        from audit.browse import AuditBrowser

        env = self.app.env
        if env is None:  # the audit screen opens a replay only once the engine is open
            return
        timeline = AuditBrowser(env.audit).timeline(self.run_id)
        self.app.call_from_thread(self._show, timeline)

    def _show(self, timeline: RunTimeline | None) -> None:
        query = self.query_one("#replay-query", Static)
        if timeline is None:
            query.update(Text(f"run {self.run_id} is not in the audit", style="red"))
            return
        state = RunState()
        state.apply_all(timeline_events(timeline))
        view = self.query_one(RunView)
        view.reset(state)
        view.sync()
        query.update(Text.assemble(("query ", "bold"), neutralize(str(timeline.run.get("query") or "—"))))
        model, limits = run_setup_text(timeline.run)
        status = self.query_one(StatusBar)
        status.model = model if model != "not recorded" else "not recorded in the audit"
        run = neutralize(self.run_id, newlines=False)
        status.set_activity(f"run {run} · audited: no observations or counters · limits: {limits}")
        if self.focus_call is not None and view.timeline.jump_to(self.focus_call):
            view.show_detail(("call", self.focus_call))
        view.timeline.focus()

    def action_close(self) -> None:
        self.dismiss(None)
