"""Emitting run events: numbering, time-stamping, redacting and fanning them out to every sink.

The events themselves (one class per type, their fields and their JSON form) are defined once in
`agent.events.run_events`, where the audit and the console read them too; docs/contracts.md ("Run
events") describes the stream. Operator-facing events may show counters and thresholds;
model-facing observations never do.

A sink is any callable taking one event. A sink that raises does not stop the run, except a required
sink (the audit), whose failure stops it: losing the audit is not silent.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Concatenate, ParamSpec, TypeVar, cast

from agent.errors import DiagnoseError
from agent.events.redaction import redact_event_fields
from agent.events.run_events import EventSink, RunEvent
from tools.redaction import NOOP, Redactor

log = logging.getLogger(__name__)

P = ParamSpec("P")
E = TypeVar("E", bound=RunEvent)

__all__ = ["EventSink", "RequiredSinkFailed", "RunEvent", "RunEventEmitter", "utc_now_iso"]


class RequiredSinkFailed(DiagnoseError):
    """A required sink (the audit) could not record an event: the run must stop, not go on unaudited.

    Raised where the run can no longer be set up (its `run_started`), it ends the command; raised
    later, the use case ends the run with a typed result instead (FAILED / AGENT_ERROR, cause
    `AUDIT_WRITE_FAILED`: docs/contracts.md, "Execution result")."""

    @property
    def message(self) -> str:
        return f"the audit could not be written, so the run was stopped: {self}"


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

    def emit(
        self, kind: Callable[Concatenate[str, str, int, str, P], E], /, *args: P.args, **fields: P.kwargs
    ) -> E:
        """Build one event of class `kind` from its own fields (the envelope is filled in here) and
        deliver it. The fields are type-checked against the class; they are not validated again."""
        # One redaction step for every event: the console, --events and the audit all read this object.
        # Tool call IDs stay exact: they are identifiers, not content (agent.events.redaction).
        build = cast("Callable[..., E]", kind)
        redacted = redact_event_fields(self._redactor, fields)
        event = build(self.run_id, self.session_id, next(self._seq), self._clock(), *args, **redacted)
        for sink in self._required:
            try:
                sink(event)
            except Exception as exc:
                # Not asked again in this run: it is stopping, and its closing event still reaches
                # every other sink (a lost audit lease refuses every later write of the run).
                self._required = []
                raise RequiredSinkFailed(f"{type(exc).__name__}: {exc}") from exc
        for sink in self._sinks:
            try:
                sink(event)
            except Exception:  # an observer's bug must not change the run's outcome
                log.exception("run event sink failed on %s", event.type)
        return event
