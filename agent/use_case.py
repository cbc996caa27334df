"""DiagnosisUseCase: one call = one Agent invocation = one run, always ending in a typed result.

Input is validated before any model call (rejected, never truncated). The Agent runs once, under a
deadline, with the harness hooks; no retry of the Agent or of a model call ever happens. Whatever
happens inside (a budget, a saturation, an invalid Draft, a crash, a cancel) is classified into the
execution result (docs/contracts.md, "Execution result") and announced as the `run_finished` event.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from agent.blank_text import is_blank
from agent.budget import RunBudget, limits_of, utf8_len
from agent.contracts import (
    AgentInput,
    DiagnosisDraft,
    ExecutionResult,
    Failure,
    PreviousTurn,
    ProgressSnapshot,
)
from agent.draft_parser import DraftRejected, parse_draft
from agent.draft_rules import DraftBounds, run_bounds
from agent.events import RequiredSinkFailed, RunEventEmitter
from agent.harness import DiagnosisHarnessCore
from agent.haystack_tools import frozen_tools as frozen_tools  # the harness benchmark swaps it
from agent.hooks import HARNESS_KEY, harness_hooks
from agent.input_files import OversizedInput
from agent.model_call import GuardedChatGenerator, ModelCallError
from agent.model_failure import model_endpoint
from agent.progress import ProgressLedger
from agent.prompt import system_prompt
from agent.request_shaping import RoundShaper
from agent.run_context import RunContext, new_id
from agent.run_events import (
    EventSink,
    ProtocolThresholds,
    RejectedInput,
    RunFinished,
    RunLimits,
    RunStarted,
)
from agent.settings import Settings
from agent.vocabulary import OUTCOME_OF, Outcome, RunFailureCause, StopReason
from tools.boundary import ToolBoundary
from tools.model_text import model_json
from tools.redaction import NOOP, Redactor
from tools.unicode_text import holds_unencodable, is_encodable

if TYPE_CHECKING:
    from haystack.dataclasses import ChatMessage
    from haystack.hooks import Hook, HookPoint

log = logging.getLogger(__name__)


class _Rejected(Exception):
    def __init__(self, reason: StopReason, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


def agent_input_text(query: str, previous_turn: PreviousTurn | None) -> str:
    """The user message: the query and previous turn as JSON, their turn tokens neutralised."""
    return model_json(AgentInput(query=query, previous_turn=previous_turn).model_dump(mode="json"))


class DiagnosisUseCase:
    def __init__(
        self,
        settings: Settings,
        chat_generator: Any,
        boundary: ToolBoundary,
        *,
        model_label: str = "",
        session_id: str | None = None,
        sinks: list[EventSink] | None = None,
        required_sinks: list[EventSink] | None = None,
        extra_hooks: dict[HookPoint, list[Hook]] | None = None,
        run_id_factory: Callable[[], str] = lambda: new_id("run"),
        redactor: Redactor = NOOP,
    ) -> None:
        self.settings = settings
        self.chat_generator = chat_generator
        self.boundary = boundary
        self.model_label = model_label
        self.session_id = session_id or new_id("session")
        self.sinks = list(sinks or [])
        self.required_sinks = list(required_sinks or [])
        self.extra_hooks = extra_hooks or {}
        self._run_id_factory = run_id_factory
        self.redactor = redactor
        self._current: RunContext | None = None
        # Where model calls go (None: the scripted model): named by a MODEL_ERROR and in the log.
        self._endpoint = model_endpoint(settings.model)

    def cancel(self) -> None:
        """Cancel the run in progress, if any (safe to call from a signal handler on the loop)."""
        if self._current is not None:
            self._current.cancel()

    async def execute(
        self,
        query: str | OversizedInput,
        previous_turn: PreviousTurn | dict[str, Any] | OversizedInput | None = None,
    ) -> ExecutionResult:
        """One run. An input its file held past the read cap (`OversizedInput`) is rejected as too
        large, as an inline input over its limit is."""
        run_id = self._run_id_factory()
        emitter = RunEventEmitter(
            run_id, self.session_id, self.sinks, self.required_sinks, redactor=self.redactor
        )
        budget = RunBudget(self.settings.budget)
        ctx = RunContext(self.session_id, run_id, budget)
        try:
            text, turn = self._validate_input(query, previous_turn)
            user_text = agent_input_text(text, turn)
            if utf8_len(user_text) > self.settings.budget.max_input_bytes or not budget.try_charge_bytes(
                utf8_len(user_text)
            ):
                raise _Rejected(StopReason.INPUT_TOO_LARGE, "query and previous turn exceed the input limit")
        except _Rejected as rejected:
            result = self._result(
                ctx, rejected.reason, None, None, Failure(code=rejected.reason, detail=rejected.detail)
            )
            rejected_input = RejectedInput(
                # Redacted before it is cut: a secret across the cut would no longer match whole.
                query=bounded_query(
                    self.redactor.text(shown) if isinstance(shown := _shown(query), str) else shown,
                    self.settings.budget.max_query_bytes,
                ),
                model=self.model_label,
                limits=self._limits(),
                protocol=self._thresholds(),
            )
            _announce(emitter, result, rejected_input)
            return result

        ledger = ProgressLedger(self.settings.protocol)
        core = DiagnosisHarnessCore(
            ctx, ledger, self.boundary, emitter, holds_secret=self.redactor.holds_secret
        )
        emitter.emit(
            RunStarted,
            query=text,
            previous_turn=turn.model_dump(mode="json") if turn else None,
            model=self.model_label,
            limits=self._limits(),
            protocol=self._thresholds(),
        )
        self._current = ctx
        try:
            result = await self._run_agent(ctx, core, user_text)
            _announce(emitter, result)
        except asyncio.CancelledError:
            # The caller itself was cancelled (e.g. the console's worker): record it, then obey.
            result = self._result(ctx, StopReason.CANCELLED, None, ledger.snapshot(), None)
            _announce(emitter, result)
            raise
        except RequiredSinkFailed as lost:
            # The audit refused a write (its own end included): the run ends typed, its closing event
            # reaches every other sink, and no Draft the audit does not hold is handed out.
            log.warning("run %s stopped: %s", run_id, lost.message)
            detail = self.redactor.text(str(lost))[:_MAX_AUDIT_DETAIL_CHARS]  # redacted before it is cut
            cause = RunFailureCause.AUDIT_WRITE_FAILED
            failure = Failure(code=StopReason.AGENT_ERROR, cause=cause, detail=detail)
            progress = ledger.snapshot() if ledger.completed_checks else None
            result = self._result(ctx, StopReason.AGENT_ERROR, None, progress, failure)
            _announce(emitter, result)
        finally:
            self._current = None
        return result

    # ------------------------------------------------------------------ internals
    def _limits(self) -> RunLimits:
        return limits_of(self.settings.budget)

    def _thresholds(self) -> ProtocolThresholds:
        protocol = self.settings.protocol
        return ProtocolThresholds(
            max_consecutive_no_gain=protocol.max_consecutive_no_gain,
            max_protocol_violations=protocol.max_protocol_violations,
        )

    def _validate_input(
        self,
        query: str | OversizedInput,
        previous_turn: PreviousTurn | dict[str, Any] | OversizedInput | None,
    ) -> tuple[str, PreviousTurn | None]:
        limits = self.settings.budget
        if isinstance(query, OversizedInput):
            raise _Rejected(
                StopReason.QUERY_TOO_LARGE,
                f"the query is more than {query.cap} bytes; the limit is {limits.max_query_bytes}",
            )
        if not isinstance(query, str) or is_blank(query):
            raise _Rejected(StopReason.QUERY_BLANK, "the query is blank")
        if not is_encodable(query):
            # No text the model could read: there is no more specific reason in the contract.
            raise _Rejected(StopReason.QUERY_BLANK, "the query is not valid Unicode text")
        size = utf8_len(query)
        if size > limits.max_query_bytes:
            raise _Rejected(
                StopReason.QUERY_TOO_LARGE,
                f"the query is {size} UTF-8 bytes; the limit is {limits.max_query_bytes}",
            )
        if previous_turn is None:
            return query, None
        if isinstance(previous_turn, OversizedInput):
            raise _Rejected(
                StopReason.PREVIOUS_TURN_TOO_LARGE,
                f"the previous turn is more than {previous_turn.cap} bytes; "
                f"the limit is {limits.max_previous_turn_bytes}",
            )
        if isinstance(previous_turn, PreviousTurn):
            turn = previous_turn
        else:
            try:
                turn = PreviousTurn.model_validate(previous_turn)
            except ValidationError as exc:
                raise _Rejected(StopReason.PREVIOUS_TURN_INVALID, _turn_problem(exc)) from None
        # Validation refuses a lone surrogate; a turn built without it (model_construct) is checked too,
        # because serializing one raises instead of answering.
        if holds_unencodable(turn.model_dump()):
            raise _Rejected(StopReason.PREVIOUS_TURN_INVALID, _NOT_UNICODE)
        turn_size = utf8_len(turn.model_dump_json())
        if turn_size > limits.max_previous_turn_bytes:
            raise _Rejected(
                StopReason.PREVIOUS_TURN_TOO_LARGE,
                f"the previous turn is {turn_size} UTF-8 bytes; "
                f"the limit is {limits.max_previous_turn_bytes}",
            )
        return query, turn

    def _build_agent(self, core: DiagnosisHarnessCore, shaper: RoundShaper) -> Any:
        from haystack.components.agents import Agent

        # Injected observers run first: the harness gate must be the last step before the generator,
        # and the tool interceptor must see the round before it answers every call.
        hooks: dict[HookPoint, list[Hook]] = {point: list(extra) for point, extra in self.extra_hooks.items()}
        for point, own in harness_hooks().items():
            hooks.setdefault(point, []).extend(own)
        return Agent(
            chat_generator=GuardedChatGenerator(
                self.chat_generator,
                round_request=shaper.request,
                on_truncated=core.close_model_round,
                timeout_s=self.settings.model.timeout_s if self._endpoint is not None else None,
            ),
            tools=list(frozen_tools()),
            exit_conditions=["text"],
            # The harness budget is the real limit; this only guards against a harness bug looping.
            max_agent_steps=self.settings.budget.max_model_calls + 2,
            hooks=hooks,
        )

    def _prompt_bounds(self) -> DraftBounds:
        """The Draft limits the prompt states: the parser's, narrowed to what one round of a real model
        can finish (the final round's schema is fitted the same way)."""
        model = self.settings.model
        max_tokens = model.max_tokens if model.provider == "openai" else None
        return run_bounds(self.settings.budget.max_draft_bytes, max_tokens=max_tokens)

    async def _run_agent(
        self, ctx: RunContext, core: DiagnosisHarnessCore, user_text: str
    ) -> ExecutionResult:
        from haystack.dataclasses import ChatMessage

        ledger = core.ledger
        shaper = RoundShaper(self.settings, core)
        agent = self._build_agent(core, shaper)
        prompt = system_prompt(self._prompt_bounds())
        messages = [ChatMessage.from_system(prompt), ChatMessage.from_user(user_text)]
        hook_context = {HARNESS_KEY: core, "run_context": ctx}
        inner: asyncio.Task[dict[str, Any]] = asyncio.create_task(
            agent.run_async(messages=messages, hook_context=hook_context)
        )
        ctx.attach(inner)
        try:
            async with asyncio.timeout(max(ctx.budget.remaining_s(), 0)):
                output = await asyncio.shield(inner)
        except TimeoutError:
            await _cancel_and_wait(inner)
            return self._result(ctx, StopReason.DEADLINE_EXCEEDED, None, ledger.snapshot(), None)
        except asyncio.CancelledError:
            if inner.cancelled() and ctx.cancel_requested and not _outer_cancelled():
                return self._result(ctx, StopReason.CANCELLED, None, ledger.snapshot(), None)
            await _cancel_and_wait(inner)
            raise
        except RequiredSinkFailed:
            await _cancel_and_wait(inner)
            raise
        except ModelCallError as exc:
            log.warning(
                "model call of run %s failed: cause %s (%s), endpoint %s",
                ctx.run_id,
                exc.cause_code or "unknown",
                exc.cause_type,
                self._endpoint or "none (scripted)",
            )
            progress = ledger.snapshot() if ledger.completed_checks else None
            code = StopReason.MODEL_ERROR
            if exc.reason is not None:
                failure = Failure(code=code, cause=exc.reason, endpoint=self._endpoint)
            else:
                failure = Failure(
                    code=code, cause=exc.cause_code, detail=exc.cause_type, endpoint=self._endpoint
                )
            return self._result(ctx, StopReason.MODEL_ERROR, None, progress, failure)
        except Exception as exc:
            # Unclassified framework failure: fail closed and publish no progress at all.
            log.warning("agent run %s failed: %s", ctx.run_id, type(exc).__name__)
            failure = Failure(code=StopReason.AGENT_ERROR, detail=type(exc).__name__)
            return self._result(ctx, StopReason.AGENT_ERROR, None, None, failure)

        if core.stop_reason is not None:
            return self._result(ctx, core.stop_reason, None, ledger.snapshot(), None)
        return self._finish_with_draft(ctx, core, output, shaper.draft_bounds)

    def _finish_with_draft(
        self,
        ctx: RunContext,
        core: DiagnosisHarnessCore,
        output: dict[str, Any],
        schema_bounds: DraftBounds | None,
    ) -> ExecutionResult:
        """The Draft's end. `schema_bounds` are those of the Draft schema the last round sent, if any:
        a string the Draft holds at its bound is named in the Result (`bounds_reached`)."""
        ledger = core.ledger
        if output.get("exit_reason") == "max_agent_steps":
            failure = Failure(code=StopReason.AGENT_ERROR)
            return self._result(ctx, StopReason.AGENT_ERROR, None, None, failure)
        text = _final_assistant_text(output.get("messages") or [])
        try:
            draft = parse_draft(text, self.settings.budget.max_draft_bytes, ledger.evidence())
        except DraftRejected as rejected:
            reason = StopReason.DRAFT_TOO_LARGE if rejected.too_large else StopReason.INVALID_DRAFT
            progress = ledger.snapshot() if ledger.completed_checks else None
            return self._result(
                ctx,
                reason,
                None,
                progress,
                Failure(code=reason, violation=rejected.violation, detail=rejected.detail),
            )
        if not ctx.budget.try_charge_bytes(utf8_len(text or "")):
            return self._result(ctx, StopReason.RUN_BYTES_EXHAUSTED, None, ledger.snapshot(), None)
        reason = StopReason.COMPLETED_AFTER_STOP_REQUIRED if ledger.stop_required else StopReason.COMPLETED
        result = self._result(ctx, reason, draft, ledger.snapshot(), None)
        reached = schema_bounds.reached(draft.model_dump(mode="json")) if schema_bounds else []
        return result.model_copy(update={"bounds_reached": reached}) if reached else result

    @staticmethod
    def _result(
        ctx: RunContext,
        reason: StopReason,
        draft: DiagnosisDraft | None,
        progress: ProgressSnapshot | None,
        failure: Failure | None,
    ) -> ExecutionResult:
        outcome = OUTCOME_OF[reason]
        if outcome not in (Outcome.FAILED, Outcome.REJECTED):
            failure = None
        return ExecutionResult(
            run_id=ctx.run_id,
            session_id=ctx.session_id,
            outcome=outcome,
            stop_reason=reason,
            draft=draft,
            progress=progress,
            usage=ctx.budget.usage(),
            failure=failure,
        )


_NOT_UNICODE = "the previous turn is not valid Unicode text (it holds a lone surrogate)"


def _turn_problem(error: ValidationError) -> str:
    """Why a previous turn was refused, in words that never quote it."""
    unicode = any(
        e["type"] == "string_unicode" or "not valid Unicode text" in e["msg"]
        for e in error.errors(include_input=False)
    )
    return _NOT_UNICODE if unicode else "the previous turn is not a valid PreviousTurn"


# An audit error's words in a result: enough for the store's own message, never a page of server text.
_MAX_AUDIT_DETAIL_CHARS = 300


def _announce(
    emitter: RunEventEmitter, result: ExecutionResult, rejected_input: RejectedInput | None = None
) -> None:
    """The last event of every run, whatever ended it."""
    emitter.emit(
        RunFinished,
        outcome=result.outcome,
        stop_reason=result.stop_reason,
        result=result.to_json_dict(),
        rejected_input=rejected_input,
    )


def _shown(query: Any) -> Any:
    """What a rejected run's query was, for the audit: an oversized file's beginning stands for it."""
    return query.head if isinstance(query, OversizedInput) else query


def bounded_query(query: Any, max_bytes: int) -> str | None:
    """A rejected query as the audit keeps it: at most `max_bytes` UTF-8 bytes (cut on a character,
    marked with `…`), text that cannot be encoded replaced, so an oversized or broken query is still
    shown for what it was without storing megabytes. Not text at all: None."""
    if not isinstance(query, str):
        return None
    data = query.encode("utf-8", errors="replace")
    if len(data) <= max_bytes:
        return data.decode("utf-8")
    return data[:max_bytes].decode("utf-8", errors="ignore") + "…"


def _final_assistant_text(messages: list[ChatMessage]) -> str | None:
    for message in reversed(messages):
        if message.role.value == "assistant":
            return message.text
    return None


def _outer_cancelled() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


async def _cancel_and_wait(task: asyncio.Task[Any]) -> None:
    """Cancel the agent task and wait until it has really finished (tools recorded CANCELLED)."""
    if not task.done():
        task.cancel()
    await asyncio.wait([task])
    if not task.cancelled() and task.exception() is not None:
        log.debug("agent task ended with %s after cancel", type(task.exception()).__name__)
