"""Shared builders for engine tests: a real DiagnosisUseCase around the real Haystack Agent.

Tests drive the agent with a scenario (scripted model); evidence comes either from the embedded demo
sources or from test adapters defined here. No test hand-writes the model/tool loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent.contracts import ExecutionResult
from agent.evidence import build_adapters
from agent.model.scripted import ScriptedChatGenerator
from agent.scenarios import Scenario, parse_scenario
from agent.settings import Settings, load_settings
from agent.use_case import DiagnosisUseCase
from tools.adapter import AdapterResult, EvidenceAdapter, ToolError, ToolRequest
from tools.boundary import ToolBoundary
from tools.vocabulary import EvidenceStatus

if TYPE_CHECKING:
    from haystack.hooks import Hook, HookPoint


@dataclass
class RecordingAdapter:
    """A test adapter: records every request it receives and answers from a function."""

    answer: Callable[[ToolRequest], AdapterResult] = lambda r: AdapterResult(
        EvidenceStatus.FOUND, {"rows": [{"v": 1}]}
    )
    delay_s: float = 0.0
    requests: list[ToolRequest] = field(default_factory=list)
    cancelled: int = 0

    async def execute(self, request: ToolRequest) -> AdapterResult:
        self.requests.append(request)
        try:
            if self.delay_s:
                await asyncio.sleep(self.delay_s)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        return self.answer(request)


def failing(code: str) -> Callable[[ToolRequest], AdapterResult]:
    def answer(_: ToolRequest) -> AdapterResult:
        raise ToolError(code)

    return answer


@dataclass
class Harnessed:
    use_case: DiagnosisUseCase
    generator: ScriptedChatGenerator
    events: list[dict[str, Any]]
    settings: Settings

    async def run(self, query: str | None = None, previous_turn: Any = None) -> ExecutionResult:
        return await self.use_case.execute(query if query is not None else self.scenario_query, previous_turn)

    scenario_query: str = ""

    def of_type(self, type_: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["type"] == type_]


def scenario_from(text_or_dict: str | dict[str, Any]) -> Scenario:
    if isinstance(text_or_dict, dict):
        return Scenario.model_validate(text_or_dict)
    return parse_scenario(text_or_dict)


def harness(
    scenario: Scenario | str | dict[str, Any],
    adapters: Mapping[str, EvidenceAdapter] | None = None,
    settings_overrides: dict[str, Any] | None = None,
    extra_hooks: dict[HookPoint, list[Hook]] | None = None,
    sinks: list[Callable[[Any], None]] | None = None,
    config_file: Path | None = None,
) -> Harnessed:
    """Build a use case for a scenario. `adapters=None` uses the embedded demo sources."""
    chosen = scenario if isinstance(scenario, Scenario) else scenario_from(scenario)
    overrides = {**chosen.settings}
    for section, values in (settings_overrides or {}).items():
        overrides[section] = {**overrides.get(section, {}), **values}
    settings = load_settings(config_file, overrides=overrides)
    events: list[dict[str, Any]] = []  # each event's JSON object, exactly as `--events` writes it
    generator = ScriptedChatGenerator(chosen.rounds)
    boundary = ToolBoundary(adapters if adapters is not None else build_adapters(settings))
    use_case = DiagnosisUseCase(
        settings,
        generator,
        boundary,
        model_label=f"scripted: {chosen.name}",
        sinks=[lambda event: events.append(event.to_wire()), *(sinks or [])],
        extra_hooks=extra_hooks,
    )
    h = Harnessed(use_case, generator, events, settings)
    h.scenario_query = chosen.query
    return h


def tool_messages_seen_by_model(generator: ScriptedChatGenerator, round_index: int) -> list[Any]:
    """The tool-result messages the model received in the given (0-based) round."""
    return [m for m in generator.received[round_index] if m.role.value == "tool"]
