"""DiagnosisHarnessCore: budgets, the progress protocol and tool interception around one Haystack Agent.

The Agent owns the ReAct loop; the harness only sits at its hook points:
- `before_model_call` (before_llm): cancellation, deadline, model-call, token and run-byte budgets;
  raises STOP_REQUIRED before the last permitted round; a refused round never reaches the generator.
- `handle_tool_round` (before_tool): answers EVERY pending call of the round itself, in call order,
  so Haystack executes nothing. First it checks cancellation, the deadline and the token budget
  again (the round's usage has just been recorded): if the round spent one, none of its calls runs.
  Otherwise it takes up at most `[budget] max_tool_calls_per_round` calls of the reply (and
  `max_tool_calls_per_run` over the run); the rest are answered TOO_MANY_CALLS unread. Of the calls
  taken up, unknown tools, protocol violations and duplicates get control observations; authorized
  calls run once through the ToolBoundary with the exact tool call ID.
- `close_model_round` (before_tool / on_exit): records the round's usage (as measured by
  GuardedChatGenerator: reported, or estimated and marked so).
All state lives here (not in Haystack's State, whose `get` deep-copies), so a cancelled run still
has its ledger and a ProgressSnapshot.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any, TypeGuard

from haystack.components.agents.state.state import State
from haystack.dataclasses import ChatMessage, ToolCall

from agent.blank_text import is_blank
from agent.budget import BUDGET_STOP_REASONS, utf8_len
from agent.control import (
    DUPLICATE_CALL,
    STOP_REQUIRED,
    TOO_MANY_CALLS,
    UNKNOWN_TOOL,
    Control,
    invalid_progress,
)
from agent.events import RunEventEmitter
from agent.progress import CheckRecord, ProgressLedger
from agent.run_context import RunContext
from agent.run_events import (
    BudgetChanged,
    ModelRoundFinished,
    ModelRoundStarted,
    ProtocolChanged,
    ToolFinished,
    ToolStarted,
)
from agent.usage import RoundUsage
from agent.vocabulary import InvocationStatus, ProtocolCode, StopCause, StopReason, ToolCallCap
from tools.adapter import ToolError, ToolRequest
from tools.boundary import ToolBoundary
from tools.canonical import input_key
from tools.definitions import ENVELOPE_KEYS, MAX_ECHOED_TOOL_NAME_CHARS, MAX_TOOL_CALL_ID_CHARS
from tools.observation import Observation
from tools.redaction import Redactor
from tools.unicode_text import encodable, encodable_value, holds_unencodable, is_encodable
from tools.vocabulary import ErrorCode, Evaluation, EvidenceStatus


class DiagnosisHarnessCore:
    def __init__(
        self,
        ctx: RunContext,
        ledger: ProgressLedger,
        boundary: ToolBoundary,
        emitter: RunEventEmitter,
        holds_secret: Callable[[str], bool] = lambda _: False,
    ) -> None:
        self.ctx = ctx
        self.ledger = ledger
        self.boundary = boundary
        self.emitter = emitter
        # Tool call IDs are kept exact, never redacted (`agent.event_redaction`): one holding a configured
        # secret value is therefore not usable at all (`Redactor.holds_secret`).
        self._holds_secret = holds_secret
        self.stop_reason: StopReason | None = None
        self.round = 0
        self.round_in_flight = False
        # True while the round in flight is the final completion opportunity: no tool may be called.
        self.no_tool_round = False
        self._round_started = 0.0
        # Every tool call ID seen in this run (the model's and the assigned ones): assigned IDs avoid them.
        self._call_ids: set[str] = set()
        # Assigned IDs that replaced an unusable model-chosen one: those calls are answered, never run.
        self._replaced_ids: set[str] = set()
        # This round's calls (by identity) whose arguments held text that is not Unicode: answered
        # INVALID_INPUT, never run.
        self._unreadable_input: set[int] = set()
        # Per tool round: the evaluation that consumed the pending observation, and the round's first
        # FOUND (the one observation that says `evaluation_required` and becomes the next pending one).
        self._round_evaluation: dict[str, Any] | None = None
        self._round_found: CheckRecord | None = None
        # Observations answered without running anything, carried off the wire on the next budget event.
        self._unexecuted: dict[str, Observation] = {}
        # Tool calls taken up in this run (`max_tool_calls_per_run`); refused ones do not count.
        self._calls_taken = 0

    # ------------------------------------------------------------------ model rounds
    def before_model_call(self, state: State) -> None:
        """Gate every model round. Setting `stop_run` means the chat generator is not called."""
        if state.data.get("stop_run") is not None:
            return
        budget = self.ctx.budget
        if self.ctx.cancel_requested:
            self._stop(state, StopReason.CANCELLED)
            return
        exhausted = budget.exhausted_before_round()
        if exhausted is not None:
            self._stop(state, exhausted)
            return
        if budget.remaining_model_calls == 1 and not self.ledger.stop_required:
            self.ledger.require_stop(StopCause.BUDGET)
        if (
            self.ledger.stop_required
            and not self.ledger.stop_announced
            and not self._announce_stop_required(state)
        ):
            return
        budget.model_calls += 1
        self.round = budget.model_calls
        self.round_in_flight = True
        self.no_tool_round = self.ledger.stop_required and self.ledger.stop_announced
        self._round_started = time.perf_counter()
        self.emitter.emit(ModelRoundStarted, round=self.round)
        self._emit_budget()

    def close_model_round(self, message: ChatMessage | None) -> None:
        """Record usage of the round that just returned (there is no after-model hook point)."""
        if not self.round_in_flight:
            return
        self.round_in_flight = False
        usage = RoundUsage.from_meta(message.meta if message is not None else {})
        calls = message.tool_calls if message is not None else []
        self.ctx.budget.record_usage(usage)
        self.emitter.emit(
            ModelRoundFinished,
            round=self.round,
            duration_ms=int((time.perf_counter() - self._round_started) * 1000),
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            usage_estimated=usage.estimated,
            # A reply cut at the token limit reaches here unadmitted: only usable IDs are recorded.
            tool_call_ids=[c.id for c in calls if self._usable_id(c.id)],
            has_text=bool(message is not None and message.text),
        )
        self._emit_budget()

    def _announce_stop_required(self, state: State) -> bool:
        """Deliver STOP_REQUIRED as a control observation before the final round."""
        text = json.dumps({"control": STOP_REQUIRED.to_json()}, separators=(",", ":"))
        if not self.ctx.budget.try_charge_bytes(utf8_len(text)):
            self._stop(state, StopReason.RUN_BYTES_EXHAUSTED)
            return False
        state.set("messages", [ChatMessage.from_user(text)])
        self.ledger.stop_announced = True
        self._protocol(ProtocolCode.STOP_REQUIRED, None, {"cause": self.ledger.stop_cause})
        return True

    # ------------------------------------------------------------------ tool rounds
    async def handle_tool_round(self, state: State) -> None:
        messages: list[ChatMessage] = state.data["messages"]
        assistant = self._admit_round(messages)
        self.close_model_round(assistant)
        calls = list(assistant.tool_calls)
        if not calls:
            # An empty reply (no text, no usable tool call): end the run; the use case fails it closed.
            state.set("stop_run", "EMPTY_REPLY")
            return

        spent = self._spent_during_round()
        if spent is not None:
            # Exhaustion prevents later controlled work: no call of this round runs or is audited.
            refused = [_reply(c, self._not_executed(c, STOP_REQUIRED)) for c in calls]
            self._stop(state, spent)
            state.set("messages", refused)
            return
        if self.ledger.stop_required and self.ledger.stop_announced:
            self._collection_stopped(state, calls)
            return

        self._round_evaluation = None
        self._round_found = None
        replies: list[ChatMessage] = []
        taken_this_round = 0
        over_cap: list[str] = []
        cap: ToolCallCap | None = None
        for call in calls:
            assert call.id is not None  # noqa: S101 - invariant for the type checker
            if self.stop_reason is not None or self.ledger.stop_required:
                obs = self._not_executed(call, STOP_REQUIRED)
            elif (cap := cap or self._cap_reached(taken_this_round)) is not None:
                # Refused unread: not even its envelope is looked at, so it counts toward nothing.
                over_cap.append(call.id)
                obs = self._not_executed(call, TOO_MANY_CALLS)
            else:
                taken_this_round += 1
                self._calls_taken += 1
                obs = await self._process_call(call)
            if self.stop_reason is None:
                text = obs.to_model_text()
                if not self.ctx.budget.try_charge_bytes(utf8_len(text)):
                    self._stop(state, StopReason.RUN_BYTES_EXHAUSTED)
            replies.append(_reply(call, obs))
        if cap is not None:
            self._protocol(ProtocolCode.TOO_MANY_CALLS, None, self._cap_detail(cap, over_cap))
        if self._round_found is not None:
            # Exactly the observation that said `evaluation_required: true` (even if the round then
            # required a stop: the flag the model saw and the pending observation never disagree).
            self.ledger.pending = self._round_found
        if self.ledger.stop_required:
            self.ledger.stop_announced = True
        state.set("messages", replies)
        self._emit_budget()

    def _cap_reached(self, taken_this_round: int) -> ToolCallCap | None:
        """The cap that forbids taking up one more call of this reply, if any; the run's is named first,
        as it refuses every later reply too."""
        limits = self.ctx.budget.limits
        if self._calls_taken >= limits.max_tool_calls_per_run:
            return ToolCallCap.RUN
        if taken_this_round >= limits.max_tool_calls_per_round:
            return ToolCallCap.ROUND
        return None

    def _cap_detail(self, cap: ToolCallCap, refused: list[str]) -> dict[str, Any]:
        """For the operator only: which cap, its limit, and the calls it refused."""
        limits = self.ctx.budget.limits
        limit = limits.max_tool_calls_per_run if cap == ToolCallCap.RUN else limits.max_tool_calls_per_round
        return {"cap": cap, "limit": limit, "tool_call_ids": refused}

    def _spent_during_round(self) -> StopReason | None:
        """Cancellation or a budget the round that just returned has spent (checked before its calls)."""
        if self.ctx.cancel_requested:
            return StopReason.CANCELLED
        return self.ctx.budget.exhausted_after_round()

    def _admit_round(self, messages: list[ChatMessage]) -> ChatMessage:
        """Make the round's reply one the run can keep and send again, before anything runs.

        - IDs: every call gets a usable ID, unique in the run. ID-less calls get `call-r<round>-<n>`
          (suffixed `-2`, `-3`… if the model already uses that ID), so the model, the adapter and the
          audit agree on it. A model-chosen ID that is not usable (`_usable_id`) is replaced the same
          way and its call is answered INVALID_PROGRESS_PROTOCOL: no unbounded ID, and no ID holding
          a configured secret, reaches an observation, an event, the audit or the provider again, and
          the transcript stays consistent for the provider.
        - Text UTF-8 cannot carry (lone surrogates: `unicode_text`) in a tool name, the arguments or
          the reply's text is replaced by U+FFFD in the transcript, which is sent back to the provider
          next round and echoed in observations. The call is judged on what the model sent: such a
          name is no registered tool (UNKNOWN_TOOL), such arguments are INVALID_INPUT
          (`_unreadable_input`), never the repaired copy.
        """
        assistant = messages[-1]
        calls = assistant.tool_calls
        # The run's IDs are consulted, never copied: this round's work stays O(its own calls).
        round_ids = {c.id for c in calls if self._usable_id(c.id)}
        self._unreadable_input = set()
        fixed: list[ToolCall] = []
        for position, call in enumerate(calls, start=1):
            call_id = call.id
            if not self._usable_id(call_id):
                assigned = base = f"call-r{self.round}-{position}"
                suffix = 2
                while assigned in round_ids or assigned in self._call_ids:
                    assigned, suffix = f"{base}-{suffix}", suffix + 1
                round_ids.add(assigned)
                if call.id:
                    self._replaced_ids.add(assigned)
                call_id = assigned
            name, arguments = encodable(call.tool_name), call.arguments
            unreadable = holds_unencodable(arguments)
            if call_id is call.id and name is call.tool_name and not unreadable:
                fixed.append(call)
                continue
            admitted = ToolCall(
                tool_name=name, arguments=encodable_value(arguments) if unreadable else arguments, id=call_id
            )
            if unreadable:
                self._unreadable_input.add(id(admitted))
            fixed.append(admitted)
        self._call_ids.update(c.id for c in fixed if c.id is not None)
        text = encodable(assistant.text) if assistant.text is not None else None
        if text is assistant.text and all(new is old for new, old in zip(fixed, calls, strict=True)):
            return assistant
        rebuilt = ChatMessage.from_assistant(
            text=text, meta=assistant.meta, tool_calls=fixed, reasoning=assistant.reasoning
        )
        messages[-1] = rebuilt
        return rebuilt

    def _usable_id(self, tool_call_id: Any) -> TypeGuard[str]:
        """An ID the run can keep exactly and echo anywhere: bounded text (`_plain_id`) holding no
        configured secret value."""
        return _plain_id(tool_call_id) and not self._holds_secret(tool_call_id)

    async def _process_call(self, call: ToolCall) -> Observation:
        assert call.id is not None  # noqa: S101 - invariant for the type checker
        if call.id in self._replaced_ids:
            return self._violation(call, {"invalid_field": "tool_call_id"})
        if not self.boundary.is_registered(call.tool_name):
            self.ledger.count_violation()
            self._protocol(ProtocolCode.UNKNOWN_TOOL, call.id, {})
            return self._control_or_stop(call, UNKNOWN_TOOL)
        if self.ledger.is_known_call_id(call.id):
            return self._violation(call, {"invalid_field": "tool_call_id"})

        envelope = call.arguments if isinstance(call.arguments, dict) else {}
        previous = envelope.get("previous_observation")  # optional: absent means null
        pending = self.ledger.pending
        if pending is not None:
            problem = _evaluation_problem(previous, pending)
            if problem is not None:
                return self._violation(call, {**problem, "expected_tool_call_id": pending.tool_call_id})
            assert isinstance(previous, dict)  # noqa: S101 - what _evaluation_problem accepts
            self._round_evaluation = dict(previous)
            self.ledger.consume_evaluation(previous["evaluation"])
            self._protocol(
                ProtocolCode.EVALUATION_RECORDED,
                call.id,
                {"evaluated_tool_call_id": pending.tool_call_id, "evaluation": previous["evaluation"]},
            )
            if self._saturated(call.id):
                return self._not_executed(call, STOP_REQUIRED)
        elif previous is not None and previous != self._round_evaluation:
            # Nothing is pending: only a parallel call repeating this round's own evaluation word for
            # word may carry one. Anything else would be an evaluation nobody asked for.
            return self._violation(
                call, {"invalid_field": "previous_observation", "expected_tool_call_id": None}
            )

        if (
            id(call) in self._unreadable_input
            or "input" not in envelope
            or not set(envelope) <= ENVELOPE_KEYS
        ):
            return self._invalid_input(call)
        try:
            business = self.boundary.validate_input(call.tool_name, envelope["input"])
        except ToolError:
            return self._invalid_input(call)
        key = input_key(call.tool_name, business)
        if self.ledger.is_duplicate(call.tool_name, key):
            self.ledger.count_no_gain()
            self._protocol(ProtocolCode.DUPLICATE_CALL, call.id, {})
            if self._saturated(call.id):
                return self._not_executed(call, STOP_REQUIRED)
            return self._not_executed(call, DUPLICATE_CALL)
        return await self._execute(call, business, key)

    async def _execute(self, call: ToolCall, business: Any, key: str) -> Observation:
        assert call.id is not None  # noqa: S101 - invariant for the type checker
        self.ledger.record_invocation(call.id, call.tool_name, key)
        self.emitter.emit(
            ToolStarted,
            round=self.round,
            tool_call_id=call.id,
            tool=call.tool_name,
            input=business.model_dump(mode="json"),
            input_key=key,
        )
        request = ToolRequest(self.ctx.run_id, self.ctx.session_id, call.id, call.tool_name, business)
        started = time.perf_counter()
        try:
            outcome = await self.boundary.invoke(request)
        except asyncio.CancelledError:
            self.emitter.emit(
                ToolFinished,
                round=self.round,
                tool_call_id=call.id,
                tool=call.tool_name,
                status=InvocationStatus.CANCELLED,
                error_code=ErrorCode.CANCELLED,
                reason=None,
                projection=None,
                duration_ms=int((time.perf_counter() - started) * 1000),
                observation=None,
            )
            raise
        self.ledger.finish_invocation(call.id, outcome.status)
        control: Control | None = None
        if outcome.status == EvidenceStatus.EMPTY:
            self.ledger.count_no_gain()
            if self._saturated(call.id, emit=False):
                control = STOP_REQUIRED
        awaits_evaluation = outcome.status == EvidenceStatus.FOUND and self._round_found is None
        if awaits_evaluation:
            self._round_found = self.ledger.checks[-1]
        obs = Observation(
            tool_call_id=call.id,
            tool=call.tool_name,
            evidence_status=outcome.status,
            data=outcome.data if outcome.status == EvidenceStatus.FOUND else None,
            error_code=outcome.error_code,
            reason=outcome.reason,
            control=control.to_json() if control is not None else None,
            evaluation_required=awaits_evaluation,
        )
        self.emitter.emit(
            ToolFinished,
            round=self.round,
            tool_call_id=call.id,
            tool=call.tool_name,
            status=InvocationStatus(outcome.status),
            error_code=outcome.error_code,
            reason=outcome.reason,
            projection=outcome.data,
            duration_ms=outcome.duration_ms,
            observation=obs.to_model_dict(),
        )
        if control is not None:
            self._emit_saturation(call.id)
        return obs

    def _collection_stopped(self, state: State, calls: list[ToolCall]) -> None:
        """The final completion opportunity was used for a tool call: nothing executes, the run stops."""
        self.ledger.collection_stopped = True
        self._protocol(ProtocolCode.COLLECTION_STOPPED, None, {"tool_call_ids": [c.id for c in calls]})
        reason = (
            StopReason(self.ledger.saturation)
            if self.ledger.saturation is not None
            else StopReason.MODEL_CALLS_EXHAUSTED
        )
        replies = [_reply(c, self._not_executed(c, STOP_REQUIRED)) for c in calls]
        self._stop(state, reason)
        state.set("messages", replies)

    # ------------------------------------------------------------------ helpers
    def _violation(self, call: ToolCall, detail: dict[str, Any]) -> Observation:
        self.ledger.count_violation()
        self._protocol(ProtocolCode.INVALID_PROGRESS_PROTOCOL, call.id, detail)
        return self._control_or_stop(call, invalid_progress(detail))

    def _control_or_stop(self, call: ToolCall, control: Control) -> Observation:
        if self._saturated(call.id):
            return self._not_executed(call, STOP_REQUIRED)
        return self._not_executed(call, control)

    def _saturated(self, tool_call_id: str | None, emit: bool = True) -> bool:
        if self.ledger.check_saturation() is None:
            return False
        if emit:
            self._emit_saturation(tool_call_id)
        return True

    def _emit_saturation(self, tool_call_id: str | None) -> None:
        self._protocol(ProtocolCode.SATURATED, tool_call_id, {"saturation": self.ledger.saturation})
        self._protocol(ProtocolCode.STOP_REQUIRED, tool_call_id, {"cause": StopCause.SATURATION})

    def _not_executed(self, call: ToolCall, control: Control) -> Observation:
        assert call.id is not None  # noqa: S101 - invariant for the type checker
        obs = self._unexecuted[call.id] = Observation(
            tool_call_id=call.id,
            tool=_echoed_name(call.tool_name, self.boundary.redactor),
            evidence_status=EvidenceStatus.NOT_EXECUTED,
            control=control.to_json(),
        )
        return obs

    def _invalid_input(self, call: ToolCall) -> Observation:
        assert call.id is not None  # noqa: S101 - invariant for the type checker
        self._protocol(ProtocolCode.INVALID_INPUT, call.id, {})
        obs = self._unexecuted[call.id] = Observation(
            tool_call_id=call.id,
            tool=call.tool_name,
            evidence_status=EvidenceStatus.ERROR,
            error_code=ErrorCode.INVALID_INPUT,
        )
        return obs

    def _stop(self, state: State, reason: StopReason) -> None:
        if self.stop_reason is None:
            self.stop_reason = reason
        state.set("stop_run", reason.value)
        # Only a budget is "exhausted"; saturation and cancellation are reported as what they are.
        self._emit_budget(exhausted=reason if reason in BUDGET_STOP_REASONS else None)

    def _protocol(self, code: ProtocolCode, tool_call_id: str | None, detail: dict[str, Any]) -> None:
        self.emitter.emit(
            ProtocolChanged,
            code=code,
            tool_call_id=tool_call_id,
            detail=detail,
            state=self.ledger.operator_state(),
        )

    def _emit_budget(self, exhausted: StopReason | None = None) -> None:
        answered, self._unexecuted = self._unexecuted, {}
        self.emitter.emit(
            BudgetChanged,
            **self.ctx.budget.gauge(),
            exhausted=exhausted,
            unexecuted_observations={k: o.to_model_dict() for k, o in answered.items()} or None,
        )


def _reply(call: ToolCall, observation: Observation) -> ChatMessage:
    return ChatMessage.from_tool(tool_result=observation.to_model_text(), origin=call)


def _echoed_name(tool_name: str, redactor: Redactor) -> str:
    """The tool name an observation repeats: any name the model sent, bounded (redacted before the cut)."""
    if len(tool_name) <= MAX_ECHOED_TOOL_NAME_CHARS:
        return tool_name
    return redactor.prefix(tool_name, MAX_ECHOED_TOOL_NAME_CHARS) + "…"


def _plain_id(tool_call_id: Any) -> TypeGuard[str]:
    """Text of 1 to MAX_TOOL_CALL_ID_CHARS characters that UTF-8 can carry, not ending in a space: the
    team audit's key compares with trailing spaces ignored (MariaDB's PAD SPACE collations), so `c-1`
    and `c-1 ` would be one invocation there. Nor blank (`agent.blank_text`): an ID of zero-width or
    format characters shows as nothing, and a Draft citing it is refused as blank, so its call would
    run and be audited under a name nobody can cite or read."""
    return (
        isinstance(tool_call_id, str)
        and 0 < len(tool_call_id) <= MAX_TOOL_CALL_ID_CHARS
        and not tool_call_id.endswith(" ")
        and is_encodable(tool_call_id)
        and not is_blank(tool_call_id)
    )


def _evaluation_problem(previous: Any, pending: CheckRecord) -> dict[str, str] | None:
    """Why `previous_observation` does not evaluate the pending observation, or None if it does.

    Plain comparisons only: whatever the model sent (any size, any type) is a wrong evaluation at
    worst, never an exception.
    """
    if previous is None:
        return {"missing_field": "previous_observation"}
    if not isinstance(previous, dict):
        return {"invalid_field": "previous_observation"}
    if previous.get("tool_call_id") != pending.tool_call_id:
        return {"invalid_field": "previous_observation.tool_call_id"}
    if previous.get("evaluation") not in tuple(Evaluation):
        return {"invalid_field": "previous_observation.evaluation"}
    if set(previous) != {"tool_call_id", "evaluation"}:
        return {"invalid_field": "previous_observation"}
    return None
