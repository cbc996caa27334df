"""The run-event protocol: one typed class per event type, their union, and their JSON form.

One ordered stream of these events feeds the console, `diagnose run --events` (NDJSON) and the audit.
Every event carries `run_id`, `session_id`, `seq` (1-based, gap-free per run) and `at` (ISO-8601 UTC),
plus the fields of its type; docs/contracts.md ("Run events") describes each field.

Producers are trusted: the emitter builds these dataclasses directly, with no validation cost on the
hot path (a run emits several events per model round). Data from outside the process (an NDJSON file,
a recording, a test's dict) goes through `parse_event`, which validates it once with pydantic.

The JSON form is the contract, byte for byte: `to_wire()` gives the object in the documented key order
(`type`, `run_id`, `session_id`, `seq`, `at`, then the fields in the order below). An event also reads
as that object (a read-only `Mapping`), so code and scripts that index the JSON keep working.

Events replayed from the audit carry only what the audit keeps. Fields the audit does not record are
`None` and, where marked *replay only* or *absent when not recorded*, left out of the JSON object.
Reading is tolerant in the same way: a nullable field that is absent from a JSON object reads as null.
"""

from __future__ import annotations

import functools
import typing
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, fields
from typing import (
    TYPE_CHECKING,
    Annotated,
    Any,
    ClassVar,
    Literal,
    NotRequired,  # pydantic validates only this TypedDict on Python 3.11
    TypeAlias,
)

from typing_extensions import TypedDict

from agent.vocabulary import EventType, InvocationStatus, Outcome, ProtocolCode, SaturationReason, StopReason
from tools.vocabulary import ErrorCode, Evaluation

JsonObject: TypeAlias = dict[str, Any]


# --- the shapes inside events ---------------------------------------------------------------------------


class RunLimits(TypedDict):
    """The budget limits a run started with (`run_started.limits`)."""

    max_model_calls: int
    max_total_tokens: int
    deadline_s: float
    max_run_bytes: int


class ProtocolThresholds(TypedDict):
    """The saturation thresholds a run started with (`run_started.protocol`)."""

    max_consecutive_no_gain: int
    max_protocol_violations: int


class RejectedInput(TypedDict):
    """What a run rejected before it started was given: it emits no `run_started`, yet the audit keeps
    its (redacted, bounded) query, model label and limits so a trainer can show what was rejected."""

    query: str | None  # cut to the query byte limit; None: the query was not text
    model: str | None
    limits: RunLimits
    protocol: ProtocolThresholds


class ProtocolState(TypedDict):
    """The progress protocol's counters and thresholds for the operator (never shown to the model)."""

    pending_tool_call_id: str | None
    consecutive_no_gain: int
    max_consecutive_no_gain: int
    protocol_violations: int
    max_protocol_violations: int
    stop_required: bool
    final_opportunity: bool
    saturation: SaturationReason | None


class Gauge(TypedDict):
    """One budget, used against its limit (`None`: not recorded, e.g. in an audit replay)."""

    used: int | None
    limit: int | None


class TokenGauge(Gauge):
    """Tokens against their limit; `estimated`: some round's usage was estimated, not reported (absent
    from older writers' events)."""

    estimated: NotRequired[bool | None]


class DeadlineGauge(TypedDict):
    elapsed_s: float | None
    limit_s: float | None


class BudgetGauges(TypedDict):
    """Every budget against its limit: the body of a `budget_changed` event, and what the console's
    budget gauge draws."""

    model_calls: Gauge
    tokens: TokenGauge
    run_bytes: Gauge
    deadline: DeadlineGauge


