"""A deterministic chat generator that replays a scenario's rounds (docs/contracts.md, "Scenario files").

It is how trainers show the harness without a model server, and how tests drive the real Haystack
Agent. It never wraps around: asking for a round past the script is a model error.
"""

from __future__ import annotations

import asyncio
from typing import Any

from haystack import component
from haystack.dataclasses import ChatMessage, ToolCall

from agent.scenarios import ScriptedRound


class ScriptExhausted(RuntimeError):
    """The agent asked for a model round the script does not have."""


@component
class ScriptedChatGenerator:
    def __init__(self, rounds: list[ScriptedRound], model_label: str = "scripted") -> None:
        self.rounds = list(rounds)
        self.model_label = model_label
        self.calls = 0
        self.received: list[list[ChatMessage]] = []

    def _reply(self, messages: list[ChatMessage]) -> dict[str, list[ChatMessage]]:
        self.received.append(list(messages))
        if self.calls >= len(self.rounds):
            raise ScriptExhausted(
                f"script has {len(self.rounds)} round{'' if len(self.rounds) == 1 else 's'}; "
                f"round {self.calls + 1} was requested"
            )
        scripted = self.rounds[self.calls]
        self.calls += 1
        tool_calls = [ToolCall(tool_name=c.name, arguments=c.arguments, id=c.id) for c in scripted.tool_calls]
        meta: dict[str, Any] = {
            "model": self.model_label,
            "finish_reason": "tool_calls" if tool_calls else "stop",
        }
        if scripted.usage is not None:
            meta["usage"] = scripted.usage.reported()
        reply = ChatMessage.from_assistant(text=scripted.text, tool_calls=tool_calls or None, meta=meta)
        return {"replies": [reply]}

    @component.output_types(replies=list[ChatMessage])
    def run(self, messages: list[ChatMessage], tools: Any = None, **_: Any) -> dict[str, list[ChatMessage]]:
        return self._reply(messages)

    @component.output_types(replies=list[ChatMessage])
    async def run_async(
        self, messages: list[ChatMessage], tools: Any = None, **_: Any
    ) -> dict[str, list[ChatMessage]]:
        if self.calls < len(self.rounds) and self.rounds[self.calls].delay_ms:
            await asyncio.sleep(self.rounds[self.calls].delay_ms / 1000)  # honours cancellation
        return self._reply(messages)
