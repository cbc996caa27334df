"""DiagnosisHarnessCore: budgets, the progress protocol and tool interception around one Haystack Agent.

The Agent owns the ReAct loop; the harness only sits at its hook points:
- `before_model_call` (before_llm): cancellation, deadline, model-call, token and run-byte budgets;
  raises STOP_REQUIRED before the last permitted round; a refused round never reaches the generator.
- `handle_tool_round` (before_tool): answers EVERY pending call of the round itself, in call order,
  so Haystack executes nothing: unknown tools, protocol violations and duplicates get control
  observations; authorized calls run once through the ToolBoundary with the exact tool call ID.
- `close_model_round` (before_tool / on_exit): records the round's usage.
All state lives here (not in Haystack's State, whose `get` deep-copies), so a cancelled run still
has its ledger and a ProgressSnapshot.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from haystack.dataclasses import ChatMessage, ToolCall

from agent.budget import utf8_len
from agent.contracts import StopReason
from agent.events import RunEventEmitter
from agent.progress import CheckRecord, ProgressLedger
from agent.run_context import RunContext
from tools.adapter import ToolError, ToolRequest
from tools.boundary import ToolBoundary, canonical_input
from tools.definitions import PreviousObservation
from tools.observation import Observation

STOP_REQUIRED = {"code": "STOP_REQUIRED"}
_MISSING = object()


class DiagnosisHarnessCore:
    def __init__(
        self,
        ctx: RunContext,
        ledger: ProgressLedger,
        boundary: ToolBoundary,
        emitter: RunEventEmitter,
    ) -> None:
        self.ctx = ctx
        self.ledger = ledger
        self.boundary = boundary
        self.emitter = emitter
        self.stop_reason: StopReason | None = None
        self.round = 0
        self.round_in_flight = False
        # True while the round in flight is the final completion opportunity: no tool may be called.
        self.no_tool_round = False
        self._round_started = 0.0

    # ------------------------------------------------------------------ model rounds
    def before_model_call(self, state: Any) -> None:
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
            self.ledger.require_stop("BUDGET")
        if self.ledger.stop_required and not self.ledger.stop_announced:
            if not self._announce_stop_required(state):
                return
        budget.model_calls += 1
        self.round = budget.model_calls
        self.round_in_flight = True
        self.no_tool_round = self.ledger.stop_required and self.ledger.stop_announced
        self._round_started = time.perf_counter()
        self.emitter.emit("model_round_started", round=self.round)
        self._emit_budget()

    def close_model_round(self, message: ChatMessage | None) -> None:
        """Record usage of the round that just returned (there is no after-model hook point)."""
        if not self.round_in_flight:
            return
        self.round_in_flight = False
        usage = (message.meta.get("usage") if message is not None else None) or {}
        prompt = int(usage.get("prompt_tokens") or 0)
        completion = int(usage.get("completion_tokens") or 0)
        self.ctx.budget.record_usage(prompt, completion)
        self.emitter.emit(
            "model_round_finished",
            round=self.round,
            duration_ms=int((time.perf_counter() - self._round_started) * 1000),
            prompt_tokens=prompt,
            completion_tokens=completion,
            tool_call_ids=[c.id for c in message.tool_calls] if message is not None else [],
            has_text=bool(message is not None and message.text),
        )
        self._emit_budget()

    def _announce_stop_required(self, state: Any) -> bool:
        """Deliver STOP_REQUIRED as a control observation before the final round."""
        text = json.dumps({"control": STOP_REQUIRED}, separators=(",", ":"))
        if not self.ctx.budget.try_charge_bytes(utf8_len(text)):
            self._stop(state, StopReason.RUN_BYTES_EXHAUSTED)
            return False
        state.set("messages", [ChatMessage.from_user(text)])
        self.ledger.stop_announced = True
        self._protocol("STOP_REQUIRED", None, {"cause": self.ledger.stop_cause})
        return True

    # ------------------------------------------------------------------ tool rounds
    async def handle_tool_round(self, state: Any) -> None:
        messages: list[ChatMessage] = state.data["messages"]
        assistant = self._with_call_ids(messages)
        self.close_model_round(assistant)
        calls = list(assistant.tool_calls)
        if not calls:
            # An empty reply (no text, no usable tool call): end the run; the use case fails it closed.
            state.set("stop_run", "EMPTY_REPLY")
            return

        if self.ledger.stop_required and self.ledger.stop_announced:
            self._collection_stopped(state, calls)
            return

        pending_at_start = self.ledger.pending
        found_this_round: CheckRecord | None = None
        replies: list[ChatMessage] = []
        for call in calls:
            assert call.id is not None
            if self.stop_reason is not None:
                obs = Observation(tool_call_id=call.id, tool=call.tool_name, evidence_status="NOT_EXECUTED")
            elif self.ledger.stop_required:
                obs = self._not_executed(call, STOP_REQUIRED)
            else:
                obs, found = await self._process_call(call, pending_at_start)
                if self.ledger.pending is None:
                    pending_at_start = None
                if found is not None:
                    found_this_round = found
            if self.stop_reason is None:
                text = obs.to_model_text()
                if not self.ctx.budget.try_charge_bytes(utf8_len(text)):
                    self._stop(state, StopReason.RUN_BYTES_EXHAUSTED)
            replies.append(ChatMessage.from_tool(tool_result=obs.to_model_text(), origin=call))
        if found_this_round is not None and not self.ledger.stop_required:
            self.ledger.pending = found_this_round
        if self.ledger.stop_required:
            self.ledger.stop_announced = True
        state.set("messages", replies)
        self._emit_budget()

    def _with_call_ids(self, messages: list[ChatMessage]) -> ChatMessage:
        """Give ID-less tool calls a deterministic ID (round + position) so the audit and model agree."""
        assistant = messages[-1]
        if all(c.id for c in assistant.tool_calls):
            return assistant
        calls = [
            c
            if c.id
            else ToolCall(tool_name=c.tool_name, arguments=c.arguments, id=f"call-r{self.round}-{i + 1}")
            for i, c in enumerate(assistant.tool_calls)
        ]
        fixed = ChatMessage.from_assistant(text=assistant.text, meta=assistant.meta, tool_calls=calls)
        messages[-1] = fixed
        return fixed

    async def _process_call(
        self, call: ToolCall, pending: CheckRecord | None
    ) -> tuple[Observation, CheckRecord | None]:
        assert call.id is not None
        if not self.boundary.is_registered(call.tool_name):
            self.ledger.count_violation()
            self._protocol("UNKNOWN_TOOL", call.id, {})
            return self._control_or_stop(call, {"code": "UNKNOWN_TOOL"}), None
        if self.ledger.is_known_call_id(call.id):
            return self._violation(call, {"invalid_field": "tool_call_id"}), None

        envelope = call.arguments if isinstance(call.arguments, dict) else {}
        if pending is not None:
            problem = _evaluation_problem(envelope.get("previous_observation", _MISSING), pending)
            if problem is not None:
                return self._violation(call, {**problem, "expected_tool_call_id": pending.tool_call_id}), None
            evaluation = envelope["previous_observation"]["evaluation"]
            self.ledger.consume_evaluation(evaluation)
            self._protocol(
                "EVALUATION_RECORDED",
                call.id,
                {"evaluated_tool_call_id": pending.tool_call_id, "evaluation": evaluation},
            )
            if self._saturated(call.id):
                return self._not_executed(call, STOP_REQUIRED), None

        if set(envelope) != {"previous_observation", "input"}:
            return self._invalid_input(call), None
        try:
            business = self.boundary.validate_input(call.tool_name, envelope["input"])
        except ToolError:
            return self._invalid_input(call), None
        key = canonical_input(business)
        if self.ledger.is_duplicate(call.tool_name, key):
            self.ledger.count_no_gain()
            self._protocol("DUPLICATE_CALL", call.id, {})
            if self._saturated(call.id):
                return self._not_executed(call, STOP_REQUIRED), None
            return self._not_executed(call, {"code": "DUPLICATE_CALL"}), None
        return await self._execute(call, business, key)

    async def _execute(
        self, call: ToolCall, business: Any, key: str
    ) -> tuple[Observation, CheckRecord | None]:
        assert call.id is not None
        self.ledger.record_invocation(call.id, call.tool_name, key)
        self.emitter.emit(
            "tool_started",
            round=self.round,
            tool_call_id=call.id,
            tool=call.tool_name,
            input=business.model_dump(mode="json"),
        )
        request = ToolRequest(self.ctx.run_id, self.ctx.session_id, call.id, call.tool_name, business)
        started = time.perf_counter()
        try:
            outcome = await self.boundary.invoke(request)
        except asyncio.CancelledError:
            self.emitter.emit(
                "tool_finished",
                round=self.round,
                tool_call_id=call.id,
                tool=call.tool_name,
                status="CANCELLED",
                error_code="CANCELLED",
                reason=None,
                projection=None,
                duration_ms=int((time.perf_counter() - started) * 1000),
                observation=None,
            )
            raise
        self.ledger.finish_invocation(call.id, outcome.status)
        control = None
        if outcome.status == "EMPTY":
            self.ledger.count_no_gain()
            if self._saturated(call.id, emit=False):
                control = STOP_REQUIRED
        obs = Observation(
            tool_call_id=call.id,
            tool=call.tool_name,
            evidence_status=outcome.status,
            data=outcome.data if outcome.status == "FOUND" else None,
            error_code=outcome.error_code,
            reason=outcome.reason,
            control=control,
        )
        self.emitter.emit(
            "tool_finished",
            round=self.round,
            tool_call_id=call.id,
            tool=call.tool_name,
            status=outcome.status,
            error_code=outcome.error_code,
            reason=outcome.reason,
            projection=outcome.data,
            duration_ms=outcome.duration_ms,
            observation=obs.to_model_dict(),
        )
        if control is not None:
            self._emit_saturation(call.id)
        found = self.ledger.checks[-1] if outcome.status == "FOUND" else None
        return obs, found

    def _collection_stopped(self, state: Any, calls: list[ToolCall]) -> None:
        """The final completion opportunity was used for a tool call: nothing executes, the run stops."""
        self.ledger.collection_stopped = True
        self._protocol("COLLECTION_STOPPED", None, {"tool_call_ids": [c.id for c in calls]})
        reason = (
            StopReason(self.ledger.saturation)
            if self.ledger.saturation is not None
            else StopReason.MODEL_CALLS_EXHAUSTED
        )
        self._stop(state, reason)
        replies = [
            ChatMessage.from_tool(self._not_executed(c, STOP_REQUIRED).to_model_text(), c) for c in calls
        ]
        state.set("messages", replies)

    # ------------------------------------------------------------------ helpers
    def _violation(self, call: ToolCall, detail: dict[str, Any]) -> Observation:
        self.ledger.count_violation()
        control = {"code": "INVALID_PROGRESS_PROTOCOL", **detail}
        self._protocol("INVALID_PROGRESS_PROTOCOL", call.id, detail)
        return self._control_or_stop(call, control)

    def _control_or_stop(self, call: ToolCall, control: dict[str, Any]) -> Observation:
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
        self._protocol("SATURATED", tool_call_id, {"saturation": self.ledger.saturation})
        self._protocol("STOP_REQUIRED", tool_call_id, {"cause": "SATURATION"})

    @staticmethod
    def _not_executed(call: ToolCall, control: dict[str, Any]) -> Observation:
        assert call.id is not None
        return Observation(
            tool_call_id=call.id, tool=call.tool_name, evidence_status="NOT_EXECUTED", control=control
        )

    def _invalid_input(self, call: ToolCall) -> Observation:
        assert call.id is not None
        self._protocol("INVALID_INPUT", call.id, {})
        return Observation(
            tool_call_id=call.id, tool=call.tool_name, evidence_status="ERROR", error_code="INVALID_INPUT"
        )

    def _stop(self, state: Any, reason: StopReason) -> None:
        if self.stop_reason is None:
            self.stop_reason = reason
        state.set("stop_run", reason.value)
        self._emit_budget(exhausted=reason.value)

    def _protocol(self, code: str, tool_call_id: str | None, detail: dict[str, Any]) -> None:
        self.emitter.emit(
            "protocol_changed",
            code=code,
            tool_call_id=tool_call_id,
            detail=detail,
            state=self.ledger.operator_state(),
        )

    def _emit_budget(self, exhausted: str | None = None) -> None:
        self.emitter.emit("budget_changed", **self.ctx.budget.gauge(), exhausted=exhausted)


def _evaluation_problem(previous: Any, pending: CheckRecord) -> dict[str, str] | None:
    """Why `previous_observation` does not evaluate the pending observation, or None if it does."""
    if previous is _MISSING or previous is None:
        return {"missing_field": "previous_observation"}
    if not isinstance(previous, dict):
        return {"invalid_field": "previous_observation"}
    if previous.get("tool_call_id") != pending.tool_call_id:
        return {"invalid_field": "previous_observation.tool_call_id"}
    if previous.get("evaluation") not in ("GAINED", "NO_GAIN"):
        return {"invalid_field": "previous_observation.evaluation"}
    if set(previous) != {"tool_call_id", "evaluation"}:
        return {"invalid_field": "previous_observation"}
    PreviousObservation.model_validate(previous)
    return None
