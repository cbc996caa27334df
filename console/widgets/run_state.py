"""RunState: folds the run-event stream into what the run widgets draw.

Live runs and audit replays feed this same reducer, so a replayed run is drawn exactly like a live one.
It dispatches on the typed events of `agent.run_events` (docs/contracts.md, "Run events") and
records which rows changed, so a burst of events costs one redraw of the changed rows, not one redraw
per event. Pure Python: no Textual, no engine import.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agent.vocabulary import ProtocolCode, StopReason
from console.presentation import CallState
from tools.vocabulary import ErrorCode, EvidenceStatus

if TYPE_CHECKING:  # the event types load with the first event folded, not before the first frame
    from agent.run_events import (
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

# Protocol codes that describe what the model was told about one call (operator extras included).
CALL_CONTROL_CODES = frozenset(
    {
        ProtocolCode.INVALID_PROGRESS_PROTOCOL,
        ProtocolCode.DUPLICATE_CALL,
        ProtocolCode.UNKNOWN_TOOL,
        ProtocolCode.STOP_REQUIRED,
        ProtocolCode.TOO_MANY_CALLS,
        ProtocolCode.INVALID_INPUT,
    }
)
# Codes after which the call they name was answered without running anything.
_NOTHING_EXECUTED = frozenset(
    {ProtocolCode.INVALID_PROGRESS_PROTOCOL, ProtocolCode.UNKNOWN_TOOL, ProtocolCode.DUPLICATE_CALL}
)
# The budget gauge (a `budget_changed` key) that a budget stop reason names.
BUDGET_OF_STOP_REASON: dict[str, str] = {
    StopReason.MODEL_CALLS_EXHAUSTED: "model_calls",
    StopReason.TOKENS_EXHAUSTED: "tokens",
    StopReason.DEADLINE_EXCEEDED: "deadline",
    StopReason.RUN_BYTES_EXHAUSTED: "run_bytes",
}


@dataclass
class CallRow:
    """One tool call the model requested, whether or not anything was executed for it."""

    tool_call_id: str
    round: int | None = None
    tool: str | None = None
    input: Any = None
    # REQUESTED (round seen, nothing yet) -> RUNNING -> FOUND|EMPTY|ERROR|CANCELLED, or NOT_EXECUTED
    status: str = CallState.REQUESTED
    error_code: str | None = None
    reason: str | None = None
    evaluation: str | None = None
    evaluated_by: str | None = None
    evaluates: tuple[str, str] | None = None  # (evaluated call ID, evaluation) this call carried
    codes: list[str] = field(default_factory=list)  # protocol codes on this call, in order
    duration_ms: int | None = None
    projection: Any = None
    observation: Any = None  # exactly what the model saw; None when no event carried it
    has_observation: bool = False
    events: list[RunEvent] = field(default_factory=list)  # the events about this call

    @property
    def controls(self) -> list[str]:
        return [code for code in self.codes if code in CALL_CONTROL_CODES]


@dataclass
class RoundRow:
    number: int
    finished: bool = False
    duration_ms: int | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    usage_estimated: bool = False  # the provider reported no usable usage: counts are estimates
    tool_call_ids: list[str] = field(default_factory=list)
    has_text: bool = False
    unanswered: bool = False  # the run ended (e.g. cancelled) while this round waited for the model
    events: list[RunEvent] = field(default_factory=list)


@dataclass(frozen=True)
class Entry:
    """A top-level timeline row: a model round, a run-level protocol note, or the run's end."""

    kind: str  # "round" | "note" | "finish"
    key: Any  # round number | note index | None


@dataclass
class Changes:
    new_entries: list[Entry] = field(default_factory=list)
    rounds: set[int] = field(default_factory=set)
    calls: set[str] = field(default_factory=set)
    new_calls: list[str] = field(default_factory=list)
    budget: bool = False
    protocol: bool = False
    result: bool = False
    header: bool = False

    def __bool__(self) -> bool:
        return bool(
            self.new_entries
            or self.rounds
            or self.calls
            or self.new_calls
            or self.budget
            or self.protocol
            or self.result
            or self.header
        )


