"""Run events in, OpenTelemetry spans out: one trace per run (docs/contracts.md, "Traces").

The sink reads the same typed event stream as the audit and the console, so the trace, the audit and
the screen cannot disagree; a run replayed from the audit (`audit.replay`) goes through it
unchanged. Every span takes its times from the events' `at`, never from the clock it is built on, so
a live run and the same run sent later from the audit are the same trace (`console.traces.ids`).

The spans follow the OpenTelemetry GenAI conventions: a root `invoke_agent diagnosis` span, a
`chat {model}` span per model round and an `execute_tool {tool}` span per invocation, all children
of the root (a tool runs after the round that asked for it has ended). What only this project knows
(evidence status, error code, evaluation, protocol codes, budgets, outcome and stop reason) is under
the one prefix `diagnose.`. Which text may be carried is `console.traces.content`'s decision.

A FOUND invocation's span stays open until the model evaluates it (the next call's envelope, an
`EVALUATION_RECORDED` protocol event) or the run ends, because a span's attributes cannot change once
it is ended; it is ended with its own recorded finish time, so nothing is shifted.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer

from agent.events.run_events import (
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
from agent.model.factory import parse_model_label
from agent.vocabulary import INTERRUPTED_RUN, InvocationStatus, Outcome, ProtocolCode
from audit.replay import stored_number
from console.traces.content import ContentCapture
from console.traces.ids import PlannedIds, span_id_of, trace_id_of

AGENT_NAME = "diagnosis"
PREFIX = "diagnose."
# Invocation statuses that mean the tool did not do its work: the span's status is ERROR.
_FAILED_STATUSES = frozenset({InvocationStatus.ERROR, INTERRUPTED_RUN})
# Protocol detail keys that hold only the project's words, numbers and tool call IDs: with content
# capture off, nothing else of a detail leaves (an edited audit could put anything there).
_PROTOCOL_DETAIL_KEYS = (
    "missing_field",
    "invalid_field",
    "expected_tool_call_id",
    "cause",
    "saturation",
    "cap",
    "limit",
    "tool_call_ids",
)
_MAX_WORD = 128  # a detail value longer than any word or ID of the protocol is not one
# A model may ask for any number of calls in one reply: a list of IDs on a span keeps the first ones,
# and a count says how many there were.
MAX_LISTED_IDS = 64
_GAUGES = ("model_calls", "tokens", "run_bytes")
# `run_started.limits` keys as the budget attributes `budget_changed` later updates.
_LIMIT_ATTRIBUTES = {
    "max_model_calls": "budget.model_calls.limit",
    "max_total_tokens": "budget.tokens.limit",
    "max_run_bytes": "budget.run_bytes.limit",
    "deadline_s": "budget.deadline.limit_s",
}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

Attributes = dict[str, Any]


def instant_ns(at: str | None) -> int | None:
    """An event's ISO-8601 `at` as nanoseconds since the epoch (None: missing or unreadable)."""
    try:
        moment = datetime.fromisoformat(str(at))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1_000


def _now_ns() -> int:
    return instant_ns(datetime.now(UTC).isoformat()) or 0


def _set(attributes: Attributes, key: str, value: Any) -> None:
    """OpenTelemetry takes no null attribute: an unrecorded value is left out."""
    if value is not None:
        attributes[key] = value


def _model_attributes(label: str | None) -> Attributes:
    """gen_ai.provider.name (and its older name gen_ai.system), gen_ai.request.model and the server."""
    if not label:
        return {}
    parts = parse_model_label(label)
    attributes: Attributes = {"gen_ai.request.model": parts.name}
    if parts.provider is not None:
        attributes["gen_ai.provider.name"] = attributes["gen_ai.system"] = parts.provider
    if parts.server is not None:
        where = urlsplit(parts.server if "//" in parts.server else f"https://{parts.server}")
        try:
            port = where.port or (80 if where.scheme == "http" else 443)
        except ValueError:
            port = None
        if where.hostname:
            attributes["server.address"] = where.hostname
            _set(attributes, "server.port", port)
    return attributes