def budget_gauges(
    limits: RunLimits | None,
    *,
    model_calls: int | None = None,
    tokens: int | None = None,
    tokens_estimated: bool | None = None,
    run_bytes: int | None = None,
    elapsed_s: float | None = None,
) -> BudgetGauges:
    """The one way to build the gauges: each budget's figure against the run's limit. `limits` None:
    not recorded; a figure left out is unknown (None); `tokens.estimated` is there only when given."""
    tokens_gauge: TokenGauge = {
        "used": tokens,
        "limit": None if limits is None else limits["max_total_tokens"],
    }
    if tokens_estimated is not None:
        tokens_gauge["estimated"] = tokens_estimated
    return {
        "model_calls": {"used": model_calls, "limit": None if limits is None else limits["max_model_calls"]},
        "tokens": tokens_gauge,
        "run_bytes": {"used": run_bytes, "limit": None if limits is None else limits["max_run_bytes"]},
        "deadline": {"elapsed_s": elapsed_s, "limit_s": None if limits is None else limits["deadline_s"]},
    }


# --- the events -----------------------------------------------------------------------------------------


@dataclass(slots=True, eq=False)
class RunEventBase:
    """The envelope every event shares. Treat events as immutable: every sink sees the same object.

    An event also reads as its JSON object: `event["type"]`, `event.get(...)`, `dict(event)`, `**event`
    and `==` against a dict work, and it is registered as a `Mapping`. It deliberately does not inherit
    from `Mapping`: an ABC would make every `isinstance` and `match` on the event types several times
    slower, and consumers dispatch on them for every event.
    """

    run_id: str
    session_id: str
    seq: int
    at: str

    # Filled in per class below: the JSON keys in contract order, and the keys left out when None.
    wire_keys: ClassVar[tuple[str, ...]] = ()
    omitted_when_none: ClassVar[frozenset[str]] = frozenset()
    # Fields for in-process sinks only (the audit), never part of the event's JSON object.
    off_wire: ClassVar[frozenset[str]] = frozenset()

    def to_wire(self) -> JsonObject:
        """The event's JSON object, exactly as `--events` writes it."""
        return {key: getattr(self, key) for key in self.keys()}

    # --- read-only mapping: the event as its JSON object ------------------------------------------------
    def keys(self) -> list[str]:
        omitted = self.omitted_when_none
        return [key for key in self.wire_keys if key not in omitted or getattr(self, key) is not None]

    def items(self) -> list[tuple[str, Any]]:
        return list(self.to_wire().items())

    def values(self) -> list[Any]:
        return list(self.to_wire().values())

    def get(self, key: str, default: Any = None) -> Any:
        try:
            return self[key]
        except KeyError:
            return default

    def __getitem__(self, key: str) -> Any:
        if key in self.wire_keys:
            value = getattr(self, key)
            if value is not None or key not in self.omitted_when_none:
                return value
        raise KeyError(key)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and key in self.keys()

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())

    def __len__(self) -> int:
        return len(self.keys())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, RunEventBase | Mapping):
            return self.to_wire() == dict(other.items())
        return NotImplemented


@dataclass(slots=True, eq=False, kw_only=True)
class RunStarted(RunEventBase):
    type: Literal[EventType.RUN_STARTED] = field(default=EventType.RUN_STARTED, init=False)
    query: str
    previous_turn: JsonObject | None  # the PreviousTurn sent with the query
    model: str | None  # the model/profile label (None: not recorded)
    limits: RunLimits | None = None  # absent when not recorded
    protocol: ProtocolThresholds | None = None  # absent when not recorded

    omitted_when_none: ClassVar[frozenset[str]] = frozenset({"limits", "protocol"})


@dataclass(slots=True, eq=False, kw_only=True)
class ModelRoundStarted(RunEventBase):
    type: Literal[EventType.MODEL_ROUND_STARTED] = field(default=EventType.MODEL_ROUND_STARTED, init=False)
    round: int


@dataclass(slots=True, eq=False, kw_only=True)
class ModelRoundFinished(RunEventBase):
    type: Literal[EventType.MODEL_ROUND_FINISHED] = field(default=EventType.MODEL_ROUND_FINISHED, init=False)
    round: int
    duration_ms: int | None
    prompt_tokens: int | None
    completion_tokens: int | None
    # The provider's usage was missing or unusable, so the counts were estimated from bytes
    # (agent/usage.py); None: not recorded.
    usage_estimated: bool | None
    tool_call_ids: list[str]  # the calls the model asked for in this round, in order
    has_text: bool