class RunState:
    """Everything the console knows about one run, built only from its events."""

    def __init__(self) -> None:
        self.run_id: str | None = None
        self.session_id: str | None = None
        self.query: str | None = None
        self.previous_turn: Any = None
        self.model: str | None = None
        self.started_at: str | None = None
        self.rounds: dict[int, RoundRow] = {}
        self.calls: dict[str, CallRow] = {}
        self.entries: list[Entry] = []
        self.notes: list[ProtocolChanged] = []
        self.budget: dict[str, Any] | None = None
        self.protocol: dict[str, Any] | None = None
        self.stop_cause: str | None = None
        self.collection_stopped = False
        self.result: dict[str, Any] | None = None
        self.events: list[RunEvent] = []
        self._found_this_round: str | None = None
        self._requested: list[str] = []  # calls created since the last settling (REQUESTED at birth)
        self._changes = Changes()

    # ------------------------------------------------------------------ derived views
    @property
    def phase(self) -> str:
        if self.result is not None:
            return "finished"
        return "running" if self.events else "idle"

    @property
    def round_in_flight(self) -> int | None:
        for number in reversed(self.rounds):
            row = self.rounds[number]
            if not row.finished and not row.unanswered:
                return number
        return None

    @property
    def outcome(self) -> str | None:
        return None if self.result is None else self.result.get("outcome")

    @property
    def stop_reason(self) -> str | None:
        return None if self.result is None else self.result.get("stop_reason")

    @property
    def ending_budget(self) -> str | None:
        """Which budget ended the run (gauge key), if a budget did."""
        return BUDGET_OF_STOP_REASON.get(self.stop_reason or "")

    @property
    def draft(self) -> dict[str, Any] | None:
        return None if self.result is None else self.result.get("draft")

    def take_changes(self) -> Changes:
        changes, self._changes = self._changes, Changes()
        return changes

    # ------------------------------------------------------------------ reducer
    def apply(self, event: RunEvent | Mapping[str, Any]) -> None:
        """Fold one event: a typed event, or an event's JSON object (validated first). An object of a
        type this version does not know is skipped, as the audit skips it."""
        from agent import run_events as types  # imported here: an empty console never needs it

        if not isinstance(event, types.RunEventBase) and types.known_type(event) is None:
            return
        typed = types.parse_event(event)
        self.events.append(typed)
        self._identity(typed)
        match typed:
            case types.RunStarted():
                self._run_started(typed)
            case types.ModelRoundStarted():
                self._model_round_started(typed)
            case types.ModelRoundFinished():
                self._model_round_finished(typed)
            case types.ToolStarted():
                self._tool_started(typed)
            case types.ToolFinished():
                self._tool_finished(typed)
            case types.ProtocolChanged():
                self._protocol_changed(typed)
            case types.BudgetChanged():
                self._budget_changed(typed)
            case types.RunFinished():
                self._run_finished(typed)

    def apply_all(self, events: Iterable[RunEvent | Mapping[str, Any]]) -> None:
        for event in events:
            self.apply(event)

    def _identity(self, event: RunEvent) -> None:
        if self.run_id is None:
            self.run_id = event.run_id
            self.session_id = event.session_id
            self._changes.header = True

    def _run_started(self, event: RunStarted) -> None:
        self.query = event.query
        self.previous_turn = event.previous_turn
        self.model = event.model
        self.started_at = event.at
        if event.limits is not None:
            self._limits(event)
        self._changes.header = True

    def _limits(self, event: RunStarted) -> None:
        """Gauges and counters start from the run's limits. An audit replay has the limits (schema v4)
        but not the counters, so it starts the gauges and leaves the protocol panel unrecorded."""
        from agent.run_events import budget_gauges  # loaded with the event being folded

        gauges = budget_gauges(event.limits, model_calls=0, tokens=0, run_bytes=0, elapsed_s=0.0)
        self.budget = {**gauges, "exhausted": None}
        if event.protocol is None:
            self._changes.header = self._changes.budget = True
            return  # thresholds without counters would read as a clean protocol record
        protocol: Mapping[str, Any] = event.protocol
        self.protocol = {
            "pending_tool_call_id": None,
            "consecutive_no_gain": 0,
            "max_consecutive_no_gain": protocol.get("max_consecutive_no_gain"),
            "protocol_violations": 0,
            "max_protocol_violations": protocol.get("max_protocol_violations"),
            "stop_required": False,
            "final_opportunity": False,
            "saturation": None,
        }
        self._changes.header = self._changes.budget = self._changes.protocol = True

    def _round(self, number: int) -> RoundRow:
        row = self.rounds.get(number)
        if row is None:
            self._settle_requested_calls()
            row = self.rounds[number] = RoundRow(number)
            entry = Entry("round", number)
            self.entries.append(entry)
            self._changes.new_entries.append(entry)
        return row

    def _call(self, tool_call_id: str, round_: int | None = None) -> CallRow:
        row = self.calls.get(tool_call_id)
        if row is None:
            row = self.calls[tool_call_id] = CallRow(tool_call_id, round=round_)
            self._requested.append(tool_call_id)
            self._changes.new_calls.append(tool_call_id)
            if round_ is not None:
                owner = self._round(round_)
                if tool_call_id not in owner.tool_call_ids:
                    owner.tool_call_ids.append(tool_call_id)
        self._changes.calls.add(tool_call_id)
        return row

    def _settle_requested_calls(self) -> None:
        """A requested call that got no tool_started before the run moved on was not executed.

        Only calls created since the last settling can still be REQUESTED, so this stays linear."""
        requested, not_executed = CallState.REQUESTED, EvidenceStatus.NOT_EXECUTED
        for tool_call_id in self._requested:
            row = self.calls[tool_call_id]
            if row.status == requested:
                row.status = not_executed
                self._changes.calls.add(tool_call_id)
        self._requested.clear()

    def _model_round_started(self, event: ModelRoundStarted) -> None:
        if self._found_this_round is not None and self.protocol and not self.protocol.get("stop_required"):
            # No event reports it: the last FOUND of a tool round becomes the pending observation.
            self.protocol["pending_tool_call_id"] = self._found_this_round
            self._changes.protocol = True
        self._found_this_round = None
        row = self._round(int(event.round))
        row.events.append(event)
        self._changes.rounds.add(row.number)

    def _model_round_finished(self, event: ModelRoundFinished) -> None:
        row = self._round(int(event.round))
        row.finished = True
        row.duration_ms = event.duration_ms
        row.prompt_tokens = event.prompt_tokens
        row.completion_tokens = event.completion_tokens
        row.usage_estimated = bool(event.usage_estimated)
        row.has_text = bool(event.has_text)
        row.events.append(event)
        for tool_call_id in event.tool_call_ids or []:
            self._call(str(tool_call_id), row.number)
        self._changes.rounds.add(row.number)

    def _tool_started(self, event: ToolStarted) -> None:
        row = self._call(str(event.tool_call_id), event.round)
        row.tool = event.tool
        row.input = event.input
        row.status = CallState.RUNNING
        row.events.append(event)

    def _tool_finished(self, event: ToolFinished) -> None:
        row = self._call(str(event.tool_call_id), event.round)
        row.tool = event.tool or row.tool
        row.status = event.status or row.status
        row.error_code = event.error_code
        row.reason = event.reason
        row.projection = event.projection
        row.duration_ms = event.duration_ms
        if event.evaluation:  # only audit replays carry it here (the audited column)
            row.evaluation = event.evaluation
        row.observation = event.observation
        row.has_observation = event.observation is not None
        row.events.append(event)
        self._count_progress(row)

    def _count_progress(self, row: CallRow) -> None:
        """Mirror the two protocol changes no event reports (the next protocol event's state wins):
        an EMPTY result is a no-gain result, and a FOUND one awaits the model's evaluation."""
        if self.protocol is None:
            return
        if row.status == EvidenceStatus.EMPTY:
            self.protocol["consecutive_no_gain"] = int(self.protocol.get("consecutive_no_gain") or 0) + 1
            self._changes.protocol = True
        elif (
            row.status == EvidenceStatus.FOUND
            and isinstance(row.observation, dict)
            and row.observation.get("evaluation_required")
        ):
            self._found_this_round = row.tool_call_id

    def _protocol_changed(self, event: ProtocolChanged) -> None:
        code = event.code
        detail: Mapping[str, Any] = event.detail or {}
        if event.state is not None:
            self.protocol = dict(event.state)
            self._changes.protocol = True
        tool_call_id = event.tool_call_id
        if code == ProtocolCode.EVALUATION_RECORDED:
            evaluated = str(detail.get("evaluated_tool_call_id"))
            evaluation = detail.get("evaluation")
            target = self._call(evaluated)
            target.evaluation = evaluation
            target.evaluated_by = tool_call_id
            if tool_call_id is not None:
                self._call(str(tool_call_id)).evaluates = (evaluated, str(evaluation))
        elif code == ProtocolCode.STOP_REQUIRED:
            self.stop_cause = detail.get("cause") or self.stop_cause
        elif code == ProtocolCode.COLLECTION_STOPPED:
            self.collection_stopped = True
            self._changes.protocol = True
            self._not_executed(event, detail, ProtocolCode.STOP_REQUIRED)
        elif code == ProtocolCode.TOO_MANY_CALLS:
            self._not_executed(event, detail, ProtocolCode.TOO_MANY_CALLS)
        elif code == ProtocolCode.INVALID_INPUT and tool_call_id is not None:
            row = self._call(str(tool_call_id))
            row.status = EvidenceStatus.ERROR
            row.error_code = ErrorCode.INVALID_INPUT
        if code in _NOTHING_EXECUTED and tool_call_id:
            self._call(str(tool_call_id)).status = EvidenceStatus.NOT_EXECUTED
        if tool_call_id is not None:
            row = self._call(str(tool_call_id))
            row.codes.append(code)
            row.events.append(event)
        else:
            self._note(event)

    def _not_executed(self, event: ProtocolChanged, detail: Mapping[str, Any], control: ProtocolCode) -> None:
        """A run-level note naming the calls it answered with `control` instead of running them."""
        for tool_call_id in detail.get("tool_call_ids") or []:
            row = self._call(str(tool_call_id))
            row.status = EvidenceStatus.NOT_EXECUTED
            row.codes.append(control)
            row.events.append(event)

    def _note(self, event: ProtocolChanged) -> None:
        self.notes.append(event)
        entry = Entry("note", len(self.notes) - 1)
        self.entries.append(entry)
        self._changes.new_entries.append(entry)

    def _budget_changed(self, event: BudgetChanged) -> None:
        self._unexecuted_observations(event)
        self.budget = {
            "model_calls": event.model_calls,
            "tokens": event.tokens,
            "deadline": event.deadline,
            "run_bytes": event.run_bytes,
            "exhausted": event.exhausted,
        }
        self._changes.budget = True

    def _unexecuted_observations(self, event: BudgetChanged) -> None:
        """What the model received for calls that ran nothing: live runs carry it off the wire on the
        round's budget event (a replay or an NDJSON file does not, and the Detail panel says so)."""
        for tool_call_id, observation in (event.unexecuted_observations or {}).items():
            row = self._call(str(tool_call_id))
            if row.has_observation or not isinstance(observation, dict):
                continue  # a tool_finished observation is the one the model saw
            row.observation = observation
            row.has_observation = True
            tool = observation.get("tool")
            row.tool = row.tool or (tool if isinstance(tool, str) else None)
            if row.status == CallState.REQUESTED:
                refused = observation.get("evidence_status") == EvidenceStatus.ERROR
                row.status = EvidenceStatus.ERROR if refused else EvidenceStatus.NOT_EXECUTED

    def _run_finished(self, event: RunFinished) -> None:
        self._settle_requested_calls()
        for row in self.rounds.values():
            if not row.finished and not row.unanswered:
                row.unanswered = True  # no model reply will come: the round must stop saying it waits
                self._changes.rounds.add(row.number)
        result = event.result or {}
        self.result = {"outcome": event.outcome, "stop_reason": event.stop_reason, **result}
        entry = Entry("finish", None)
        self.entries.append(entry)
        self._changes.new_entries.append(entry)
        self._changes.result = self._changes.protocol = self._changes.budget = True
