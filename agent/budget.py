"""RunBudget: the hard limits of one run and what has been spent against them.

Budgets are checked before work, never after: a model round that would exceed a limit is refused
before it reaches the chat generator, and the exhausted budget is named in the result.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from agent.contracts import Usage
from agent.run_events import BudgetGauges, RunLimits, budget_gauges
from agent.settings import BudgetSettings
from agent.usage import RoundUsage
from agent.vocabulary import StopReason

# The stop reasons that are budgets (and so may be named by `budget_changed.exhausted`). Saturation
# and cancellation end runs too, but they are not budgets.
BUDGET_STOP_REASONS = frozenset(
    {
        StopReason.MODEL_CALLS_EXHAUSTED,
        StopReason.TOKENS_EXHAUSTED,
        StopReason.DEADLINE_EXCEEDED,
        StopReason.RUN_BYTES_EXHAUSTED,
    }
)


def limits_of(budget: BudgetSettings) -> RunLimits:
    """The limits a run starts with (`run_started.limits`), from the budget settings."""
    return RunLimits(
        max_model_calls=budget.max_model_calls,
        max_total_tokens=budget.max_total_tokens,
        deadline_s=budget.deadline_s,
        max_run_bytes=budget.max_run_bytes,
    )


def utf8_len(text: str) -> int:
    """UTF-8 size of `text`; raises UnicodeEncodeError on lone surrogates (not valid Unicode)."""
    return len(text.encode("utf-8"))


@dataclass
class RunBudget:
    limits: BudgetSettings
    clock: Callable[[], float] = time.monotonic
    started: float = field(init=False)
    model_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    run_bytes: int = 0
    usage_estimated: bool = False  # some round's usage was estimated, not reported

    def __post_init__(self) -> None:
        self.started = self.clock()

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def remaining_model_calls(self) -> int:
        return self.limits.max_model_calls - self.model_calls

    def elapsed_s(self) -> float:
        return self.clock() - self.started

    def remaining_s(self) -> float:
        return self.limits.deadline_s - self.elapsed_s()

    def exhausted_before_round(self) -> StopReason | None:
        """Which budget, if any, forbids starting another model round."""
        if self.remaining_s() <= 0:
            return StopReason.DEADLINE_EXCEEDED
        if self.model_calls >= self.limits.max_model_calls:
            return StopReason.MODEL_CALLS_EXHAUSTED
        if self.total_tokens >= self.limits.max_total_tokens:
            return StopReason.TOKENS_EXHAUSTED
        if self.run_bytes >= self.limits.max_run_bytes:
            return StopReason.RUN_BYTES_EXHAUSTED
        return None

    def exhausted_after_round(self) -> StopReason | None:
        """Which budget the model round that just returned has spent, so none of its tool calls may run.

        Model calls are not checked here: the round itself was permitted. Run bytes are charged per
        observation as the calls are answered.
        """
        if self.remaining_s() <= 0:
            return StopReason.DEADLINE_EXCEEDED
        if self.total_tokens >= self.limits.max_total_tokens:
            return StopReason.TOKENS_EXHAUSTED
        return None

    def record_usage(self, usage: RoundUsage) -> None:
        self.prompt_tokens += max(0, usage.prompt_tokens)
        self.completion_tokens += max(0, usage.completion_tokens)
        self.usage_estimated = self.usage_estimated or usage.estimated

    def try_charge_bytes(self, n: int) -> bool:
        """Charge model-facing bytes; refuse (and charge nothing) if the run capacity would be exceeded."""
        if self.run_bytes + n > self.limits.max_run_bytes:
            return False
        self.run_bytes += n
        return True

    def usage(self) -> Usage:
        return Usage(
            model_calls=self.model_calls,
            prompt_tokens=self.prompt_tokens,
            completion_tokens=self.completion_tokens,
            total_tokens=self.total_tokens,
        )

    def gauge(self) -> BudgetGauges:
        """Operator-facing view for `budget_changed` events (never shown to the model)."""
        return budget_gauges(
            limits_of(self.limits),
            model_calls=self.model_calls,
            tokens=self.total_tokens,
            tokens_estimated=self.usage_estimated,
            run_bytes=self.run_bytes,
            elapsed_s=round(self.elapsed_s(), 3),
        )
