"""The Haystack hooks that wire DiagnosisHarnessCore into the one Agent.

Each hook reads the run's core from `state.data["hook_context"]` (not `state.get`, which deep-copies)
and is async-only: a sync hook would be run in a thread, outside the run's cancellation.
"""

from __future__ import annotations

from typing import Any

from haystack.components.agents.state.state import State
from haystack.hooks import BEFORE_LLM, BEFORE_TOOL, ON_EXIT, Hook, HookPoint

from agent.harness import DiagnosisHarnessCore

HARNESS_KEY = "harness"


def _core(state: State) -> DiagnosisHarnessCore:
    core: DiagnosisHarnessCore = state.data["hook_context"][HARNESS_KEY]
    return core


class _AsyncOnlyHook:
    def run(self, state: State) -> None:
        raise RuntimeError(f"{type(self).__name__} runs only inside Agent.run_async")

    def to_dict(self) -> dict[str, Any]:
        return {"type": f"{type(self).__module__}.{type(self).__qualname__}", "init_parameters": {}}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> _AsyncOnlyHook:
        return cls()


class ModelRoundGate(_AsyncOnlyHook):
    """before_llm: `DiagnosisHarnessCore.before_model_call` on every model round."""

    async def run_async(self, state: State) -> None:
        _core(state).before_model_call(state)


class ToolInterceptor(_AsyncOnlyHook):
    """before_tool: answers every pending call itself, so Haystack's own tool execution never runs."""

    async def run_async(self, state: State) -> None:
        await _core(state).handle_tool_round(state)


class RoundCloser(_AsyncOnlyHook):
    """on_exit: closes the final (text) round so its usage is recorded."""

    async def run_async(self, state: State) -> None:
        messages = state.data.get("messages") or []
        _core(state).close_model_round(messages[-1] if messages else None)


def harness_hooks() -> dict[HookPoint, list[Hook]]:
    return {BEFORE_LLM: [ModelRoundGate()], BEFORE_TOOL: [ToolInterceptor()], ON_EXIT: [RoundCloser()]}
