"""Run events (DESIGN 3.10): one ordered stream that feeds the console, `--events` NDJSON and the audit.

Every event is a flat JSON-able dict with `type`, `run_id`, `session_id`, `seq` (1-based, gap-free per
run) and `at` (ISO-8601 UTC), plus the fields of its type:

- run_started: query, previous_turn (object|null), model (label), limits {max_model_calls,
  max_total_tokens, deadline_s, max_run_bytes}, protocol {max_consecutive_no_gain, max_protocol_violations}
- model_round_started: round
- model_round_finished: round, duration_ms, prompt_tokens, completion_tokens, usage_estimated (bool:
  the provider's usage was missing or unusable, so counts were estimated from bytes), tool_call_ids
  [str], has_text (bool)
- tool_started: round, tool_call_id, tool, input (the business input object, as the model wrote it),
  input_key (its canonical form as JSON text: equal keys are equivalent calls, see tools.canonical)
- tool_finished: round, tool_call_id, tool, status (FOUND|EMPTY|ERROR|CANCELLED), error_code|null,
  reason|null, projection (object|null), duration_ms, observation (what the model saw, or null)
- protocol_changed: code, tool_call_id|null, detail (object), state {pending_tool_call_id,
  consecutive_no_gain, max_consecutive_no_gain, protocol_violations, max_protocol_violations,
  stop_required, final_opportunity, saturation}. Codes: the audited protocol events
  (INVALID_PROGRESS_PROTOCOL, UNKNOWN_TOOL, DUPLICATE_CALL, STOP_REQUIRED, COLLECTION_STOPPED,
  SATURATED) plus two operator-only codes: EVALUATION_RECORDED (detail {evaluated_tool_call_id,
  evaluation}) and INVALID_INPUT (a call answered ERROR/INVALID_INPUT without any invocation).
- budget_changed: model_calls {used, limit}, tokens {used, limit, estimated (bool: some round's
  usage was estimated)}, run_bytes {used, limit}, deadline {elapsed_s, limit_s}, exhausted (a budget
  stop reason, or null: saturation and cancellation are not budgets)
- run_finished: outcome, stop_reason, result (the ExecutionResult object of DESIGN 3.5)

Operator-facing events may show counters and thresholds; model-facing observations never do.
A sink is any callable taking one event. A sink that raises does not stop the run, except the
audit sink, which the use case marks as required (losing the audit is not silent).
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from tools.redaction import NOOP, Redactor

RunEvent = Mapping[str, Any]
EventSink = Callable[[RunEvent], None]

EVENT_TYPES: tuple[str, ...] = (
    "run_started",
    "model_round_started",
    "model_round_finished",
    "tool_started",
    "tool_finished",
    "protocol_changed",
    "budget_changed",
    "run_finished",
)

log = logging.getLogger(__name__)


class RequiredSinkFailed(Exception):
    """A required sink (the audit) could not record an event: the run must stop, not go on unaudited."""


def utc_now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


class RunEventEmitter:
    """Numbers events and fans them out to every sink, in order, synchronously."""

    def __init__(
        self,
        run_id: str,
        session_id: str,
        sinks: list[EventSink] | None = None,
        required_sinks: list[EventSink] | None = None,
        clock: Callable[[], str] = utc_now_iso,
        redactor: Redactor = NOOP,
    ) -> None:
        self.run_id = run_id
        self.session_id = session_id
        self._sinks = list(sinks or [])
        self._required = list(required_sinks or [])
        self._seq = itertools.count(1)
        self._clock = clock
        self._redactor = redactor

    def emit(self, type_: str, **fields: Any) -> dict[str, Any]:
        if type_ not in EVENT_TYPES:
            raise ValueError(f"unknown run event type {type_!r}")
        # One redaction step for every event: the console, --events and the audit all read this copy.
        event: dict[str, Any] = {
            "type": type_,
            "run_id": self.run_id,
            "session_id": self.session_id,
            "seq": next(self._seq),
            "at": self._clock(),
            **self._redactor.value(fields),
        }
        for sink in self._required:
            try:
                sink(event)
            except Exception as exc:
                raise RequiredSinkFailed(f"{type(exc).__name__}: {exc}") from exc
        for sink in self._sinks:
            try:
                sink(event)
            except Exception:  # an observer's bug must not change the run's outcome
                log.exception("run event sink failed on %s", type_)
        return event
