"""Spec rule: model response Usage SHALL be recorded into the Run budget, and Token exhaustion SHALL
prevent subsequent controlled work — also when the provider reports no usable usage.

A provider that omits usage, reports only `total_tokens`, or reports garbage must not switch the token
budget off: missing counts are estimated from the UTF-8 bytes sent and received (1 token per 3 bytes,
rounded up), the round is marked `usage_estimated` in its event, in the audit and in the gauge, and no
usage shape crashes the run.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from agent.haystack_tools import frozen_tools
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
)


def _size(text: str | None) -> int:
    return len((text or "").encode("utf-8"))


def _tool_definitions_size() -> int:
    return sum(
        _size(
            json.dumps(
                {"name": t.name, "description": t.description, "parameters": t.parameters},
                ensure_ascii=False,
                separators=(",", ":"),
            )
        )
        for t in frozen_tools()
    )


def _round(*calls: dict[str, Any], text: str | None = None, usage: Any = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"tool_calls": list(calls), "text": text}
    if usage is not None:
        spec["usage"] = usage
    return spec


class ProviderUsage:
    """A chat generator whose provider reports `usage` exactly as given (any shape) on every reply."""

    def __init__(self, inner: Any, usage: Any) -> None:
        self.inner = inner
        self.usage = usage

    async def run_async(self, messages: Any, tools: Any = None, **kwargs: Any) -> dict[str, Any]:
        result: dict[str, Any] = await self.inner.run_async(messages=messages, tools=tools, **kwargs)
        for reply in result["replies"]:
            reply.meta.pop("usage", None)
            if self.usage != "absent":
                reply.meta["usage"] = self.usage
        return result


async def test_a_provider_without_usage_still_exhausts_the_token_budget() -> None:
    """No usage at all: round 1's prompt alone (system prompt, query, tool definitions) is estimated."""
    logs = RecordingAdapter(answer=found(LOG_DATA))
    h = harness(
        scenario(
            _round(call("t-01", "query_logs", logs_input())),
            _round(text=NULL_DRAFT),
            settings={"budget": {"max_total_tokens": 1200}},
        ),
        adapters={"query_logs": logs},
    )

    result = await h.run()

    assert (result.outcome, result.stop_reason) == ("BUDGET_EXHAUSTED", "TOKENS_EXHAUSTED")
    assert logs.requests == []
    assert h.generator.calls == 1
    sent = sum(_size(m.text) for m in h.generator.received[0]) + _tool_definitions_size()
    reply = h.generator.rounds[0].tool_calls[0]
    arguments = json.dumps(reply.arguments, ensure_ascii=False, separators=(",", ":"))
    received = _size(reply.name) + _size(reply.id) + _size(arguments)
    [finished] = h.of_type("model_round_finished")
    assert finished["usage_estimated"] is True
    assert finished["prompt_tokens"] == math.ceil(sent / 3) > 1200
    assert finished["completion_tokens"] == math.ceil(received / 3)
    assert result.usage.total_tokens == finished["prompt_tokens"] + finished["completion_tokens"]
    assert h.of_type("budget_changed")[-1]["tokens"]["estimated"] is True


async def test_usage_with_only_total_tokens_counts_the_total() -> None:
    logs = RecordingAdapter(answer=found(LOG_DATA))
    h = harness(
        scenario(
            _round(call("t-01", "query_logs", logs_input()), usage={"total_tokens": 1500}),
            _round(text=NULL_DRAFT, usage={"total_tokens": 10}),
            settings={"budget": {"max_total_tokens": 1000}},
        ),
        adapters={"query_logs": logs},
    )

    result = await h.run()

    assert (result.outcome, result.stop_reason) == ("BUDGET_EXHAUSTED", "TOKENS_EXHAUSTED")
    assert logs.requests == []
    assert result.usage.total_tokens == 1500  # the reported total is kept; only its split is estimated
    [finished] = h.of_type("model_round_finished")
    assert finished["prompt_tokens"] + finished["completion_tokens"] == 1500
    assert finished["usage_estimated"] is True


