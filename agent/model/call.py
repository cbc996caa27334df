"""GuardedChatGenerator: the one wrapper around the chat generator of a run.

- It marks failures that happen inside the model call itself: only an exception raised by the chat
  generator is a MODEL_ERROR; anything else that escapes the Agent (a hook, the framework) is an
  AGENT_ERROR. Wrapping the generator is the one place that knows the difference for certain. It
  also bounds the whole call by `[model] timeout_s` (when given one): the client bounds each phase.
- It is the one place that sees exactly what a round sent and received: it replaces each reply's
  provider usage with a clean `RoundUsage` (estimated where the provider's is missing or unusable)
  before Haystack or the harness reads it, so no usage shape can crash the run.
- A reply the server cut at the token limit (`finish_reason == "length"`) is a MODEL_ERROR with the
  stable reason MAX_TOKENS: its text is half a Draft or half a tool call, never something to parse.
- The Agent sends the same inputs on every round; some rounds need more (the run's Draft schema on
  the round where no tool may be called, the tool schemas narrowed for the round, one schema for "a
  call or the Draft": agent.model.request_shaping). `round_request` supplies those per call: its kwargs
  are merged over the generator's own generation settings, its tools replace the Agent's for that
  request only. On a round whose call comes back as the reply's text, that text is read back into
  the call (agent.call_or_draft) after the reply is measured and checked, so usage counts what the
  server wrote.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from agent.call_or_draft import call_from_reply
from agent.model.failure import failure_cause
from agent.model.request_shaping import RoundRequest
from agent.usage import WireSizes, message_bytes, round_usage
from agent.vocabulary import ModelFailureCause


class ModelCallError(Exception):
    """The chat generator failed. Only the exception's type name is kept: provider text may leak.

    `reason` is a stable code when the reply itself was refused (MAX_TOKENS), else None;
    `cause_code` is the failure's stable cause (`agent.model.failure`), read from the exception chain.
    """

    def __init__(self, cause: BaseException | None, reason: str | None = None) -> None:
        name = type(cause).__name__ if cause is not None else "TruncatedReply"
        super().__init__(reason or name)
        self.cause_type = name
        self.reason = reason
        self.cause_code = reason or (failure_cause(cause) if cause is not None else None)


class GuardedChatGenerator:
    """One per run: it keeps the sizes of what the run has sent so far."""

    def __init__(
        self,
        inner: Any,
        round_request: Callable[[], Awaitable[RoundRequest]] | None = None,
        on_truncated: Callable[[Any], None] | None = None,
        timeout_s: float | None = None,
    ) -> None:
        self.inner = inner
        self._sizes = WireSizes()
        self._round_request = round_request
        # The whole call, connect to last byte. The client's own timeout bounds each phase (connect,
        # each read) apart, so a server trickling its answer, or slow at every phase, outlasts it.
        self._timeout_s = timeout_s
        # Called with a reply cut at the token limit before the run fails, so its usage is recorded.
        self._on_truncated = on_truncated

    def run(self, messages: list[Any], tools: Any = None, **kwargs: Any) -> dict[str, Any]:
        # Each round's request is read when the round is sent (awaiting the server's kind once): the
        # Agent runs only through `run_async`, as its hooks do.
        raise RuntimeError("GuardedChatGenerator runs only inside Agent.run_async")

    async def run_async(self, messages: list[Any], tools: Any = None, **kwargs: Any) -> dict[str, Any]:
        # The harness's part of the request: a failure here is the harness's (AGENT_ERROR), not the model's.
        request = await self._round_request() if self._round_request is not None else RoundRequest()
        sent, tools, kwargs = _with_round_request(request, messages, tools, kwargs)
        try:
            async with asyncio.timeout(self._timeout_s):
                if callable(getattr(self.inner, "run_async", None)):
                    result = await self.inner.run_async(messages=sent, tools=tools, **kwargs)
                else:
                    result = await asyncio.to_thread(self.inner.run, messages=sent, tools=tools, **kwargs)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            raise _classify(exc) from exc
        checked = self._checked(self._with_measured_usage(result, messages, tools))
        return _calls_read(checked) if request.calls_in_text else checked

    def _with_measured_usage(self, result: dict[str, Any], messages: list[Any], tools: Any) -> dict[str, Any]:
        """Give every reply clean usage meta: the provider's counts where usable, else estimated."""
        replies = result.get("replies") if isinstance(result, dict) else None
        if not replies:
            return result
        sent = self._sizes.sent(messages, tools)
        for reply in replies:
            meta = getattr(reply, "meta", None)
            if isinstance(meta, dict):
                meta.update(round_usage(meta.get("usage"), sent, message_bytes(reply)).to_meta())
        return result

    def _checked(self, result: dict[str, Any]) -> dict[str, Any]:
        """Refuse a reply cut at the token limit (after its usage is measured, so it is recorded)."""
        replies = result.get("replies") if isinstance(result, dict) else None
        for reply in replies or []:
            meta = getattr(reply, "meta", None) or {}
            if meta.get("finish_reason") == "length":
                if self._on_truncated is not None:
                    self._on_truncated(reply)
                raise ModelCallError(None, reason=ModelFailureCause.MAX_TOKENS)
        return result

    def warm_up(self) -> None:
        if hasattr(self.inner, "warm_up"):
            self.inner.warm_up()

    async def warm_up_async(self) -> None:
        if hasattr(self.inner, "warm_up_async"):
            await self.inner.warm_up_async()
        else:
            self.warm_up()


def _with_round_request(
    request: RoundRequest, messages: list[Any], tools: Any, kwargs: dict[str, Any]
) -> tuple[list[Any], Any, dict[str, Any]]:
    """The messages, tools and kwargs this round sends: the Agent's, with the round's additions."""
    if request.generation_kwargs:
        merged = {**(kwargs.get("generation_kwargs") or {}), **request.generation_kwargs}
        kwargs = {**kwargs, "generation_kwargs": merged}
    if request.tools_strict is not None:
        kwargs = {**kwargs, "tools_strict": request.tools_strict}
    return messages, list(request.tools) if request.tools is not None else tools, kwargs


def _calls_read(result: dict[str, Any]) -> dict[str, Any]:
    """The result with each reply that is exactly one call object read as that call."""
    replies = result.get("replies") if isinstance(result, dict) else None
    if not replies:
        return result
    return {**result, "replies": [call_from_reply(reply) for reply in replies]}


def _classify(exc: Exception) -> ModelCallError:
    # The OpenAI client raises this (instead of returning the reply) on its structured-output path.
    if type(exc).__name__ == "LengthFinishReasonError":
        return ModelCallError(exc, reason=ModelFailureCause.MAX_TOKENS)
    return ModelCallError(exc)
