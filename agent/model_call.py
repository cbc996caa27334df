"""GuardedChatGenerator: marks failures that happen inside the model call itself.

Only an exception raised by the chat generator is a MODEL_ERROR; anything else that escapes the
Agent (a hook, the framework) is an AGENT_ERROR. Wrapping the generator is the one place that knows
the difference for certain.
"""

from __future__ import annotations

import asyncio
from typing import Any


class ModelCallError(Exception):
    """The chat generator failed. Only the exception's type name is kept: provider text may leak."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(type(cause).__name__)
        self.cause_type = type(cause).__name__


class GuardedChatGenerator:
    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def run(self, messages: list[Any], tools: Any = None, **kwargs: Any) -> dict[str, Any]:
        try:
            return self.inner.run(messages=messages, tools=tools, **kwargs)
        except Exception as exc:
            raise ModelCallError(exc) from exc

    async def run_async(self, messages: list[Any], tools: Any = None, **kwargs: Any) -> dict[str, Any]:
        try:
            if callable(getattr(self.inner, "run_async", None)):
                return await self.inner.run_async(messages=messages, tools=tools, **kwargs)
            return await asyncio.to_thread(self.inner.run, messages=messages, tools=tools, **kwargs)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            raise ModelCallError(exc) from exc

    def warm_up(self) -> None:
        if hasattr(self.inner, "warm_up"):
            self.inner.warm_up()

    async def warm_up_async(self) -> None:
        if hasattr(self.inner, "warm_up_async"):
            await self.inner.warm_up_async()
        else:
            self.warm_up()
