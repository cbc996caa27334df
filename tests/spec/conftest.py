"""Fixtures of the spec tests."""

from __future__ import annotations

import functools
from typing import Any

import pytest
from haystack.components.agents import Agent


@pytest.fixture
def agent_runs(monkeypatch: pytest.MonkeyPatch) -> list[Agent]:
    """Every `Agent.run_async` call, with the Agent it ran on (proves one Agent, one invocation)."""
    runs: list[Agent] = []
    original = Agent.run_async

    @functools.wraps(original)  # Haystack checks that run and run_async have the same signature
    async def counting(self: Agent, *args: Any, **kwargs: Any) -> dict[str, Any]:
        runs.append(self)
        return await original(self, *args, **kwargs)

    monkeypatch.setattr(Agent, "run_async", counting)
    return runs
