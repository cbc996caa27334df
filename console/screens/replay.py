"""Replaying an audited run in the same widgets as a live one.

The audit rows (DESIGN 3.9) are converted back into run events and fed to the same RunState reducer.
Only what the audit keeps is replayed: no model-facing observations (the projection is shown instead),
no protocol counters, no previous turn, no limits; the widgets say so rather than inventing them.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import Footer, Static

from console.widgets.run_state import RunState
from console.widgets.run_view import RunView
from console.widgets.status_bar import StatusBar

if TYPE_CHECKING:
    from audit.browse import RunTimeline


def _parsed(text: Any) -> Any:
    if text is None or not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except ValueError:
        return text


def _elapsed_s(started: str | None, finished: str | None) -> float | None:
    try:
        return (datetime.fromisoformat(str(finished)) - datetime.fromisoformat(str(started))).total_seconds()
    except (TypeError, ValueError):
        return None


def timeline_events(timeline: RunTimeline) -> list[dict[str, Any]]:
    """The run events an audited run would have produced, as far as the audit recorded them."""
    run = timeline.run
    events: list[dict[str, Any]] = []

    def emit(type_: str, at: Any, **fields: Any) -> None:
        events.append(
            {
                "type": type_,
                "run_id": run["run_id"],
                "session_id": run.get("session_id"),
                "seq": len(events) + 1,
                "at": at,
                **fields,
            }
        )

    if run.get("started_at"):
        emit("run_started", run["started_at"], query=run.get("query"), model=None)
    for entry in timeline.entries:
        row = entry.data
        if entry.kind == "model_round":
            if row.get("started_at"):
                emit("model_round_started", row["started_at"], round=row["round"])
            if row.get("finished_at"):
                emit(
                    "model_round_finished",
                    row["finished_at"],
                    round=row["round"],
                    duration_ms=row.get("duration_ms"),
                    prompt_tokens=row.get("prompt_tokens"),
                    completion_tokens=row.get("completion_tokens"),
                    usage_estimated=bool(row.get("usage_estimated")),
                    tool_call_ids=_parsed(row.get("tool_call_ids")) or [],
                    has_text=bool(row.get("has_text")),
                )
        elif entry.kind == "invocation":
            common = {"round": row.get("round"), "tool_call_id": row["tool_call_id"], "tool": row["tool"]}
            emit("tool_started", row["started_at"], **common, input=_parsed(row.get("input_json")))
            if row.get("status") != "STARTED":
                emit(
                    "tool_finished",
                    row.get("finished_at"),
                    **common,
                    status=row.get("status"),
                    error_code=row.get("error_code"),
                    reason=row.get("reason"),
                    projection=_parsed(row.get("projection_json")),
                    duration_ms=row.get("duration_ms"),
                    evaluation=row.get("evaluation"),
                )
        else:
            emit(
                "protocol_changed",
                row.get("at"),
                code=row["code"],
                tool_call_id=row.get("tool_call_id"),
                detail=_parsed(row.get("detail_json")) or {},
            )
    if run.get("finished_at") or run.get("outcome"):
        emit(
            "budget_changed",
            run.get("finished_at"),
            model_calls={"used": run.get("model_calls"), "limit": None},
            tokens={
                "used": run.get("total_tokens"),
                "limit": None,
                "estimated": any(
                    e.kind == "model_round" and e.data.get("usage_estimated") for e in timeline.entries
                ),
            },
            run_bytes={"used": None, "limit": None},
            deadline={
                "elapsed_s": _elapsed_s(run.get("started_at"), run.get("finished_at")),
                "limit_s": None,
            },
            exhausted=None,
        )
    if run.get("outcome"):
        result = _parsed(run.get("result_json")) or {
            "run_id": run["run_id"],
            "session_id": run.get("session_id"),
        }
        emit(
            "run_finished",
            run.get("finished_at"),
            outcome=run["outcome"],
            stop_reason=run.get("stop_reason"),
            result=result,
        )
    return events


class ReplayScreen(Screen[None]):
    CSS_PATH = Path(__file__).with_name("replay.tcss")
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "close", "Back to the audit")]

    def __init__(self, run_id: str, focus_call: str | None = None) -> None:
        super().__init__(id="replay")
        self.run_id = run_id
        self.focus_call = focus_call

    def compose(self) -> ComposeResult:
        yield StatusBar(f"Audit · run {self.run_id}", model="not recorded in the audit", id="status")
        yield Static(id="replay-query")
        yield RunView(show_timings=self.app.show_timings, id="run")  # type: ignore[attr-defined]
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(StatusBar).set_activity("replay: no observations, counters or previous turn")
        self._load()

    @work(thread=True, exclusive=True, group="replay", exit_on_error=False)
    def _load(self) -> None:
        from audit.browse import AuditBrowser

        env = self.app.env  # type: ignore[attr-defined]
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
        query.update(Text.assemble(("query ", "bold"), str(timeline.run.get("query") or "—")))
        if self.focus_call is not None and view.timeline.jump_to(self.focus_call):
            view.show_detail(("call", self.focus_call))
        view.timeline.focus()

    def action_close(self) -> None:
        self.dismiss(None)
