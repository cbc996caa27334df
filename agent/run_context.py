"""RunContext: identity, budget and cancellation of one run, handed explicitly to every hook."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field
from typing import Any

from agent.budget import RunBudget


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


@dataclass
class RunContext:
    session_id: str
    run_id: str
    budget: RunBudget
    _cancel_requested: bool = field(default=False, init=False)
    _task: asyncio.Task[Any] | None = field(default=None, init=False, repr=False)

    @property
    def cancel_requested(self) -> bool:
        return self._cancel_requested

    def attach(self, task: asyncio.Task[Any]) -> None:
        self._task = task

    def cancel(self) -> None:
        """Cancel for real: the running agent task (model call or tool) is cancelled, not just flagged."""
        self._cancel_requested = True
        if self._task is not None and not self._task.done():
            self._task.cancel()
