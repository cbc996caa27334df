"""GuardedChatGenerator: marks failures inside the model call, and measures each round's usage.

Only an exception raised by the chat generator is a MODEL_ERROR; anything else that escapes the
Agent (a hook, the framework) is an AGENT_ERROR. Wrapping the generator is the one place that knows
the difference for certain, and the one place that sees exactly what a round sent and received: it
replaces each reply's provider usage with a clean `RoundUsage` (estimated where the provider's is
missing or unusable) before Haystack or the harness reads it, so no usage shape can crash the run.
"""

from __future__ import annotations

import asyncio
from typing import Any

from agent.usage import WireSizes, message_bytes, round_usage


class ModelCallError(Exception):
    """The chat generator failed. Only the exception's type name is kept: provider text may leak."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(type(cause).__name__)
        self.cause_type = type(cause).__name__


class GuardedChatGenerator:
    """One per run: it keeps the sizes of what the run has sent so far."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self._sizes = WireSizes()

    def run(self, messages: list[Any], tools: Any = None, **kwargs: Any) -> dict[str, Any]:
        try:
            result = self.inner.run(messages=messages, tools=tools, **kwargs)
        except Exception as exc:
            raise ModelCallError(exc) from exc
        return self._with_measured_usage(result, messages, tools)

    async def run_async(self, messages: list[Any], tools: Any = None, **kwargs: Any) -> dict[str, Any]:
        try:
            if callable(getattr(self.inner, "run_async", None)):
                result = await self.inner.run_async(messages=messages, tools=tools, **kwargs)
            else:
                result = await asyncio.to_thread(self.inner.run, messages=messages, tools=tools, **kwargs)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            raise ModelCallError(exc) from exc
        return self._with_measured_usage(result, messages, tools)

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

    def warm_up(self) -> None:
        if hasattr(self.inner, "warm_up"):
            self.inner.warm_up()

    async def warm_up_async(self) -> None:
        if hasattr(self.inner, "warm_up_async"):
            await self.inner.warm_up_async()
        else:
            self.warm_up()