async def test_partial_usage_estimates_only_the_missing_count() -> None:
    h = harness(
        scenario(_round(text=NULL_DRAFT, usage={"prompt_tokens": 900})),
    )

    result = await h.run()

    assert (result.outcome, result.stop_reason) == ("DRAFT", "COMPLETED")
    [finished] = h.of_type("model_round_finished")
    assert finished["prompt_tokens"] == 900
    assert finished["completion_tokens"] == math.ceil(_size(NULL_DRAFT) / 3)
    assert finished["usage_estimated"] is True


async def test_reported_usage_is_not_marked_estimated(audit_store: SqliteAuditStore) -> None:
    h = harness(
        scenario(
            _round(
                call("t-01", "query_logs", logs_input()),
                usage={"prompt_tokens": 700, "completion_tokens": 30},
            ),
            _round(text=NULL_DRAFT),  # this provider forgot usage on its last reply
        ),
        adapters={"query_logs": RecordingAdapter(answer=found(LOG_DATA))},
        sinks=[AuditSink(audit_store)],
    )

    result = await h.run()
    rounds = AuditReader(audit_store).model_rounds(result.run_id)

    assert result.outcome == "DRAFT"
    assert [e["usage_estimated"] for e in h.of_type("model_round_finished")] == [False, True]
    assert [(r["round"], r["prompt_tokens"], r["usage_estimated"]) for r in rounds] == [
        (1, 700, 0),
        (2, rounds[1]["prompt_tokens"], 1),
    ]
    assert rounds[1]["prompt_tokens"] > 700  # round 2 resends everything round 1 sent, and more
    gauges = [e["tokens"]["estimated"] for e in h.of_type("budget_changed")]
    assert gauges[0] is False
    assert gauges[-1] is True


@pytest.mark.parametrize(
    "usage",
    [
        pytest.param("absent", id="absent"),
        pytest.param(None, id="null"),
        pytest.param("812 tokens", id="string"),
        pytest.param([812, 64], id="list"),
        pytest.param({"prompt_tokens": "812", "completion_tokens": "64"}, id="numeric-strings"),
        pytest.param({"prompt_tokens": -812, "completion_tokens": -64}, id="negative"),
        pytest.param({"prompt_tokens": {"cached": 3}, "completion_tokens": [64]}, id="nested"),
        pytest.param({"prompt_tokens": 10**40, "completion_tokens": 2**63}, id="huge-ints"),
        pytest.param({"prompt_tokens": True, "completion_tokens": False}, id="bools"),
        pytest.param({"prompt_tokens": float("inf"), "completion_tokens": float("nan")}, id="non-finite"),
        pytest.param({"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}, id="all-zero"),
    ],
)
async def test_no_usage_shape_crashes_the_run_and_unusable_usage_is_estimated(
    usage: Any,
    audit_store: SqliteAuditStore,
) -> None:
    logs = RecordingAdapter(answer=found(LOG_DATA))
    h = harness(
        scenario(
            _round(call("t-01", "query_logs", logs_input())),
            _round(text=NULL_DRAFT),
        ),
        adapters={"query_logs": logs},
        sinks=[AuditSink(audit_store)],
    )
    h.use_case.chat_generator = ProviderUsage(h.generator, usage)

    result = await h.run()
    rounds = AuditReader(audit_store).model_rounds(result.run_id)

    assert (result.outcome, result.stop_reason) == ("DRAFT", "COMPLETED")
    assert len(logs.requests) == 1
    finished = h.of_type("model_round_finished")
    assert [e["usage_estimated"] for e in finished] == [True, True]
    assert all(0 < e["prompt_tokens"] < 100_000 and e["completion_tokens"] > 0 for e in finished)
    assert result.usage.total_tokens == sum(e["prompt_tokens"] + e["completion_tokens"] for e in finished)
    assert [r["usage_estimated"] for r in rounds] == [1, 1]
