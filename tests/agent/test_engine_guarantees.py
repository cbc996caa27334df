"""Guarantees of the harness that no scenario file can show on its own: budgets that never reach the
chat generator, real cancellation, deadlines, ID-less tool calls, duplicates and run-byte capacity."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from audit import AuditSink, SqliteAuditStore
from tests.support import RecordingAdapter, harness, tool_messages_seen_by_model
from tests.support.audit_reader import AuditReader
from tests.support.waiting import wait_until
from tools.adapter import AdapterResult
from tools.vocabulary import EvidenceStatus


def _logs_call(call_id: str | None, previous: Any = None, service: str = "payment-service") -> dict[str, Any]:
    return {
        "id": call_id,
        "name": "query_logs",
        "arguments": {
            "previous_observation": previous,
            "input": {"service": service, "start": "2026-11-30T02:00:00Z", "end": "2026-11-30T03:00:00Z"},
        },
    }


NO_CONCLUSION = json.dumps(
    {
        "conclusion": None,
        "analysis": [],
        "action_plan": [],
        "recommendations": [],
        "limitations": {"checked_scope": [], "missing_info": ["context"]},
    }
)


async def test_exhausted_model_call_budget_never_reaches_the_chat_generator() -> None:
    rounds = [{"tool_calls": [_logs_call(f"c{i}", None, service=f"svc-{i}")]} for i in range(5)]
    h = harness(
        {"name": "spin", "query": "q", "settings": {"budget": {"max_model_calls": 2}}, "rounds": rounds},
        adapters={
            "query_logs": RecordingAdapter(lambda r: AdapterResult(EvidenceStatus.EMPTY, {"entries": []}))
        },
    )
    result = await h.run()
    assert (result.outcome, result.stop_reason) == ("BUDGET_EXHAUSTED", "MODEL_CALLS_EXHAUSTED")
    assert h.generator.calls == 2  # the refused third round never reached the generator
    assert result.usage.model_calls == 2
    # Round 2 was the final opportunity: its tool call did not execute.
    assert [e["tool_call_id"] for e in h.of_type("tool_started")] == ["c0"]
    budget_events = [e for e in h.of_type("budget_changed") if e["exhausted"]]
    assert budget_events[-1]["exhausted"] == "MODEL_CALLS_EXHAUSTED"


async def test_token_budget_refuses_the_round_before_the_generator() -> None:
    rounds = [
        {"tool_calls": [_logs_call("c1")], "usage": {"prompt_tokens": 900, "completion_tokens": 200}},
        {"text": NO_CONCLUSION},
    ]
    h = harness(
        {"name": "t", "query": "q", "settings": {"budget": {"max_total_tokens": 1000}}, "rounds": rounds},
        adapters={"query_logs": RecordingAdapter()},
    )
    result = await h.run()
    assert (result.outcome, result.stop_reason) == ("BUDGET_EXHAUSTED", "TOKENS_EXHAUSTED")
    assert h.generator.calls == 1
    assert result.usage.total_tokens == 1100


async def test_cancel_during_slow_tool_leaves_no_task_and_audits_cancelled(
    audit_store: SqliteAuditStore,
) -> None:
    store = audit_store
    slow = RecordingAdapter(delay_s=60)
    h = harness(
        {"name": "slow", "query": "q", "rounds": [{"tool_calls": [_logs_call("slow-1")]}]},
        adapters={"query_logs": slow},
        sinks=[AuditSink(store)],
    )
    before = asyncio.all_tasks()
    task = asyncio.create_task(h.run())
    await wait_until(lambda: slow.requests, "the slow tool call to start")
    h.use_case.cancel()
    result = await task
    assert (result.outcome, result.stop_reason) == ("CANCELLED", "CANCELLED")
    assert result.progress is not None
    assert result.draft is None
    assert slow.cancelled == 1
    await asyncio.sleep(0)
    assert asyncio.all_tasks() - before - {asyncio.current_task()} == set()
    committed = AuditReader(store.path)  # another connection: what is on disk, not what is queued
    invocations = committed.invocations(result.run_id)
    assert [(i["tool_call_id"], i["status"]) for i in invocations] == [("slow-1", "CANCELLED")]
    assert [r["outcome"] for r in committed.runs()] == ["CANCELLED"]


async def test_cancelling_the_caller_task_propagates_and_is_audited(audit_store: SqliteAuditStore) -> None:
    store = audit_store
    slow = RecordingAdapter(delay_s=60)
    h = harness(
        {"name": "slow", "query": "q", "rounds": [{"tool_calls": [_logs_call("slow-1")]}]},
        adapters={"query_logs": slow},
        sinks=[AuditSink(store)],
    )
    task = asyncio.create_task(h.run())
    await wait_until(lambda: slow.requests, "the slow tool call to start")
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
    else:  # pragma: no cover - the assertion below explains
        raise AssertionError("the caller's cancellation must propagate")
    finished = h.of_type("run_finished")[-1]
    assert finished["outcome"] == "CANCELLED"
    committed = AuditReader(store.path)
    assert [i["status"] for i in committed.invocations(finished["run_id"])] == ["CANCELLED"]


async def test_deadline_cancels_the_slow_tool_and_names_the_budget() -> None:
    slow = RecordingAdapter(delay_s=60)
    h = harness(
        {
            "name": "slow",
            "query": "q",
            "settings": {"budget": {"deadline_s": 0.3}},
            "rounds": [{"tool_calls": [_logs_call("slow-1")]}],
        },
        adapters={"query_logs": slow},
    )
    result = await h.run()
    assert (result.outcome, result.stop_reason) == ("BUDGET_EXHAUSTED", "DEADLINE_EXCEEDED")
    assert h.of_type("tool_finished")[-1]["status"] == "CANCELLED"


async def test_tool_call_without_id_gets_a_deterministic_id_used_everywhere() -> None:
    adapter = RecordingAdapter()
    h = harness(
        {
            "name": "noid",
            "query": "q",
            "rounds": [
                {"tool_calls": [_logs_call(None)]},
                {"text": NO_CONCLUSION},
            ],
        },
        adapters={"query_logs": adapter},
    )
    result = await h.run()
    assert result.outcome == "DRAFT"
    assert [r.tool_call_id for r in adapter.requests] == ["call-r1-1"]
    seen = tool_messages_seen_by_model(h.generator, 1)
    assert json.loads(seen[0].tool_call_result.result)["tool_call_id"] == "call-r1-1"
    assistant = [m for m in h.generator.received[1] if m.role.value == "assistant"][-1]
    assert [c.id for c in assistant.tool_calls] == ["call-r1-1"]


async def test_equivalent_repeated_call_does_not_run() -> None:
    adapter = RecordingAdapter()
    h = harness(
        {
            "name": "dup",
            "query": "q",
            "rounds": [
                {"tool_calls": [_logs_call("a")]},
                {"tool_calls": [_logs_call("b", {"tool_call_id": "a", "evaluation": "NO_GAIN"})]},
                {"text": NO_CONCLUSION},
            ],
        },
        adapters={"query_logs": adapter},
    )
    result = await h.run()
    assert result.outcome == "DRAFT"
    assert [r.tool_call_id for r in adapter.requests] == ["a"]
    observation = json.loads(tool_messages_seen_by_model(h.generator, 2)[-1].tool_call_result.result)
    assert observation == {
        "tool_call_id": "b",
        "tool": "query_logs",
        "evidence_status": "NOT_EXECUTED",
        "control": {"code": "DUPLICATE_CALL"},
    }


async def test_run_byte_capacity_stops_before_an_observation_is_sent() -> None:
    big = RecordingAdapter(lambda r: AdapterResult(EvidenceStatus.FOUND, {"rows": ["x" * 5000]}))
    h = harness(
        {
            "name": "bytes",
            "query": "q",
            "settings": {"budget": {"max_run_bytes": 3000}},
            "rounds": [
                {"tool_calls": [_logs_call("a")]},
                {"text": NO_CONCLUSION},
            ],
        },
        adapters={"query_logs": big},
    )
    result = await h.run()
    assert (result.outcome, result.stop_reason) == ("BUDGET_EXHAUSTED", "RUN_BYTES_EXHAUSTED")
    assert h.generator.calls == 1


async def test_model_facing_observations_never_show_counters_or_budget() -> None:
    h = harness(
        {
            "name": "x",
            "query": "q",
            "settings": {"protocol": {"max_consecutive_no_gain": 1}},
            "rounds": [
                {"tool_calls": [_logs_call("a")]},
                {"text": NO_CONCLUSION},
            ],
        },
        adapters={
            "query_logs": RecordingAdapter(lambda r: AdapterResult(EvidenceStatus.EMPTY, {"entries": []}))
        },
    )
    result = await h.run()
    assert result.stop_reason == "COMPLETED_AFTER_STOP_REQUIRED"
    text = tool_messages_seen_by_model(h.generator, 1)[0].tool_call_result.result
    observation = json.loads(text)
    assert observation["control"] == {"code": "STOP_REQUIRED"}
    for forbidden in ("consecutive", "threshold", "remaining", "violations", "max_", "budget"):
        assert forbidden not in text
