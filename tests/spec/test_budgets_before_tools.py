"""Spec rule: cancellation, deadline, model-call or token exhaustion SHALL prevent subsequent controlled work.

A model round's usage is recorded the moment the round returns; before ANY tool call of that round
runs, the harness checks cancellation, the deadline and the token budget again. Calls that do not
run are answered with the stop, are never invoked and never audited as invocations, and the run ends
with the budget (or cancellation) that stopped it. `budget_changed.exhausted` names budgets only.
"""

from __future__ import annotations

from typing import Any

from agent.scenarios import resolve_scenario
from agent.vocabulary import StopReason
from audit import AuditSink, SqliteAuditStore
from tests.support import RecordingAdapter, harness
from tests.support.audit_reader import AuditReader
from tests.support.spec_scenarios import (
    LOG_DATA,
    NULL_DRAFT,
    call,
    found,
    logs_input,
    scenario,
    text_round,
    tools_round,
)

BUDGET_STOP_REASONS = {
    StopReason.MODEL_CALLS_EXHAUSTED,
    StopReason.TOKENS_EXHAUSTED,
    StopReason.DEADLINE_EXCEEDED,
    StopReason.RUN_BYTES_EXHAUSTED,
}


class _BeforeToolsHook:
    """An injected before_tool observer (it runs before the harness interceptor) that changes the run
    between the model's reply and its tool calls, the way a late cancel or a slow reply does."""

    def __init__(self, action: str) -> None:
        self.action = action

    def run(self, state: Any) -> None:
        raise AssertionError("hooks run only inside Agent.run_async")

    async def run_async(self, state: Any) -> None:
        ctx = state.data["hook_context"]["run_context"]
        if self.action == "cancel":
            ctx.cancel()  # the flag and a real task cancel, delivered at the next await
        elif self.action == "deadline":
            # The reply arrived just after the deadline (the run's own timer has not fired yet).
            ctx.budget.started -= ctx.budget.limits.deadline_s + 1

    def to_dict(self) -> dict[str, Any]:
        return {"type": f"{__name__}._BeforeToolsHook", "init_parameters": {"action": self.action}}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> _BeforeToolsHook:
        return cls(**data["init_parameters"])


async def test_token_exhaustion_prevents_the_tool_calls_of_the_same_round(
    audit_store: SqliteAuditStore,
) -> None:
    logs = RecordingAdapter(answer=found(LOG_DATA))
    h = harness(
        scenario(
            tools_round(
                call("t-01", "query_logs", logs_input(level="ERROR")),
                call("t-02", "query_logs", logs_input("api-gateway")),
                prompt=950,
                completion=60,
            ),
            text_round(NULL_DRAFT),
            settings={"budget": {"max_total_tokens": 1000}},
        ),
        adapters={"query_logs": logs},
        sinks=[AuditSink(audit_store)],
    )

    result = await h.run()
    invocations = AuditReader(audit_store).invocations(result.run_id)

    assert (result.outcome, result.stop_reason) == ("BUDGET_EXHAUSTED", "TOKENS_EXHAUSTED")
    assert logs.requests == []  # no adapter ran for the round that spent the budget
    assert h.of_type("tool_started") == []
    assert invocations == []
    assert result.progress is not None
    assert result.progress.checks == []
    assert h.generator.calls == 1
    assert result.usage.total_tokens == 1010
    assert h.of_type("budget_changed")[-1]["exhausted"] == "TOKENS_EXHAUSTED"


async def test_builtin_token_budget_exhausted_scenario_runs_no_tool_of_the_exhausting_round(
    audit_store: SqliteAuditStore,
) -> None:
    h = harness(resolve_scenario("token-budget-exhausted"), sinks=[AuditSink(audit_store)])

    result = await h.run()
    invocations = AuditReader(audit_store).invocations(result.run_id)

    assert (result.outcome, result.stop_reason) == ("BUDGET_EXHAUSTED", "TOKENS_EXHAUSTED")
    # Round 1 (4,000 tokens) ran call-1; round 2 spent the 6,000-token budget, so call-2 never ran.
    assert [(i["tool_call_id"], i["status"]) for i in invocations] == [("call-1", "FOUND")]
    assert [e["tool_call_id"] for e in h.of_type("tool_started")] == ["call-1"]
    assert [(c.tool_call_id, c.evidence_status) for c in result.progress.checks] == [  # type: ignore[union-attr]
        ("call-1", "FOUND")
    ]


async def test_deadline_passed_during_a_model_round_prevents_its_tool_calls() -> None:
    logs = RecordingAdapter(answer=found(LOG_DATA))
    h = harness(
        scenario(tools_round(call("t-01", "query_logs", logs_input())), text_round(NULL_DRAFT)),
        adapters={"query_logs": logs},
        extra_hooks={"before_tool": [_BeforeToolsHook("deadline")]},
    )

    result = await h.run()

    assert (result.outcome, result.stop_reason) == ("BUDGET_EXHAUSTED", "DEADLINE_EXCEEDED")
    assert logs.requests == []
    assert h.of_type("tool_started") == []
    assert h.generator.calls == 1
    assert h.of_type("budget_changed")[-1]["exhausted"] == "DEADLINE_EXCEEDED"


async def test_cancel_during_a_model_round_prevents_its_tool_calls(audit_store: SqliteAuditStore) -> None:
    logs = RecordingAdapter(answer=found(LOG_DATA))
    h = harness(
        scenario(tools_round(call("t-01", "query_logs", logs_input())), text_round(NULL_DRAFT)),
        adapters={"query_logs": logs},
        extra_hooks={"before_tool": [_BeforeToolsHook("cancel")]},
        sinks=[AuditSink(audit_store)],
    )

    result = await h.run()
    invocations = AuditReader(audit_store).invocations(result.run_id)

    assert (result.outcome, result.stop_reason) == ("CANCELLED", "CANCELLED")
    assert logs.requests == []
    assert h.of_type("tool_started") == []
    assert invocations == []
    assert h.generator.calls == 1


async def test_budget_changed_exhausted_names_only_budgets() -> None:
    """Saturation and cancellation end runs too, but they are protocol events, not budgets."""
    for name, stop_reason in (
        ("stop-required-ignored", "INFORMATION_SATURATED"),
        ("protocol-violations-saturate", "PROGRESS_PROTOCOL_VIOLATED"),
        ("model-call-budget-exhausted", "MODEL_CALLS_EXHAUSTED"),
        ("token-budget-exhausted", "TOKENS_EXHAUSTED"),
    ):
        h = harness(resolve_scenario(name))

        result = await h.run()

        assert result.stop_reason == stop_reason
        exhausted = [e["exhausted"] for e in h.of_type("budget_changed") if e["exhausted"] is not None]
        assert set(exhausted) <= BUDGET_STOP_REASONS, (name, exhausted)
        assert (stop_reason in exhausted) == (stop_reason in BUDGET_STOP_REASONS), name
