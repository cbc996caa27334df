"""What each model round asks of the server, beyond the Agent's messages (`[model] request_shaping`).

The Agent sends the same request on every round; a run knows more about each round than that:
- **the final completion opportunity** (no tool may be called): with `structured_output = "auto"`,
  the run's Draft schema and `tool_choice: "none"` (agent.draft_schema);
- **a round where a tool may be called**, under a shaping mode (agent.server_kind resolves "auto"):
  - "llama.cpp": the tool schemas narrowed for this round (agent.tool_round_schema),
    `tool_choice: "required"`, one call (`parallel_tool_calls: false`), the reply started inside a
    call (an assistant prefill of `<tool_call>\\n`) and stopped after it (`stop: ["</tool_call>"]`).
    Measured on llama.cpp's server: "required" alone builds a grammar that still accepts any text
    before the first call and any number of calls after it, so a small model writes prose or
    repeats calls until `max_tokens`; with the prefill and the stop, the whole reply is one call the
    grammar holds to the narrowed schema. The model can no longer answer on such a round: a run ends
    on its final opportunity (or a stop), so `[budget] max_model_calls` sets how deep it looks;
  - "strict": the narrowed schemas as strict functions (`strict: true`, every property required) and
    `parallel_tool_calls: false` (strict schemas do not hold for parallel calls); the model still
    chooses between a call and its answer. OpenAI and vLLM constrain such calls (by their
    documentation; not measured here); llama.cpp holds a call to them once the model writes one;
  - "off": nothing beyond the frozen definitions.
Whenever a mode is on, every round carries narrowed schemas: they change only when the pending
observation does, and the final round repeats the last tool round's, so a server's cached prompt
prefix stays valid as long as it can (the tools are rendered before the conversation). The names,
descriptions and tools the Agent registers stay the frozen three; the harness still judges every call.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agent.draft_schema import final_round_kwargs
from agent.haystack_tools import frozen_tools
from agent.models import server_enforces_draft_schema
from agent.server_kind import TOOL_CALL_CLOSE, TOOL_CALL_OPEN, ShapingMode, shaping_mode
from agent.tool_round_schema import round_tool_schema

if TYPE_CHECKING:
    from agent.harness import DiagnosisHarnessCore
    from agent.settings import Settings


@dataclass(frozen=True)
class RoundRequest:
    """One round's additions: generation kwargs merged over the generator's own, the tools to send
    instead of the Agent's (same names, narrower parameters), and an assistant prefill."""

    generation_kwargs: dict[str, Any] = field(default_factory=dict)
    tools: tuple[Any, ...] | None = None
    tools_strict: bool | None = None
    prefill: str | None = None


class RoundShaper:
    """One per run: reads the run's state when the round is sent (after `before_llm` gated it)."""

    def __init__(self, settings: Settings, core: DiagnosisHarnessCore) -> None:
        self._settings = settings
        self._core = core
        self._mode: ShapingMode | None = None
        # The tools the last tool round sent: the final round sends them again (see below).
        self._last_tools: tuple[Any, ...] | None = None

    async def request(self) -> RoundRequest:
        if self._mode is None:
            self._mode = await shaping_mode(self._settings.model)
        mode, core = self._mode, self._core
        kwargs: dict[str, Any] = {}
        if core.no_tool_round and server_enforces_draft_schema(self._settings.model):
            kwargs = final_round_kwargs(
                core.ledger.evidence(), self._settings.budget.max_draft_bytes, self._settings.model.max_tokens
            )
        if mode == "off":
            return RoundRequest(kwargs)
        pending = core.ledger.pending.tool_call_id if core.ledger.pending else None
        strict = mode == "strict"
        if core.no_tool_round:
            # No call can come of them now: the last round's tools, unchanged, keep the server's cached
            # prompt valid up to the new messages (narrowed for a new pending ID, most of it is re-read).
            tools = self._last_tools or narrowed_tools(pending, self._settings.model.max_tokens, strict)
            return RoundRequest(kwargs, tools, tools_strict=strict or None)
        tools = self._last_tools = narrowed_tools(pending, self._settings.model.max_tokens, strict)
        if strict:
            return RoundRequest({"parallel_tool_calls": False}, tools, tools_strict=True)
        return RoundRequest(
            {"tool_choice": "required", "parallel_tool_calls": False, "stop": [TOOL_CALL_CLOSE]},
            tools,
            prefill=TOOL_CALL_OPEN,
        )


@functools.lru_cache(maxsize=256)
def narrowed_tools(pending: str | None, max_tokens: int, strict: bool) -> tuple[Any, ...]:
    """The frozen three with this round's parameters: the same names, descriptions and (never run)
    functions. Built once per pending ID and limit, so a round that repeats them sends the same objects."""
    from haystack.tools import Tool

    return tuple(
        Tool(
            name=frozen.name,
            description=frozen.description,
            parameters=round_tool_schema(frozen.name, pending, max_tokens, strict=strict),
            function=frozen.function,
        )
        for frozen in frozen_tools()
    )