@dataclass
class _RunSpans:
    """The spans of one run while it is being built."""

    run_id: str
    root: Span
    started_ns: int
    common: Attributes  # conversation and model: on every span of the run
    model_name: str | None
    last_ns: int
    rounds: dict[int, tuple[Span, int]] = field(default_factory=dict)  # round -> (span, start)
    calls: dict[str, tuple[Span, int]] = field(default_factory=dict)  # tool call ID -> (span, start)
    awaiting_evaluation: dict[str, int] = field(default_factory=dict)  # FOUND call -> its finish
    # The budget_changed gauges, latest value per key: set on the root once, when the run ends.
    budget: Attributes = field(default_factory=dict)


class TraceSink:
    """A run-event sink (never a required one: a trace problem cannot stop a run) that builds spans.

    One sink may hold several runs at once; `end_unfinished` ends those that stopped without a
    `run_finished` (the audit failed, the process is closing) as INTERRUPTED.
    """

    def __init__(self, tracer: Tracer, ids: PlannedIds, content: ContentCapture) -> None:
        self._tracer = tracer
        self._ids = ids
        self._content = content
        self._runs: dict[str, _RunSpans] = {}

    def __call__(self, event: RunEvent) -> None:
        match event:
            case RunStarted():
                self._run_started(event)
            case ModelRoundStarted():
                self._round_started(event)
            case ModelRoundFinished():
                self._round_finished(event)
            case ToolStarted():
                self._tool_started(event)
            case ToolFinished():
                self._tool_finished(event)
            case ProtocolChanged():
                self._protocol_changed(event)
            case BudgetChanged():
                self._budget_changed(event)
            case RunFinished():
                self._run_finished(event)

    def end_unfinished(self) -> None:
        """End every run still open as INTERRUPTED, at the last instant its events showed."""
        for run_id in list(self._runs):
            self._interrupted(self._runs.pop(run_id))

    # --- spans ------------------------------------------------------------------------------------------
    def _start(
        self,
        run_id: str,
        key: tuple[str, ...],
        name: str,
        kind: SpanKind,
        at: int,
        attributes: Attributes,
        parent: Span | None,
    ) -> Span:
        # An empty context for the root: whatever span the process may have active is not this run's.
        context = trace.set_span_in_context(parent) if parent is not None else Context()
        with self._ids.planned(trace_id_of(run_id), span_id_of(run_id, *key)):
            return self._tracer.start_span(
                name, context=context, kind=kind, attributes=attributes, start_time=at
            )

    @staticmethod
    def _end(span: Span, started: int, at: int) -> None:
        span.end(end_time=max(at, started))  # an unreadable or earlier finish never ends before it began

    @staticmethod
    def _fail(span: Span, error_type: str) -> None:
        span.set_attribute("error.type", error_type)
        span.set_status(Status(StatusCode.ERROR, error_type))

    def _run(self, event: RunEvent) -> tuple[_RunSpans, int]:
        """The run an event belongs to (opened at this event if its start was never seen: a run
        rejected before it started, an audited run without a start) and the event's instant."""
        run = self._runs.get(event.run_id)
        at = instant_ns(event.at)
        if run is None:
            run = self._open(event.run_id, event.session_id, at or _now_ns(), None, {})
        at = at if at is not None else run.last_ns  # an audited row without its time: the last known
        run.last_ns = max(run.last_ns, at)
        return run, at

    def _open(
        self, run_id: str, session_id: str, at: int, model: str | None, attributes: Attributes
    ) -> _RunSpans:
        model_attributes = _model_attributes(model)
        common: Attributes = {"gen_ai.conversation.id": session_id, **model_attributes}
        root_attributes: Attributes = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": AGENT_NAME,
            **common,
            f"{PREFIX}run.id": run_id,
            **attributes,
        }
        root = self._start(
            run_id, ("run",), f"invoke_agent {AGENT_NAME}", SpanKind.INTERNAL, at, root_attributes, None
        )
        run = _RunSpans(run_id, root, at, common, model_attributes.get("gen_ai.request.model"), at)
        self._runs[run_id] = run
        return run

    # --- events -----------------------------------------------------------------------------------------
    def _run_started(self, event: RunStarted) -> None:
        at = instant_ns(event.at) or _now_ns()
        attributes: Attributes = {}
        for key, value in (event.limits or {}).items():
            if key in _LIMIT_ATTRIBUTES:
                _set(attributes, PREFIX + _LIMIT_ATTRIBUTES[key], stored_number(value))
        for key, value in (event.protocol or {}).items():
            _set(attributes, f"{PREFIX}protocol.{key}", stored_number(value))
        messages = self._input_messages(event.query, event.previous_turn)
        _set(attributes, "gen_ai.input.messages", messages)
        if event.run_id in self._runs:  # a start after other events of the run: the root exists
            self._runs[event.run_id].root.set_attributes(attributes)
            return
        self._open(event.run_id, event.session_id, at, event.model, attributes)

    def _input_messages(self, query: Any, previous_turn: Any) -> str | None:
        """gen_ai.input.messages (capture on): the query, and the previous turn it was sent with."""
        text = self._content.text(query)
        if not text:
            return None
        parts = [{"type": "text", "content": text}]
        turn = self._content.text(previous_turn)
        if turn is not None:
            parts.append({"type": "text", "content": turn})
        return json.dumps([{"role": "user", "parts": parts}], ensure_ascii=False)

    def _round_started(self, event: ModelRoundStarted) -> None:
        run, at = self._run(event)
        self._open_round(run, event.round, at)

    def _open_round(self, run: _RunSpans, round_: int, at: int) -> tuple[Span, int]:
        attributes = {"gen_ai.operation.name": "chat", **run.common, f"{PREFIX}round": round_}
        name = f"chat {run.model_name}" if run.model_name else "chat"
        span = self._start(
            run.run_id, ("round", str(round_)), name, SpanKind.CLIENT, at, attributes, run.root
        )
        run.rounds[round_] = (span, at)
        return span, at

    def _round_finished(self, event: ModelRoundFinished) -> None:
        run, at = self._run(event)
        if event.round not in run.rounds:  # its start was not recorded: placed by its duration
            self._open_round(run, event.round, at - (event.duration_ms or 0) * 1_000_000)
        span, started = run.rounds.pop(event.round)
        attributes: Attributes = {}
        _set(attributes, "gen_ai.usage.input_tokens", event.prompt_tokens)
        _set(attributes, "gen_ai.usage.output_tokens", event.completion_tokens)
        _set(attributes, f"{PREFIX}usage.estimated", event.usage_estimated)
        attributes[f"{PREFIX}round.tool_call_ids"] = list(event.tool_call_ids[:MAX_LISTED_IDS])
        attributes[f"{PREFIX}round.tool_call_count"] = len(event.tool_call_ids)
        attributes[f"{PREFIX}round.has_text"] = bool(event.has_text)
        span.set_attributes(attributes)
        self._end(span, started, at)

    def _tool_started(self, event: ToolStarted) -> None:
        run, at = self._run(event)
        self._open_call(run, event.tool_call_id, event.tool, event.round, event.input, at)

    def _open_call(
        self, run: _RunSpans, tool_call_id: str, tool: str, round_: int | None, business: Any, at: int
    ) -> None:
        attributes: Attributes = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": tool,
            "gen_ai.tool.call.id": tool_call_id,
            "gen_ai.tool.type": "function",
            "gen_ai.conversation.id": run.common["gen_ai.conversation.id"],
        }
        _set(attributes, f"{PREFIX}round", round_)
        _set(attributes, "gen_ai.tool.call.arguments", self._content.text(business))
        key = ("call", tool_call_id)
        span = self._start(
            run.run_id, key, f"execute_tool {tool}", SpanKind.INTERNAL, at, attributes, run.root
        )
        run.calls[tool_call_id] = (span, at)

    def _tool_finished(self, event: ToolFinished) -> None:
        run, at = self._run(event)
        if event.tool_call_id not in run.calls:  # its start was not recorded: placed by its duration
            started = at - (event.duration_ms or 0) * 1_000_000
            self._open_call(run, event.tool_call_id, event.tool, event.round, None, started)
        span, started = run.calls[event.tool_call_id]
        attributes: Attributes = {f"{PREFIX}evidence.status": str(event.status)}
        _set(attributes, f"{PREFIX}error.code", event.error_code)
        _set(attributes, f"{PREFIX}error.reason", event.reason)
        _set(attributes, "gen_ai.tool.call.result", self._content.text(event.projection))
        _set(attributes, f"{PREFIX}evaluation", event.evaluation)
        span.set_attributes(attributes)
        if event.status in _FAILED_STATUSES:
            self._fail(span, str(event.error_code or event.status))
        if event.status == InvocationStatus.FOUND and event.evaluation is None:
            run.awaiting_evaluation[event.tool_call_id] = at  # ended once the model evaluates it
            return
        del run.calls[event.tool_call_id]
        self._end(span, started, at)

    def _evaluated(self, run: _RunSpans, tool_call_id: Any, evaluation: Any) -> None:
        finished = run.awaiting_evaluation.pop(tool_call_id, None) if isinstance(tool_call_id, str) else None
        if finished is None:
            return
        span, started = run.calls.pop(tool_call_id)
        if isinstance(evaluation, str):
            span.set_attribute(f"{PREFIX}evaluation", evaluation)
        self._end(span, started, finished)

    def _protocol_changed(self, event: ProtocolChanged) -> None:
        run, at = self._run(event)
        detail: Mapping[str, Any] = event.detail if isinstance(event.detail, Mapping) else {}
        if event.code == ProtocolCode.EVALUATION_RECORDED:
            self._evaluated(run, detail.get("evaluated_tool_call_id"), detail.get("evaluation"))
            return
        attributes: Attributes = {f"{PREFIX}protocol.code": str(event.code)}
        _set(attributes, "gen_ai.tool.call.id", event.tool_call_id)
        for key in _PROTOCOL_DETAIL_KEYS:
            _set(attributes, f"{PREFIX}protocol.{key}", _word_or_number(detail.get(key)))
        if isinstance(detail.get("tool_call_ids"), list):
            attributes[f"{PREFIX}protocol.tool_call_count"] = len(detail["tool_call_ids"])
        for key, value in (event.state or {}).items():
            _set(attributes, f"{PREFIX}protocol.{key}", _word_or_number(value))
        run.root.add_event(f"{PREFIX}protocol", attributes=attributes, timestamp=at)

    def _budget_changed(self, event: BudgetChanged) -> None:
        run, _ = self._run(event)
        attributes: Attributes = {}
        for name in _GAUGES:
            gauge: Mapping[str, Any] = getattr(event, name) or {}
            _set(attributes, f"{PREFIX}budget.{name}.used", gauge.get("used"))
            _set(attributes, f"{PREFIX}budget.{name}.limit", gauge.get("limit"))
        _set(attributes, f"{PREFIX}budget.tokens.estimated", (event.tokens or {}).get("estimated"))
        deadline: Mapping[str, Any] = event.deadline or {}
        _set(attributes, f"{PREFIX}budget.deadline.elapsed_s", deadline.get("elapsed_s"))
        _set(attributes, f"{PREFIX}budget.deadline.limit_s", deadline.get("limit_s"))
        _set(attributes, f"{PREFIX}budget.exhausted", event.exhausted)
        run.budget.update(attributes)

    def _run_finished(self, event: RunFinished) -> None:
        rejected = event.rejected_input
        if event.run_id not in self._runs and rejected is not None:  # refused before it started
            started = RunStarted(
                event.run_id,
                event.session_id,
                event.seq,
                event.at,
                query=rejected.get("query") or "",
                previous_turn=None,
                model=rejected.get("model"),
                limits=rejected.get("limits"),
                protocol=rejected.get("protocol"),
            )
            self._run_started(started)
        run, at = self._run(event)
        del self._runs[event.run_id]
        result: Mapping[str, Any] = event.result if isinstance(event.result, Mapping) else {}
        usage: Mapping[str, Any] = result.get("usage") or {}
        failure: Mapping[str, Any] = result.get("failure") or {}
        attributes: Attributes = {
            f"{PREFIX}outcome": str(event.outcome),
            f"{PREFIX}stop_reason": str(event.stop_reason),
        }
        _set(attributes, "gen_ai.usage.input_tokens", stored_number(usage.get("prompt_tokens")))
        _set(attributes, "gen_ai.usage.output_tokens", stored_number(usage.get("completion_tokens")))
        _set(attributes, f"{PREFIX}usage.model_calls", stored_number(usage.get("model_calls")))
        for key in ("code", "violation", "cause"):
            _set(attributes, f"{PREFIX}failure.{key}", _word_or_number(failure.get(key)))
        _set(attributes, f"{PREFIX}failure.detail", self._content.text(failure.get("detail")))
        _set(attributes, "gen_ai.output.messages", self._output_messages(result.get("draft")))
        run.root.set_attributes({**run.budget, **attributes})
        failed = event.outcome == Outcome.FAILED
        evaluations = _evaluations(result.get("progress"))
        self._close_children(run, at, str(event.stop_reason), failed, evaluations)
        if failed:
            self._fail(run.root, str(event.stop_reason))
        self._end(run.root, run.started_ns, at)

    def _output_messages(self, draft: Any) -> str | None:
        """gen_ai.output.messages (capture on): the Draft the run delivered."""
        text = self._content.text(draft)
        if text is None:
            return None
        message = {"role": "assistant", "parts": [{"type": "text", "content": text}], "finish_reason": "stop"}
        return json.dumps([message], ensure_ascii=False)

    def _close_children(
        self, run: _RunSpans, at: int, ended_by: str, failed: bool, evaluations: Mapping[str, str]
    ) -> None:
        """What the run's end cut short ends with it: a round or a tool still running, marked by what
        ended the run (an error when the run failed); a FOUND result never evaluated ends with the
        evaluation the final snapshot holds, if any, at its own finish."""
        for call_id in list(run.awaiting_evaluation):
            self._evaluated(run, call_id, evaluations.get(call_id))
        cut_short = [*run.rounds.values(), *run.calls.values()]
        run.rounds.clear()
        run.calls.clear()
        for span, started in cut_short:
            span.set_attribute(f"{PREFIX}ended_by", ended_by)
            if failed:
                self._fail(span, ended_by)
            self._end(span, started, at)

    def _interrupted(self, run: _RunSpans) -> None:
        run.root.set_attributes({**run.budget, f"{PREFIX}outcome": INTERRUPTED_RUN})
        self._close_children(run, run.last_ns, INTERRUPTED_RUN, True, {})
        self._fail(run.root, INTERRUPTED_RUN)
        self._end(run.root, run.started_ns, run.last_ns)


def _word_or_number(value: Any) -> Any:
    """A protocol detail or state value as an attribute, if it is one of the protocol's words, a
    number, a flag or a list of IDs; anything else (text an edited audit holds) is left out."""
    if isinstance(value, bool | int | float):
        return value
    if isinstance(value, str) and len(value) <= _MAX_WORD:
        return value
    if isinstance(value, list) and all(isinstance(v, str) and len(v) <= _MAX_WORD for v in value):
        return list(value[:MAX_LISTED_IDS])
    return None


def _evaluations(progress: Any) -> dict[str, str]:
    """The final ProgressSnapshot's evaluation of each check, by tool call ID."""
    checks: Iterable[Any] = progress.get("checks") or [] if isinstance(progress, Mapping) else []
    found: dict[str, str] = {}
    for check in checks:
        if isinstance(check, Mapping) and isinstance(check.get("evaluation"), str):
            found[str(check.get("tool_call_id"))] = check["evaluation"]
    return found
