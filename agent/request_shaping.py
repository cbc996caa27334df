"""What each model round asks of the server, beyond the Agent's messages (`[model] request_shaping`).

The Agent sends the same request on every round; a run knows more about each round than that:
- **the final completion opportunity** (no tool may be called): with `structured_output = "auto"`,
  the run's Draft schema and `tool_choice: "none"` (agent.draft_schema);
- **a round where a tool may be called**, under a shaping mode (agent.server_kind resolves "auto"):
  - "llama.cpp": one tool call OR the Draft, held by the server's grammar (agent.call_or_draft): the
    tool schemas narrowed for this round (agent.tool_round_schema) and the run's Draft schema as
    the branches of one `response_format`. Measured on llama.cpp's server: a small model left free
    writes prose or repeats calls until `max_tokens`, and one forced to call cannot stop, so a query
    without context cost forced calls until saturation; held to "a call or the Draft", every reply
    is one the run can take up, and the model may stop at once (the spec's zero-call stop);
  - "strict": the narrowed schemas as strict functions (`strict: true`, every property required) and
    `parallel_tool_calls: false` (strict schemas do not hold for parallel calls); the model still
    chooses between a call and its answer. OpenAI and vLLM constrain such calls (by their
    documentation; not measured here); llama.cpp holds a call to them once the model writes one;
  - "off": nothing beyond the frozen definitions.
Whenever a mode is on, every round carries narrowed schemas: they change only when the pending
observation does, and the final round repeats the last tool round's, so a server's cached prompt
prefix stays valid as long as it can (the tools are rendered before the conversation). The names,
descriptions and tools the Agent registers stay the frozen three; the harness still judges every call.
The Draft bounds of the last schema sent (`draft_bounds`) are what the Result reports as reached.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agent.call_or_draft import call_or_draft_kwargs
from agent.draft_rules import DraftBounds, run_bounds
from agent.draft_schema import final_round_kwargs, run_draft_schema
from agent.haystack_tools import frozen_tools
from agent.models import server_enforces_draft_schema
from agent.server_kind import ShapingMode, shaping_mode
from agent.tool_round_schema import round_tool_schema

if TYPE_CHECKING:
    from agent.harness import DiagnosisHarnessCore
    from agent.settings import Settings


@dataclass(frozen=True)
class RoundRequest:
    """One round's additions: generation kwargs merged over the generator's own, the tools to send
    instead of the Agent's (same names, narrower parameters), and whether a call may come back as the
    reply's text (agent.call_or_draft)."""

    generation_kwargs: dict[str, Any] = field(default_factory=dict)
    tools: tuple[Any, ...] | None = None
    tools_strict: bool | None = None
    calls_in_text: bool = False


class RoundShaper:
    """One per run: reads the run's state when the round is sent (after `before_llm` gated it)."""

    def __init__(self, settings: Settings, core: DiagnosisHarnessCore) -> None:
        self._settings = settings
        self._core = core
        self._mode: ShapingMode | None = None
        # The tools the last tool round sent: the final round sends them again (see below).
        self._last_tools: tuple[Any, ...] | None = None
        # The bounds of the Draft schema the last round sent, None when it sent none.
        self.draft_bounds: DraftBounds | None = None

    async def request(self) -> RoundRequest:
        if self._mode is None:
            self._mode = await shaping_mode(self._settings.model)
        mode, core, model = self._mode, self._core, self._settings.model
        evidence, max_draft_bytes = core.ledger.evidence(), self._settings.budget.max_draft_bytes
        self.draft_bounds = None
        kwargs: dict[str, Any] = {}
        if core.no_tool_round and server_enforces_draft_schema(model):
            kwargs = final_round_kwargs(evidence, max_draft_bytes, model.max_tokens)
            self.draft_bounds = run_bounds(max_draft_bytes, evidence, model.max_tokens)
        if mode == "off":
            return RoundRequest(kwargs)
        pending = core.ledger.pending.tool_call_id if core.ledger.pending else None
        strict = mode == "strict"
        if core.no_tool_round:
            # No call can come of them now: the last round's tools, unchanged, keep the server's cached
            # prompt valid up to the new messages (narrowed for a new pending ID, most of it is re-read).
            tools = self._last_tools or narrowed_tools(pending, model.max_tokens, strict)
            return RoundRequest(kwargs, tools, tools_strict=strict or None)
        tools = self._last_tools = narrowed_tools(pending, model.max_tokens, strict)
        if strict:
            return RoundRequest({"parallel_tool_calls": False}, tools, tools_strict=True)
        draft = run_draft_schema(evidence, max_draft_bytes, model.max_tokens)
        self.draft_bounds = run_bounds(max_draft_bytes, evidence, model.max_tokens)
        return RoundRequest(call_or_draft_kwargs(tools, draft), tools, calls_in_text=True)


@functools.lru_cache(maxsize=256)
def narrowed_tools(pending: str | None, max_tokens: int, strict: bool) -> tuple[Any, ...]:
    """The frozen three with this round's parameters: the same names, descriptions and (never run)
    functions. Built once per pending ID and limit, so a round that repeats them sends the same objects."""
    from haystack.tools.tool import Tool

    return tuple(
        Tool(
            name=frozen.name,
            description=frozen.description,
            parameters=round_tool_schema(frozen.name, pending, max_tokens, strict=strict),
            function=frozen.function,
        )
        for frozen in frozen_tools()
    )