@dataclass(slots=True, eq=False, kw_only=True)
class ToolStarted(RunEventBase):
    """An authorized invocation of one of the three tools is about to run."""

    type: Literal[EventType.TOOL_STARTED] = field(default=EventType.TOOL_STARTED, init=False)
    round: int | None
    tool_call_id: str
    tool: str
    input: Any  # the business input object, as the model wrote it (validated)
    # Its canonical form as JSON text: equal keys are equivalent calls (tools/canonical.py).
    input_key: str | None = None  # absent when not recorded

    omitted_when_none: ClassVar[frozenset[str]] = frozenset({"input_key"})


@dataclass(slots=True, eq=False, kw_only=True)
class ToolFinished(RunEventBase):
    type: Literal[EventType.TOOL_FINISHED] = field(default=EventType.TOOL_FINISHED, init=False)
    round: int | None
    tool_call_id: str
    tool: str
    status: InvocationStatus  # FOUND | EMPTY | ERROR | CANCELLED (a replay may show INTERRUPTED)
    error_code: ErrorCode | None
    reason: str | None  # a stable reason beside the error code, e.g. WRITE_STATEMENT
    projection: JsonObject | None  # the safe projection (FOUND)
    duration_ms: int | None
    observation: JsonObject | None  # exactly what the model saw (None: cancelled, or not recorded)
    # Replay only: the evaluation the audit stored on the invocation (live runs report it as an
    # EVALUATION_RECORDED protocol event instead).
    evaluation: Evaluation | None = None

    omitted_when_none: ClassVar[frozenset[str]] = frozenset({"evaluation"})


@dataclass(slots=True, eq=False, kw_only=True)
class ProtocolChanged(RunEventBase):
    """A progress-protocol event; `detail` per code is in docs/contracts.md, "Run events"."""

    type: Literal[EventType.PROTOCOL_CHANGED] = field(default=EventType.PROTOCOL_CHANGED, init=False)
    code: ProtocolCode
    tool_call_id: str | None  # the call it is about; None for run-level notes
    detail: JsonObject
    state: ProtocolState | None = None  # absent when not recorded (an audit replay)

    omitted_when_none: ClassVar[frozenset[str]] = frozenset({"state"})


@dataclass(slots=True, eq=False, kw_only=True)
class BudgetChanged(RunEventBase):
    type: Literal[EventType.BUDGET_CHANGED] = field(default=EventType.BUDGET_CHANGED, init=False)
    model_calls: Gauge
    tokens: TokenGauge
    run_bytes: Gauge
    deadline: DeadlineGauge
    exhausted: StopReason | None  # the budget that ended the run here, if any (never a saturation)
    # In-process sinks only (the console's Detail panel): the observations the model received for calls
    # of this round that ran nothing (not executed, or refused as invalid input), by tool call ID. No
    # `tool_finished` carries those, and the wire's events cannot rebuild them exactly (they never name
    # the tool); off the wire, so the JSON, `--events` and the audit stay the contract's.
    unexecuted_observations: dict[str, JsonObject] | None = None

    off_wire: ClassVar[frozenset[str]] = frozenset({"unexecuted_observations"})


@dataclass(slots=True, eq=False, kw_only=True)
class RunFinished(RunEventBase):
    type: Literal[EventType.RUN_FINISHED] = field(default=EventType.RUN_FINISHED, init=False)
    outcome: Outcome
    stop_reason: StopReason
    result: JsonObject  # the execution result's JSON object
    # A rejected run only: its input, for the audit. Off the wire, so the JSON stays the contract's.
    rejected_input: RejectedInput | None = None

    off_wire: ClassVar[frozenset[str]] = frozenset({"rejected_input"})


if TYPE_CHECKING:
    from pydantic import TypeAdapter, ValidationError

RunEvent: TypeAlias = (
    RunStarted
    | ModelRoundStarted
    | ModelRoundFinished
    | ToolStarted
    | ToolFinished
    | ProtocolChanged
    | BudgetChanged
    | RunFinished
)
EventSink: TypeAlias = Callable[[RunEvent], None]

EVENT_CLASSES: dict[EventType, type[RunEvent]] = {
    EventType.RUN_STARTED: RunStarted,
    EventType.MODEL_ROUND_STARTED: ModelRoundStarted,
    EventType.MODEL_ROUND_FINISHED: ModelRoundFinished,
    EventType.TOOL_STARTED: ToolStarted,
    EventType.TOOL_FINISHED: ToolFinished,
    EventType.PROTOCOL_CHANGED: ProtocolChanged,
    EventType.BUDGET_CHANGED: BudgetChanged,
    EventType.RUN_FINISHED: RunFinished,
}
_KNOWN_TYPES = frozenset(EventType)
_ENVELOPE = ("type", "run_id", "session_id", "seq", "at")
for _cls in EVENT_CLASSES.values():
    _cls.wire_keys = _ENVELOPE + tuple(
        f.name for f in fields(_cls) if f.name not in _ENVELOPE and f.name not in _cls.off_wire
    )
Mapping.register(RunEventBase)


# --- events from outside the process --------------------------------------------------------------------


class InvalidRunEvent(ValueError):
    """A JSON object that is not a run event of this protocol; the message names the first problem."""


@functools.cache
def _adapter() -> TypeAdapter[RunEvent]:
    # Imported and built on first use: `diagnose` starts, and the console paints, without pydantic's
    # schema work for events it may never parse.
    from pydantic import ConfigDict, Field, TypeAdapter

    union = Annotated[RunEvent, Field(discriminator="type")]
    # Unknown keys are ignored: a reader must not break on a field a newer writer added.
    return TypeAdapter(union, config=ConfigDict(extra="ignore"))


_NULLABLE: dict[EventType, frozenset[str]] = {}


def _nullable_fields(type_: EventType) -> frozenset[str]:
    """Fields that may be null: a writer that leaves one out means null (older and partial writers do)."""
    if type_ not in _NULLABLE:
        kind = EVENT_CLASSES[type_]
        hints = typing.get_type_hints(kind)
        _NULLABLE[type_] = frozenset(
            f.name for f in fields(kind) if f.init and type(None) in typing.get_args(hints[f.name])
        )
    return _NULLABLE[type_]


def known_type(data: RunEvent | Mapping[str, Any]) -> EventType | None:
    """The event type a JSON object names, if this version knows it (a newer writer's type: None)."""
    type_ = data.get("type")
    return EventType(type_) if isinstance(type_, str) and type_ in _KNOWN_TYPES else None


def parse_event(data: RunEvent | Mapping[str, Any]) -> RunEvent:
    """Validate one event's JSON object (types, required fields, known values) into its class."""
    if isinstance(data, RunEventBase):
        return data  # already an event of this protocol
    from pydantic import ValidationError

    obj = dict(data)
    type_ = known_type(obj)
    if type_ is not None:
        for name in _nullable_fields(type_) - obj.keys():
            obj[name] = None
    try:
        return _adapter().validate_python(obj)
    except ValidationError as exc:
        raise InvalidRunEvent(_describe(data, exc)) from None


def _describe(data: Mapping[str, Any], exc: ValidationError) -> str:
    error = exc.errors()[0]
    if error["type"] in ("union_tag_invalid", "union_tag_not_found"):
        return f"not a run event: unknown type {data.get('type')!r}"
    where = ".".join(str(part) for part in error["loc"][1:]) or "type"
    kind = data.get("type", "?")
    if error["type"] == "missing":
        return f"malformed {kind} event: missing field {where!r}"
    return f"malformed {kind} event: invalid field {where!r} ({error['msg']})"
