"""Every "#### Scenario:" of the requirements spec (spec/000_650979927b54eb69.txt), end to end.

Each test drives the real Haystack Agent through `DiagnosisUseCase` with a scripted model whose
scenario is written inline here (own tool call IDs, queries and data), and evidence from either the
embedded demo sources or `RecordingAdapter`s. Assertions are on what users and the model see: the
ExecutionResult, the exact observation JSON of the next round, what the adapter received, how often
the model was called, and the run events.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from haystack.components.agents import Agent

from agent.contracts import PreviousTurn
from audit import AuditSink, AuditStore
from tests.support import (
    Harnessed,
    RecordingAdapter,
    failing,
    harness,
    tool_messages_seen_by_model,
)
from tools.adapter import AdapterResult, ToolError, ToolRequest
from tools.definitions import TOOL_NAMES, LookupKnowledgeInput, QueryLogsInput

REPO = Path(__file__).resolve().parents[1]
QUERY = "2026-11-30 02:00-03:00 UTC payment-service 支付大量超时（POST /api/v1/payments 504），请诊断。"
WINDOW = {"start": "2026-11-30T02:00:00Z", "end": "2026-11-30T03:00:00Z"}
STOP_REQUIRED = {"code": "STOP_REQUIRED"}
OBSERVATION_KEYS = {
    "tool_call_id",
    "tool",
    "evidence_status",
    "data",
    "evaluation_required",
    "error_code",
    "reason",
    "control",
}
CONTROL_KEYS = {"code", "missing_field", "invalid_field", "expected_tool_call_id"}


# ---------------------------------------------------------------------------------------- builders
def call(
    call_id: str | None,
    name: str,
    business: dict[str, Any],
    previous: Any = None,
    *,
    omit_previous: bool = False,
) -> dict[str, Any]:
    arguments: dict[str, Any] = {"input": business}
    if not omit_previous:
        arguments = {"previous_observation": previous, "input": business}
    spec: dict[str, Any] = {"name": name, "arguments": arguments}
    if call_id is not None:
        spec["id"] = call_id
    return spec


def evaluated(tool_call_id: str, evaluation: str = "GAINED") -> dict[str, str]:
    return {"tool_call_id": tool_call_id, "evaluation": evaluation}


def logs_input(service: str = "payment-service", **extra: Any) -> dict[str, Any]:
    return {"service": service, **WINDOW, **extra}


def tools_round(*calls: dict[str, Any], prompt: int = 100, completion: int = 10) -> dict[str, Any]:
    return {"tool_calls": list(calls), "usage": {"prompt_tokens": prompt, "completion_tokens": completion}}


def text_round(text: str | None, prompt: int = 200, completion: int = 50) -> dict[str, Any]:
    return {"text": text, "usage": {"prompt_tokens": prompt, "completion_tokens": completion}}


def draft(
    conclusion: str | None = None,
    analysis: list[dict[str, Any]] | None = None,
    *,
    action_plan: list[str] | None = None,
    recommendations: list[str] | None = None,
    checked: list[str] | None = None,
    missing: list[str] | None = None,
) -> dict[str, Any]:
    return {
        "conclusion": conclusion,
        "analysis": analysis or [],
        "action_plan": action_plan or [],
        "recommendations": recommendations or [],
        "limitations": {"checked_scope": checked or [], "missing_info": missing or []},
    }


def finding(statement: str, *ids: str) -> dict[str, Any]:
    return {"kind": "FINDING", "statement": statement, "evidence": list(ids)}


def as_text(value: dict[str, Any]) -> str:
    return json.dumps(value, ensure_ascii=False)


NULL_DRAFT = as_text(draft(missing=["未收集到证据"]))


def scenario(
    *rounds: dict[str, Any], settings: dict[str, Any] | None = None, query: str = QUERY
) -> dict[str, Any]:
    return {"name": "inline", "query": query, "settings": settings or {}, "rounds": list(rounds)}


def found(data: dict[str, Any]) -> Callable[[ToolRequest], AdapterResult]:
    return lambda _request: AdapterResult("FOUND", data)


def empty() -> Callable[[ToolRequest], AdapterResult]:
    return lambda _request: AdapterResult("EMPTY", {"entries": [], "returned": 0})


LOG_DATA = {
    "entries": [
        {
            "ts": "2026-11-30T02:11:00Z",
            "service": "payment-service",
            "level": "ERROR",
            "message": "HikariPool-1 - Connection is not available",
        }
    ],
    "returned": 1,
}
DOC_DATA = {
    "documents": [
        {"title": "支付超时 runbook", "source": "payment.md", "snippet": "连接池耗尽", "score": 1.5}
    ],
    "returned": 1,
}


# ---------------------------------------------------------------------------------------- views
def seen(h: Harnessed, round_index: int) -> list[dict[str, Any]]:
    """Every tool observation (parsed JSON) in the messages the model received in that 0-based round."""
    observations = [
        json.loads(m.tool_call_result.result) for m in tool_messages_seen_by_model(h.generator, round_index)
    ]
    for obs in observations:
        assert_model_safe(obs)
    return observations


def assert_model_safe(obs: dict[str, Any]) -> None:
    """The model never sees counters, thresholds, remaining budget, lifecycle internals or raw text."""
    assert set(obs) <= OBSERVATION_KEYS, obs
    if obs.get("control") is not None:
        assert set(obs["control"]) <= CONTROL_KEYS, obs
    outside_data = {k: v for k, v in obs.items() if k != "data"}
    text = json.dumps(outside_data)
    assert not any(
        ch.isdigit()
        for ch in json.dumps({k: v for k, v in outside_data.items() if k not in ("tool_call_id", "control")})
    )
    for word in (
        "consecutive",
        "threshold",
        "max_",
        "remaining",
        "budget",
        "violations",
        "Traceback",
        "Exception",
        "STARTED",
    ):
        assert word not in text, obs


def last_user_text(h: Harnessed, round_index: int) -> str:
    return h.generator.received[round_index][-1].text


def checks(result: Any) -> list[tuple[str, str, str | None]]:
    assert result.progress is not None
    return [(c.tool_call_id, c.evidence_status, c.evaluation) for c in result.progress.checks]


def protocol_codes(h: Harnessed) -> list[tuple[str, str | None]]:
    return [(e["code"], e["tool_call_id"]) for e in h.of_type("protocol_changed")]


def started_tools(h: Harnessed) -> list[tuple[str, str]]:
    return [(e["tool_call_id"], e["tool"]) for e in h.of_type("tool_started")]


def assert_single_finish(h: Harnessed, result: Any) -> None:
    finished = h.of_type("run_finished")
    assert len(finished) == 1
    assert finished[0]["result"] == result.to_json_dict()
    assert {(e["run_id"], e["session_id"]) for e in h.events} == {(result.run_id, result.session_id)}
    assert [e["seq"] for e in h.events] == list(range(1, len(h.events) + 1))


async def run_python(args: list[str], home: Path | None = None) -> tuple[int, str, str]:
    """Run a fresh interpreter in the repository (no state shared with this test process)."""
    env = {**os.environ}
    env.pop("DIAGNOSE_CONFIG", None)
    if home is not None:
        env.update(HOME=str(home), XDG_STATE_HOME=str(home / "state"))
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        *args,
        cwd=REPO,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout=120)
    return process.returncode or 0, out.decode(), err.decode()


@pytest.fixture
def agent_runs(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Agent]]:
    """Every `Agent.run_async` call, with the Agent it ran on (proves one Agent, one invocation)."""
    runs: list[Agent] = []
    original = Agent.run_async

    @functools.wraps(original)  # Haystack checks that run and run_async have the same signature
    async def counting(self: Agent, *args: Any, **kwargs: Any) -> dict[str, Any]:
        runs.append(self)
        return await original(self, *args, **kwargs)

    monkeypatch.setattr(Agent, "run_async", counting)
    yield runs


class RecordingHook:
    """An injected Haystack hook (the 'existing AgentStep hook'): records the RunContext it observes."""

    def __init__(self, point: str, seen_by_hook: list[tuple[str, str, str]]) -> None:
        self.point = point
        self.seen_by_hook = seen_by_hook

    def run(self, state: Any) -> None:
        raise AssertionError("hooks run only inside Agent.run_async")

    async def run_async(self, state: Any) -> None:
        ctx = state.data["hook_context"]["run_context"]
        self.seen_by_hook.append((self.point, ctx.session_id, ctx.run_id))

    def to_dict(self) -> dict[str, Any]:
        return {"type": f"{__name__}.RecordingHook", "init_parameters": {"point": self.point}}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RecordingHook:
        return cls(data["init_parameters"]["point"], [])


class ExplodingHook:
    """A framework hook failing with an exception unrelated to stop, cancellation or budget."""

    SECRET = "internal detail: dsn=mysql://admin:hunter2@db-7"

    def __init__(self, on_call: int = 1) -> None:
        self.on_call = on_call
        self.calls = 0

    def run(self, state: Any) -> None:
        raise AssertionError("hooks run only inside Agent.run_async")

    async def run_async(self, state: Any) -> None:
        self.calls += 1
        if self.calls == self.on_call:
            raise RuntimeError(self.SECRET)

    def to_dict(self) -> dict[str, Any]:
        return {"type": f"{__name__}.ExplodingHook", "init_parameters": {"on_call": self.on_call}}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ExplodingHook:
        return cls(**data["init_parameters"])


# =============================================================================================
# Requirement: Diagnosis execution SHALL use one framework ReactAgent
# =============================================================================================
async def test_diagnosis_needs_tool_evidence(agent_runs: list[Agent]) -> None:
    final = draft(
        "payment-service 数据库连接池 HikariPool-1 耗尽导致支付超时。",
        [
            finding("payment-service 在 02:10Z 后持续报 HikariPool-1 连接获取超时。", "logs-02"),
            finding("runbook 将该症状归因于连接池耗尽。", "kb-01"),
        ],
        action_plan=["检查长事务与锁等待"],
        checked=["runbook 检索", "payment-service 02:00-03:00Z ERROR 日志"],
    )
    h = harness(
        scenario(
            tools_round(
                call(
                    "kb-01",
                    "lookup_knowledge",
                    {"query": "payment-service 支付超时 连接池耗尽 HikariPool", "top_k": 2},
                )
            ),
            tools_round(
                call(
                    "logs-02",
                    "query_logs",
                    logs_input(level="ERROR", contains="HikariPool-1", limit=5),
                    evaluated("kb-01"),
                )
            ),
            text_round(as_text(final)),
        )
    )

    result = await h.run()

    assert (result.outcome, result.stop_reason, result.failure) == ("DRAFT", "COMPLETED", None)
    assert result.draft is not None and result.draft.model_dump(mode="json") == final
    # One Agent, invoked once, holding exactly the three frozen tools and the scripted model.
    assert len(agent_runs) == 1
    assert [t.name for t in agent_runs[0].tools] == list(TOOL_NAMES)
    assert agent_runs[0].chat_generator.inner is h.generator  # wrapped only to classify model errors
    assert h.generator.calls == 3 and len(h.generator.received) == 3
    # The framework loop carried the tool actions: the final round sees the whole ReAct transcript.
    assert [m.role.value for m in h.generator.received[2]] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
    ]
    kb, logs = seen(h, 2)
    assert kb == seen(h, 1)[0]
    assert kb["tool_call_id"] == "kb-01" and kb["evidence_status"] == "FOUND"
    assert kb["evaluation_required"] is True and kb["control"] is None
    assert kb["data"]["documents"] and len(kb["data"]["documents"]) <= 2
    assert logs["tool_call_id"] == "logs-02" and logs["evidence_status"] == "FOUND"
    assert {e["message"] for e in logs["data"]["entries"]} == {
        "HikariPool-1 - Connection is not available, request timed out after 30000ms"
    }
    assert started_tools(h) == [("kb-01", "lookup_knowledge"), ("logs-02", "query_logs")]
    assert checks(result) == [("kb-01", "FOUND", "GAINED"), ("logs-02", "FOUND", None)]
    assert len(h.of_type("run_started")) == 1
    assert_single_finish(h, result)


async def test_agent_execution_fails(agent_runs: list[Agent]) -> None:
    """The model call throws (the script has no second round): fail closed, no retry of anything."""
    logs = RecordingAdapter(answer=found(LOG_DATA))
    h = harness(
        scenario(tools_round(call("t-01", "query_logs", logs_input(level="ERROR")))),
        adapters={"query_logs": logs},
    )

    result = await h.run()

    assert (result.outcome, result.stop_reason, result.draft) == ("FAILED", "MODEL_ERROR", None)
    assert result.to_json_dict()["failure"] == {"code": "MODEL_ERROR", "detail": "ScriptExhausted"}
    # Exactly one attempt at round 2 (it raised): no second attempt, no second Agent.
    assert len(h.generator.received) == 2 and h.generator.calls == 1
    assert len(agent_runs) == 1
    assert [r.tool_call_id for r in logs.requests] == ["t-01"]
    assert result.usage.model_calls == 2
    # The one completed check is the only progress published.
    assert checks(result) == [("t-01", "FOUND", None)]
    assert_single_finish(h, result)


async def test_agent_execution_fails_with_invalid_structured_output(agent_runs: list[Agent]) -> None:
    logs = RecordingAdapter(answer=found(LOG_DATA))
    h = harness(
        scenario(
            tools_round(call("t-01", "query_logs", logs_input(level="ERROR"))),
            text_round("诊断结论：payment-service 连接池耗尽（见 t-01）。"),
            text_round(as_text(draft(missing=["spare round that must never be requested"]))),
        ),
        adapters={"query_logs": logs},
    )

    result = await h.run()

    assert (result.outcome, result.stop_reason, result.draft) == ("FAILED", "INVALID_DRAFT", None)
    assert result.to_json_dict()["failure"] == {"code": "INVALID_DRAFT", "violation": "NOT_A_JSON_OBJECT"}
    assert h.generator.calls == 2 and len(h.generator.received) == 2
    assert len(agent_runs) == 1
    assert len(logs.requests) == 1
    assert_single_finish(h, result)


async def test_agent_execution_fails_before_any_check_publishes_no_progress() -> None:
    """A second run on the same use case finds the script exhausted at its first round."""
    h = harness(scenario(text_round(NULL_DRAFT)))
    first = await h.run()
    assert first.outcome == "DRAFT"

    second = await h.run()

    assert (second.outcome, second.stop_reason) == ("FAILED", "MODEL_ERROR")
    assert second.progress is None and second.draft is None
    assert second.run_id != first.run_id and second.session_id == first.session_id
    assert len(h.generator.received) == 2 and h.generator.calls == 1


# =============================================================================================
# Requirement: Diagnosis input SHALL contain only current Query and optional PreviousTurn
# =============================================================================================
async def test_follow_up_diagnosis_has_a_safe_previous_turn() -> None:
    first_query = "2026-11-30 02:00-03:00 UTC payment-service 超时，请诊断。"
    follow_up = "回滚到 v2.13.4 之后还有超时吗？"
    first_draft = draft(
        "payment-service 连接池耗尽。",
        [finding("日志显示连接获取超时。", "kb-1")],
        checked=["runbook"],
        missing=["数据库锁等待详情"],
    )
    kb = RecordingAdapter(answer=found(DOC_DATA))
    h = harness(
        scenario(
            tools_round(call("kb-1", "lookup_knowledge", {"query": "支付超时 连接池"})),
            text_round(as_text(first_draft)),
            text_round(as_text(draft(checked=[], missing=["回滚后的时间窗口"]))),
        ),
        adapters={"lookup_knowledge": kb},
    )
    first = await h.run(first_query)
    assert first.outcome == "DRAFT" and first.draft is not None
    previous = PreviousTurn(
        query=first_query, conclusion=first.draft.conclusion, limitations=first.draft.limitations
    )

    second = await h.run(follow_up, previous)

    assert (second.outcome, second.stop_reason) == ("DRAFT", "COMPLETED")
    assert second.session_id == first.session_id and second.run_id != first.run_id
    round_one = h.generator.received[2]
    # Exactly the system prompt and one user message: no history, no prior tool call or result.
    assert [m.role.value for m in round_one] == ["system", "user"]
    assert round_one[0].text == h.generator.received[0][0].text
    expected_turn = {
        "query": first_query,
        "conclusion": "payment-service 连接池耗尽。",
        "limitations": {"checked_scope": ["runbook"], "missing_info": ["数据库锁等待详情"]},
    }
    assert round_one[1].text == json.dumps(
        {"query": follow_up, "previous_turn": expected_turn}, ensure_ascii=False, separators=(",", ":")
    )
    transcript = " ".join(m.text or "" for m in round_one)
    assert "kb-1" not in transcript and "支付超时 runbook" not in transcript
    assert first_draft["analysis"][0]["statement"] not in transcript
    started = [e for e in h.of_type("run_started") if e["run_id"] == second.run_id]
    assert started[0]["previous_turn"] == expected_turn and started[0]["query"] == follow_up


async def test_follow_up_diagnosis_cannot_cite_previous_run_evidence() -> None:
    kb = RecordingAdapter(answer=found(DOC_DATA))
    h = harness(
        scenario(
            tools_round(call("kb-1", "lookup_knowledge", {"query": "支付超时 连接池"})),
            text_round(as_text(draft("连接池耗尽。", [finding("runbook 命中。", "kb-1")]))),
            text_round(as_text(draft("连接池耗尽。", [finding("上一轮的证据。", "kb-1")]))),
        ),
        adapters={"lookup_knowledge": kb},
    )
    first = await h.run()
    assert first.outcome == "DRAFT"

    second = await h.run(
        "还在超时吗？",
        {
            "query": QUERY,
            "conclusion": "连接池耗尽。",
            "limitations": {"checked_scope": [], "missing_info": []},
        },
    )

    assert (second.outcome, second.stop_reason) == ("FAILED", "INVALID_DRAFT")
    assert second.failure is not None and second.failure.violation == "UNKNOWN_CITATION"
    assert second.progress is None and second.draft is None


@pytest.mark.parametrize(
    "previous_turn",
    [
        pytest.param(
            {
                "query": "上一轮",
                "conclusion": None,
                "limitations": {"checked_scope": [], "missing_info": []},
                "messages": [{"role": "tool", "content": "raw tool result"}],
            },
            id="history-attached",
        ),
        pytest.param(
            {
                "query": "上一轮",
                "conclusion": None,
                "limitations": {"checked_scope": [], "missing_info": []},
                "tool_results": ["raw"],
            },
            id="raw-tool-results",
        ),
        pytest.param({"query": "上一轮", "conclusion": None}, id="no-limitations"),
        pytest.param(
            {"query": "", "conclusion": None, "limitations": {"checked_scope": [], "missing_info": []}},
            id="blank-query",
        ),
        pytest.param(
            {"query": "上一轮", "conclusion": 42, "limitations": {"checked_scope": [], "missing_info": []}},
            id="conclusion-not-text",
        ),
        pytest.param("上一轮的完整对话记录……", id="free-text-summary"),
    ],
)
async def test_follow_up_diagnosis_rejects_anything_but_a_frozen_previous_turn(previous_turn: Any) -> None:
    h = harness(scenario(text_round(NULL_DRAFT)))

    result = await h.run(QUERY, previous_turn)

    assert (result.outcome, result.stop_reason) == ("REJECTED", "PREVIOUS_TURN_INVALID")
    assert result.failure is not None and result.failure.code == "PREVIOUS_TURN_INVALID"
    assert h.generator.calls == 0 and h.generator.received == []
    assert [e["type"] for e in h.events] == ["run_finished"]


async def test_follow_up_diagnosis_rejects_an_oversized_previous_turn() -> None:
    turn = {
        "query": "上一轮",
        "conclusion": "结" * 100,
        "limitations": {"checked_scope": [], "missing_info": []},
    }
    h = harness(
        scenario(text_round(NULL_DRAFT)), settings_overrides={"budget": {"max_previous_turn_bytes": 300}}
    )

    result = await h.run(QUERY, turn)

    assert (result.outcome, result.stop_reason) == ("REJECTED", "PREVIOUS_TURN_TOO_LARGE")
    assert h.generator.calls == 0 and h.generator.received == []


async def test_query_exceeds_configured_context_budget() -> None:
    query = "支付超时请诊断原因谢谢你们啊"  # 14 characters, 42 UTF-8 bytes
    assert len(query) < 40 < len(query.encode())
    h = harness(scenario(text_round(NULL_DRAFT)), settings_overrides={"budget": {"max_query_bytes": 40}})

    result = await h.run(query)

    assert (result.outcome, result.stop_reason) == ("REJECTED", "QUERY_TOO_LARGE")
    assert result.failure is not None and result.failure.code == "QUERY_TOO_LARGE"
    assert result.draft is None and result.progress is None
    assert result.usage.model_dump() == {
        "model_calls": 0,
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "total_tokens": 0,
    }
    assert h.generator.calls == 0 and h.generator.received == []
    assert [e["type"] for e in h.events] == ["run_finished"]
    assert result.exit_code == 2


async def test_query_at_the_byte_limit_reaches_the_model_verbatim() -> None:
    query = "  支付超时请诊断原因谢谢你 \n"  # 40 UTF-8 bytes, surrounding whitespace included
    assert len(query.encode()) == 40
    h = harness(scenario(text_round(NULL_DRAFT)), settings_overrides={"budget": {"max_query_bytes": 40}})

    result = await h.run(query)

    assert result.outcome == "DRAFT"
    assert json.loads(h.generator.received[0][1].text) == {"query": query, "previous_turn": None}
    assert h.of_type("run_started")[0]["query"] == query


@pytest.mark.parametrize("query", ["", "   ", "\n\t "])
async def test_blank_query_is_rejected_before_any_model_call(query: str) -> None:
    h = harness(scenario(text_round(NULL_DRAFT)))

    result = await h.run(query)

    assert (result.outcome, result.stop_reason) == ("REJECTED", "QUERY_BLANK")
    assert h.generator.calls == 0 and h.generator.received == []


async def test_query_and_previous_turn_beyond_the_input_budget_are_rejected() -> None:
    turn = {
        "query": "上一轮" * 20,
        "conclusion": None,
        "limitations": {"checked_scope": [], "missing_info": []},
    }
    h = harness(
        scenario(text_round(NULL_DRAFT)),
        settings_overrides={
            "budget": {"max_query_bytes": 200, "max_previous_turn_bytes": 400, "max_input_bytes": 300}
        },
    )

    result = await h.run("支付超时" * 10, turn)

    assert (result.outcome, result.stop_reason) == ("REJECTED", "INPUT_TOO_LARGE")
    assert h.generator.calls == 0


async def test_query_that_is_not_utf8_encodable_is_rejected_not_crashed() -> None:
    h = harness(scenario(text_round(NULL_DRAFT)))

    result = await h.run("payment-service 超时 \udcff")

    assert result.outcome == "REJECTED"
    assert h.generator.calls == 0


# =============================================================================================
# Requirement: Every model round SHALL be controlled by RunContext
# =============================================================================================
async def test_react_performs_two_model_rounds() -> None:
    logs = RecordingAdapter(answer=found(LOG_DATA))
    h = harness(
        scenario(
            tools_round(call("t-01", "query_logs", logs_input(level="ERROR")), prompt=700, completion=30),
            text_round(
                as_text(draft("连接池耗尽。", [finding("连接获取超时。", "t-01")])),
                prompt=900,
                completion=120,
            ),
        ),
        adapters={"query_logs": logs},
    )

    result = await h.run()

    assert (result.outcome, result.stop_reason) == ("DRAFT", "COMPLETED")
    assert result.usage.model_dump() == {
        "model_calls": 2,
        "prompt_tokens": 1600,
        "completion_tokens": 150,
        "total_tokens": 1750,
    }
    assert h.generator.calls == 2 and len(h.generator.received) == 2
    assert [e["round"] for e in h.of_type("model_round_started")] == [1, 2]
    assert [
        (e["round"], e["prompt_tokens"], e["completion_tokens"], e["tool_call_ids"], e["has_text"])
        for e in h.of_type("model_round_finished")
    ] == [(1, 700, 30, ["t-01"], False), (2, 900, 120, [], True)]
    gauge = h.of_type("budget_changed")[-1]
    assert gauge["model_calls"] == {"used": 2, "limit": 8}
    assert gauge["tokens"]["used"] == 1750 and gauge["exhausted"] is None
    assert len(logs.requests) == 1


async def test_model_call_budget_is_exhausted() -> None:
    kb = RecordingAdapter(answer=found(DOC_DATA))
    logs = RecordingAdapter(answer=found(LOG_DATA))
    h = harness(
        scenario(
            tools_round(call("t-01", "lookup_knowledge", {"query": "支付失败率升高"})),
            tools_round(call("t-02", "query_logs", logs_input(level="ERROR"), evaluated("t-01"))),
            text_round(as_text(draft(missing=["spare round that must never be requested"]))),
            settings={"budget": {"max_model_calls": 2}},
        ),
        adapters={"lookup_knowledge": kb, "query_logs": logs},
    )

    result = await h.run()

    assert (result.outcome, result.stop_reason) == ("BUDGET_EXHAUSTED", "MODEL_CALLS_EXHAUSTED")
    assert result.draft is None and result.failure is None and result.exit_code == 11
    # Before the last permitted round the model was told to stop, with nothing else in that message.
    assert last_user_text(h, 1) == '{"control":{"code":"STOP_REQUIRED"}}'
    assert h.generator.received[1][-1].role.value == "user"
    # The model asked for a tool anyway: nothing executed and no further round reached the model.
    assert h.generator.calls == 2 and len(h.generator.received) == 2
    assert [r.tool_call_id for r in kb.requests] == ["t-01"] and logs.requests == []
    assert started_tools(h) == [("t-01", "lookup_knowledge")]
    assert result.usage.model_calls == 2
    assert [e["round"] for e in h.of_type("model_round_started")] == [1, 2]
    assert checks(result) == [("t-01", "FOUND", None)]
    assert result.progress is not None and result.progress.stop_required is True
    assert result.progress.saturation is None
    assert ("COLLECTION_STOPPED", None) in protocol_codes(h)
    assert h.of_type("budget_changed")[-1]["exhausted"] == "MODEL_CALLS_EXHAUSTED"
    assert_single_finish(h, result)


async def test_model_call_budget_is_exhausted_by_tokens() -> None:
    logs = RecordingAdapter(answer=found(LOG_DATA))
    h = harness(
        scenario(
            tools_round(call("t-01", "query_logs", logs_input(level="ERROR")), prompt=950, completion=50),
            text_round(NULL_DRAFT),
            settings={"budget": {"max_total_tokens": 1000}},
        ),
        adapters={"query_logs": logs},
    )

    result = await h.run()

    assert (result.outcome, result.stop_reason) == ("BUDGET_EXHAUSTED", "TOKENS_EXHAUSTED")
    # The refused round never reached the chat generator.
    assert h.generator.calls == 1 and len(h.generator.received) == 1
    assert result.usage.model_dump() == {
        "model_calls": 1,
        "prompt_tokens": 950,
        "completion_tokens": 50,
        "total_tokens": 1000,
    }
    assert [e["round"] for e in h.of_type("model_round_started")] == [1]
    assert checks(result) == [("t-01", "FOUND", None)]
    assert result.draft is None


# =============================================================================================
# Requirement: Evidence Tools SHALL execute through the Harness boundary
# =============================================================================================
async def test_framework_requests_first_rag_evidence() -> None:
    kb = RecordingAdapter(answer=found(DOC_DATA))
    h = harness(
        scenario(
            tools_round(
                call("rag-7", "lookup_knowledge", {"query": "网关 504 upstream timeout", "top_k": 2})
            ),
            text_round(as_text(draft("上游超时。", [finding("runbook 描述了 504 的上游超时。", "rag-7")]))),
        ),
        adapters={"lookup_knowledge": kb},
    )

    result = await h.run()

    assert (result.outcome, result.stop_reason) == ("DRAFT", "COMPLETED")
    [request] = kb.requests
    assert request.tool_call_id == "rag-7" and request.tool == "lookup_knowledge"
    assert request.run_id == result.run_id and request.session_id == result.session_id
    assert request.session_id == h.use_case.session_id
    # Only the unwrapped business input: no envelope, no previous_observation.
    assert isinstance(request.input, LookupKnowledgeInput)
    assert request.input.model_dump() == {"query": "网关 504 upstream timeout", "top_k": 2}
    assert [(e["run_id"], e["tool_call_id"], e["input"]) for e in h.of_type("tool_started")] == [
        (result.run_id, "rag-7", {"query": "网关 504 upstream timeout", "top_k": 2})
    ]
    assert seen(h, 1) == [
        {
            "tool_call_id": "rag-7",
            "tool": "lookup_knowledge",
            "evidence_status": "FOUND",
            "data": DOC_DATA,
            "evaluation_required": True,
            "control": None,
        }
    ]
    assert checks(result) == [("rag-7", "FOUND", None)]


async def test_framework_requests_first_rag_evidence_without_a_call_id() -> None:
    """A provider that sends no tool call ID gets one deterministic ID shared by model, adapter and audit."""
    kb = RecordingAdapter(answer=found(DOC_DATA))
    h = harness(
        scenario(tools_round(call(None, "lookup_knowledge", {"query": "支付超时"})), text_round(NULL_DRAFT)),
        adapters={"lookup_knowledge": kb},
    )

    result = await h.run()

    assert result.outcome == "DRAFT"
    [request] = kb.requests
    assigned = request.tool_call_id
    assert assigned
    assert [c.id for c in h.generator.received[1][2].tool_calls] == [assigned]
    assert [o["tool_call_id"] for o in seen(h, 1)] == [assigned]
    assert started_tools(h) == [(assigned, "lookup_knowledge")]


async def test_model_continues_after_a_non_empty_result() -> None:
    logs = RecordingAdapter(answer=found(LOG_DATA))
    h = harness(
        scenario(
            tools_round(call("t-01", "query_logs", logs_input(level="ERROR"))),
            tools_round(call("t-02", "query_logs", logs_input("api-gateway"), evaluated("t-01", "GAINED"))),
            tools_round(
                call("t-03", "query_logs", logs_input("order-service"), evaluated("t-02", "NO_GAIN"))
            ),
            text_round(as_text(draft("连接池耗尽。", [finding("支付服务日志。", "t-01")]))),
        ),
        adapters={"query_logs": logs},
    )

    result = await h.run()

    assert (result.outcome, result.stop_reason) == ("DRAFT", "COMPLETED")
    assert [(r.tool_call_id, r.input.service) for r in logs.requests] == [  # type: ignore[attr-defined]
        ("t-01", "payment-service"),
        ("t-02", "api-gateway"),
        ("t-03", "order-service"),
    ]
    assert all(isinstance(r.input, QueryLogsInput) for r in logs.requests)
    assert checks(result) == [
        ("t-01", "FOUND", "GAINED"),
        ("t-02", "FOUND", "NO_GAIN"),
        ("t-03", "FOUND", None),
    ]
    assert [o["control"] for o in seen(h, 3)] == [None, None, None]
    recorded = [e["detail"] for e in h.of_type("protocol_changed") if e["code"] == "EVALUATION_RECORDED"]
    assert recorded == [
        {"evaluated_tool_call_id": "t-01", "evaluation": "GAINED"},
        {"evaluated_tool_call_id": "t-02", "evaluation": "NO_GAIN"},
    ]


@pytest.mark.parametrize(
    ("previous", "invalid_field"),
    [
        pytest.param(evaluated("t-99"), "previous_observation.tool_call_id", id="other-call"),
        pytest.param(evaluated("t-01", "MAYBE"), "previous_observation.evaluation", id="bad-evaluation"),
        pytest.param({"tool_call_id": "t-01"}, "previous_observation.evaluation", id="no-evaluation"),
        pytest.param({**evaluated("t-01"), "confidence": 0.9}, "previous_observation", id="extra-key"),
        pytest.param("t-01 GAINED", "previous_observation", id="not-an-object"),
    ],
)
async def test_model_continues_after_a_non_empty_result_only_with_an_exact_evaluation(
    previous: Any, invalid_field: str
) -> None:
    logs = RecordingAdapter(answer=found(LOG_DATA))
    h = harness(
        scenario(
            tools_round(call("t-01", "query_logs", logs_input(level="ERROR"))),
            tools_round(call("t-02", "query_logs", logs_input("api-gateway"), previous)),
            text_round(NULL_DRAFT),
        ),
        adapters={"query_logs": logs},
    )

    result = await h.run()

    assert [r.tool_call_id for r in logs.requests] == ["t-01"]
    assert seen(h, 2)[1] == {
        "tool_call_id": "t-02",
        "tool": "query_logs",
        "evidence_status": "NOT_EXECUTED",
        "control": {
            "code": "INVALID_PROGRESS_PROTOCOL",
            "invalid_field": invalid_field,
            "expected_tool_call_id": "t-01",
        },
    }
    assert checks(result) == [("t-01", "FOUND", None)]
    assert result.outcome == "DRAFT"


async def test_model_continues_after_an_empty_result_without_evaluating_it() -> None:
    logs = RecordingAdapter(answer=empty())
    h = harness(
        scenario(
            tools_round(call("t-01", "query_logs", logs_input(level="ERROR"))),
            tools_round(call("t-02", "query_logs", logs_input("api-gateway"))),
            text_round(NULL_DRAFT),
        ),
        adapters={"query_logs": logs},
    )

    result = await h.run()

    assert [r.tool_call_id for r in logs.requests] == ["t-01", "t-02"]
    assert seen(h, 1) == [
        {"tool_call_id": "t-01", "tool": "query_logs", "evidence_status": "EMPTY", "control": None}
    ]
    assert checks(result) == [("t-01", "EMPTY", None), ("t-02", "EMPTY", None)]


@pytest.mark.parametrize("omit_previous", [True, False], ids=["field-absent", "field-null"])
async def test_model_omits_required_progress_field(omit_previous: bool) -> None:
    logs = RecordingAdapter(answer=found(LOG_DATA))
    h = harness(
        scenario(
            tools_round(call("t-01", "query_logs", logs_input(level="ERROR"))),
            tools_round(
                call("t-02", "query_logs", logs_input("api-gateway"), None, omit_previous=omit_previous)
            ),
            tools_round(call("t-03", "query_logs", logs_input("api-gateway"), evaluated("t-01"))),
            text_round(
                as_text(
                    draft("连接池耗尽。", [finding("支付服务日志。", "t-01"), finding("网关日志。", "t-03")])
                )
            ),
        ),
        adapters={"query_logs": logs},
    )

    result = await h.run()

    repair = {
        "tool_call_id": "t-02",
        "tool": "query_logs",
        "evidence_status": "NOT_EXECUTED",
        "control": {
            "code": "INVALID_PROGRESS_PROTOCOL",
            "missing_field": "previous_observation",
            "expected_tool_call_id": "t-01",
        },
    }
    assert seen(h, 2)[1] == repair
    # The business tool did not run for t-02; the repaired call t-03 did, with its own ID.
    assert [r.tool_call_id for r in logs.requests] == ["t-01", "t-03"]
    assert started_tools(h) == [("t-01", "query_logs"), ("t-03", "query_logs")]
    assert ("INVALID_PROGRESS_PROTOCOL", "t-02") in protocol_codes(h)
    assert (result.outcome, result.stop_reason) == ("DRAFT", "COMPLETED")
    assert checks(result) == [("t-01", "FOUND", "GAINED"), ("t-03", "FOUND", None)]


async def test_model_omits_required_progress_field_and_cannot_cite_the_unexecuted_call() -> None:
    logs = RecordingAdapter(answer=found(LOG_DATA))
    h = harness(
        scenario(
            tools_round(call("t-01", "query_logs", logs_input(level="ERROR"))),
            tools_round(call("t-02", "query_logs", logs_input("api-gateway"), omit_previous=True)),
            text_round(as_text(draft("网关超时。", [finding("网关日志。", "t-02")]))),
        ),
        adapters={"query_logs": logs},
    )

    result = await h.run()

    assert (result.outcome, result.stop_reason) == ("FAILED", "INVALID_DRAFT")
    assert result.failure is not None and result.failure.violation == "UNKNOWN_CITATION"


async def test_tool_execution_fails() -> None:
    logs = RecordingAdapter(answer=failing("TIMEOUT"))
    final = draft(
        None,
        [
            {
                "kind": "NEGATIVE_OBSERVATION",
                "statement": "日志查询超时，未能确认。",
                "scope": "payment-service 02:00-03:00Z",
                "evidence": ["t-01"],
            }
        ],
        checked=["payment-service 日志（超时）"],
        missing=["日志内容"],
    )
    h = harness(
        scenario(
            tools_round(call("t-01", "query_logs", logs_input(level="ERROR"))),
            text_round(as_text(final)),
        ),
        adapters={"query_logs": logs},
    )

    result = await h.run()

    assert seen(h, 1) == [
        {
            "tool_call_id": "t-01",
            "tool": "query_logs",
            "evidence_status": "ERROR",
            "error_code": "TIMEOUT",
            "control": None,
        }
    ]
    assert len(logs.requests) == 1  # no automatic retry
    assert h.generator.calls == 2
    [finished] = h.of_type("tool_finished")
    assert (finished["tool_call_id"], finished["status"], finished["error_code"]) == (
        "t-01",
        "ERROR",
        "TIMEOUT",
    )
    assert (result.outcome, result.stop_reason) == ("DRAFT", "COMPLETED")
    assert result.draft is not None and result.draft.model_dump(mode="json") == final
    assert checks(result) == [("t-01", "ERROR", None)]


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        pytest.param(failing("UNAVAILABLE"), {"error_code": "UNAVAILABLE"}, id="tool-error"),
        pytest.param(
            lambda _r: (_ for _ in ()).throw(ToolError("POLICY_REJECTED", "WRITE_STATEMENT")),
            {"error_code": "POLICY_REJECTED", "reason": "WRITE_STATEMENT"},
            id="tool-error-reason",
        ),
        pytest.param(
            lambda _r: (_ for _ in ()).throw(ConnectionError("mysql://admin:s3cr3t@db-7 refused")),
            {"error_code": "BACKEND_ERROR"},
            id="raw-exception",
        ),
    ],
)
async def test_tool_execution_fails_with_only_a_stable_code(
    answer: Callable[[ToolRequest], AdapterResult], expected: dict[str, str]
) -> None:
    mysql = RecordingAdapter(answer=answer)
    h = harness(
        scenario(
            tools_round(
                call(
                    "db-1", "query_mysql", {"sql": "SELECT id FROM payments LIMIT 5", "database": "payments"}
                )
            ),
            text_round(NULL_DRAFT),
        ),
        adapters={"query_mysql": mysql},
    )

    result = await h.run()

    assert seen(h, 1) == [
        {
            "tool_call_id": "db-1",
            "tool": "query_mysql",
            "evidence_status": "ERROR",
            **expected,
            "control": None,
        }
    ]
    assert len(mysql.requests) == 1
    assert "s3cr3t" not in json.dumps(h.events, ensure_ascii=False)
    assert result.outcome == "DRAFT"


async def test_tool_execution_fails_when_mysql_is_not_configured() -> None:
    """Embedded defaults: query_mysql has no adapter, so the boundary answers UNAVAILABLE."""
    h = harness(
        scenario(
            tools_round(call("db-1", "query_mysql", {"sql": "SELECT 1", "database": None})),
            tools_round(call("db-2", "query_mysql", {"sql": "SELECT 1", "database": None})),
            text_round(NULL_DRAFT),
        )
    )

    result = await h.run()

    assert seen(h, 1) == [
        {
            "tool_call_id": "db-1",
            "tool": "query_mysql",
            "evidence_status": "ERROR",
            "error_code": "UNAVAILABLE",
            "control": None,
        }
    ]
    # The model repeating the failed call is not a retry either: it is refused as an equivalent call.
    assert seen(h, 2)[1] == {
        "tool_call_id": "db-2",
        "tool": "query_mysql",
        "evidence_status": "NOT_EXECUTED",
        "control": {"code": "DUPLICATE_CALL"},
    }
    assert started_tools(h) == [("db-1", "query_mysql")]
    assert checks(result) == [("db-1", "ERROR", None)]


async def test_unknown_tool_is_requested() -> None:
    adapters = {name: RecordingAdapter() for name in TOOL_NAMES}
    h = harness(
        scenario(
            tools_round(call("x-1", "restart_service", {"service": "payment-service"})),
            text_round(as_text(draft(action_plan=["诊断助手不能重启服务"], missing=["尚未收集证据"]))),
        ),
        adapters=adapters,
    )  # type: ignore[arg-type]

    result = await h.run()

    [observation] = seen(h, 1)
    assert observation == {
        "tool_call_id": "x-1",
        "tool": "restart_service",
        "evidence_status": "NOT_EXECUTED",
        "control": {"code": "UNKNOWN_TOOL"},
    }
    raw = tool_messages_seen_by_model(h.generator, 1)[0].tool_call_result.result
    assert not any(name in raw for name in TOOL_NAMES)  # the tool list is not leaked
    assert all(adapter.requests == [] for adapter in adapters.values())
    assert h.of_type("tool_started") == [] and h.of_type("tool_finished") == []
    assert ("UNKNOWN_TOOL", "x-1") in protocol_codes(h)
    assert (result.outcome, result.stop_reason) == ("DRAFT", "COMPLETED")
    assert checks(result) == []


async def test_unknown_tool_is_requested_between_registered_tools() -> None:
    logs = RecordingAdapter(answer=found(LOG_DATA))
    kb = RecordingAdapter(answer=found(DOC_DATA))
    h = harness(
        scenario(
            tools_round(
                call("t-1", "query_logs", logs_input(level="ERROR")),
                call("x-2", "run_shell", {"cmd": "kubectl rollout restart"}),
                call("t-3", "lookup_knowledge", {"query": "支付超时"}),
            ),
            text_round(
                as_text(draft("连接池耗尽。", [finding("日志。", "t-1"), finding("重启结果。", "x-2")]))
            ),
        ),
        adapters={"query_logs": logs, "lookup_knowledge": kb},
    )

    result = await h.run()

    # Results come back in call order, the unknown one answered by the harness itself.
    assert [(o["tool_call_id"], o["evidence_status"], o["control"]) for o in seen(h, 1)] == [
        ("t-1", "FOUND", None),
        ("x-2", "NOT_EXECUTED", {"code": "UNKNOWN_TOOL"}),
        ("t-3", "FOUND", None),
    ]
    assert started_tools(h) == [("t-1", "query_logs"), ("t-3", "lookup_knowledge")]
    # No canonical evidence record exists for the unknown tool: citing it fails the Draft.
    assert (result.outcome, result.stop_reason) == ("FAILED", "INVALID_DRAFT")
    assert result.failure is not None and result.failure.violation == "UNKNOWN_CITATION"
    assert checks(result) == [("t-1", "FOUND", None), ("t-3", "FOUND", None)]


# =============================================================================================
# Requirement: Diagnosis output SHALL be a bounded DiagnosisDraft
# =============================================================================================
async def test_supported_draft_is_returned() -> None:
    ids = ["call_AbC-09:x", "调用-日志-2"]
    final = {
        "conclusion": "payment-service v2.14.0 发布后连接池耗尽。",
        "analysis": [
            {"kind": "FINDING", "statement": "runbook 指向连接池耗尽。", "evidence": [ids[0]]},
            {
                "kind": "FINDING",
                "statement": "ERROR 日志持续出现连接获取超时。",
                "evidence": [ids[1], ids[0]],
                "scope": "payment-service 02:00-03:00Z",
            },
            {
                "kind": "NEGATIVE_OBSERVATION",
                "statement": "未查询数据库锁等待。",
                "scope": "MySQL payments 库",
                "evidence": "NO_EVIDENCE",
            },
        ],
        "action_plan": ["回滚到 v2.13.4", "观察 HikariPool-1 等待线程"],
        "recommendations": ["复盘事务边界"],
        "limitations": {
            "checked_scope": ["runbook", "payment-service ERROR 日志"],
            "missing_info": ["锁等待详情"],
        },
    }
    kb = RecordingAdapter(answer=found(DOC_DATA))
    logs = RecordingAdapter(answer=found(LOG_DATA))
    h = harness(
        scenario(
            tools_round(call(ids[0], "lookup_knowledge", {"query": "支付超时"})),
            tools_round(call(ids[1], "query_logs", logs_input(level="ERROR"), evaluated(ids[0]))),
            text_round(json.dumps(final, ensure_ascii=False, indent=2)),
        ),
        adapters={"lookup_knowledge": kb, "query_logs": logs},
    )

    result = await h.run()

    assert (result.outcome, result.stop_reason, result.failure) == ("DRAFT", "COMPLETED", None)
    assert result.draft is not None
    assert result.draft.model_dump(mode="json") == final
    assert result.to_json_dict()["draft"] == final
    assert [item.evidence for item in result.draft.analysis] == [[ids[0]], [ids[1], ids[0]], "NO_EVIDENCE"]
    assert [r.tool_call_id for r in kb.requests + logs.requests] == ids
    assert result.exit_code == 0


async def test_supported_draft_at_the_byte_limit_is_returned_and_one_byte_more_fails() -> None:
    text = as_text(draft(checked=["范围"], missing=["x"]))
    limit = len(text.encode())
    ok = harness(scenario(text_round(text)), settings_overrides={"budget": {"max_draft_bytes": limit}})
    too_large = harness(
        scenario(text_round(text)), settings_overrides={"budget": {"max_draft_bytes": limit - 1}}
    )

    accepted = await ok.run()
    rejected = await too_large.run()

    assert (accepted.outcome, accepted.stop_reason) == ("DRAFT", "COMPLETED")
    assert (rejected.outcome, rejected.stop_reason, rejected.draft) == ("FAILED", "DRAFT_TOO_LARGE", None)
    assert rejected.to_json_dict()["failure"] == {"code": "DRAFT_TOO_LARGE", "violation": "DRAFT_TOO_LARGE"}
    assert too_large.generator.calls == 1


@pytest.mark.parametrize(
    ("wrap", "violation"),
    [
        pytest.param(lambda j: f"```json\n{j}\n```", "NOT_A_JSON_OBJECT", id="markdown-fence"),
        pytest.param(lambda j: f"以下是诊断结果：\n{j}", "NOT_A_JSON_OBJECT", id="explanatory-prefix"),
        pytest.param(lambda j: f"Here is the draft: {j}", "NOT_A_JSON_OBJECT", id="english-prefix"),
        pytest.param(lambda j: f"{j}\n以上是我的诊断。", "MALFORMED_JSON", id="explanatory-suffix"),
        pytest.param(lambda j: f"{j}\n```", "MALFORMED_JSON", id="trailing-fence"),
    ],
)
async def test_model_returns_prose_around_json(
    wrap: Callable[[str], str], violation: str, agent_runs: list[Agent]
) -> None:
    valid = as_text(draft("连接池耗尽。", [finding("连接获取超时。", "t-01")]))
    logs = RecordingAdapter(answer=found(LOG_DATA))
    h = harness(
        scenario(
            tools_round(call("t-01", "query_logs", logs_input(level="ERROR"))),
            text_round(wrap(valid)),
            text_round(valid),  # a "second chance" that must never be requested
        ),
        adapters={"query_logs": logs},
    )

    result = await h.run()

    assert (result.outcome, result.stop_reason, result.draft) == ("FAILED", "INVALID_DRAFT", None)
    assert result.to_json_dict()["failure"] == {"code": "INVALID_DRAFT", "violation": violation}
    assert h.generator.calls == 2 and len(h.generator.received) == 2
    assert len(agent_runs) == 1
    assert checks(result) == [("t-01", "FOUND", None)]
    assert result.exit_code == 1


# =============================================================================================
# Requirement: Insufficient evidence SHALL terminate without a fabricated conclusion
# =============================================================================================
async def test_tool_finds_no_evidence() -> None:
    """Demo logs: account-service has no ERROR lines in the window; the equivalent retry is refused."""
    business = {"service": "account-service", **WINDOW, "level": "ERROR"}
    same_business = {
        "level": "ERROR",
        "limit": 10,
        "end": WINDOW["end"],
        "start": WINDOW["start"],
        "service": "account-service",
    }  # reordered, default made explicit: equivalent
    final = draft(
        None,
        [
            {
                "kind": "NEGATIVE_OBSERVATION",
                "statement": "该时间窗内没有 ERROR 日志。",
                "scope": "account-service 2026-11-30T02:00Z-03:00Z ERROR",
                "evidence": ["sso-1"],
            }
        ],
        action_plan=["向客户索取失败请求的 trace_id"],
        checked=["account-service 02:00-03:00Z ERROR 日志"],
        missing=["失败请求的 trace_id", "IdP 侧日志"],
    )
    h = harness(
        scenario(
            tools_round(call("sso-1", "query_logs", business)),
            tools_round(call("sso-2", "query_logs", same_business)),
            text_round(as_text(final)),
            query="企业客户 ent-40215 在 2026-11-30 02:00-03:00 UTC SSO 登录失败，请排查 account-service。",
        )
    )

    result = await h.run()

    assert seen(h, 1) == [
        {"tool_call_id": "sso-1", "tool": "query_logs", "evidence_status": "EMPTY", "control": None}
    ]
    assert seen(h, 2)[1] == {
        "tool_call_id": "sso-2",
        "tool": "query_logs",
        "evidence_status": "NOT_EXECUTED",
        "control": {"code": "DUPLICATE_CALL"},
    }
    assert started_tools(h) == [("sso-1", "query_logs")]
    assert ("DUPLICATE_CALL", "sso-2") in protocol_codes(h)
    assert (result.outcome, result.stop_reason) == ("DRAFT", "COMPLETED")
    assert result.draft is not None and result.draft.conclusion is None
    assert result.draft.model_dump(mode="json") == final
    assert checks(result) == [("sso-1", "EMPTY", None)]


async def test_tool_finds_no_evidence_so_a_conclusion_is_refused() -> None:
    logs = RecordingAdapter(answer=empty())
    h = harness(
        scenario(
            tools_round(call("t-01", "query_logs", logs_input("account-service", level="ERROR"))),
            text_round(as_text(draft("IdP 证书过期导致 SSO 失败。", [finding("没有错误日志。", "t-01")]))),
        ),
        adapters={"query_logs": logs},
    )

    result = await h.run()

    assert (result.outcome, result.stop_reason, result.draft) == ("FAILED", "INVALID_DRAFT", None)
    assert result.failure is not None and result.failure.violation == "CONCLUSION_WITHOUT_FOUND_EVIDENCE"
    assert checks(result) == [("t-01", "EMPTY", None)]


async def test_no_bounded_tool_query_is_possible() -> None:
    missing = ["受影响的企业或用户", "发生问题的时间范围", "涉及的服务", "具体的错误信息"]
    final = draft(action_plan=["请补充企业、时间范围、服务和报错后再诊断"], missing=missing)
    h = harness(scenario(text_round(as_text(final)), query="线上好像有点问题，帮忙看一下。"))

    result = await h.run()

    assert (result.outcome, result.stop_reason) == ("DRAFT", "COMPLETED")
    assert result.draft is not None and result.draft.conclusion is None
    assert result.draft.limitations.missing_info == missing
    assert result.draft.limitations.checked_scope == []
    assert h.generator.calls == 1 and result.usage.model_calls == 1
    assert h.of_type("tool_started") == []
    assert result.progress is not None
    assert result.progress.model_dump() == {"checks": [], "stop_required": False, "saturation": None}


async def test_no_bounded_tool_query_is_possible_and_no_conclusion_may_be_invented() -> None:
    h = harness(
        scenario(
            text_round(
                as_text(
                    draft(
                        "数据库主从切换导致故障。",
                        [
                            {
                                "kind": "NEGATIVE_OBSERVATION",
                                "statement": "未检查。",
                                "scope": "全部",
                                "evidence": "NO_EVIDENCE",
                            }
                        ],
                    )
                )
            ),
            query="线上好像有点问题，帮忙看一下。",
        )
    )

    result = await h.run()

    assert (result.outcome, result.stop_reason, result.draft) == ("FAILED", "INVALID_DRAFT", None)
    assert result.failure is not None and result.failure.violation == "CONCLUSION_WITHOUT_FOUND_EVIDENCE"
    assert result.progress is None


async def test_harness_requires_stop() -> None:
    """Two EMPTY results saturate the no-gain counter: STOP_REQUIRED, then one final Draft."""
    logs = RecordingAdapter(answer=empty())
    final = draft(
        None,
        [
            {
                "kind": "NEGATIVE_OBSERVATION",
                "statement": "两个窗口都没有错误日志。",
                "scope": "order-service 02:00-03:00Z ERROR/WARN",
                "evidence": ["t-01", "t-02"],
            }
        ],
        checked=["order-service ERROR 日志", "order-service WARN 日志"],
        missing=["受影响订单 ID"],
    )
    h = harness(
        scenario(
            tools_round(call("t-01", "query_logs", logs_input("order-service", level="ERROR"))),
            tools_round(
                call("t-02", "query_logs", logs_input("order-service", level="WARN")),
                call("t-03", "query_logs", logs_input("order-service", level="INFO")),
            ),
            text_round(as_text(final)),
            settings={"protocol": {"max_consecutive_no_gain": 2}},
        ),
        adapters={"query_logs": logs},
    )

    result = await h.run()

    assert seen(h, 2)[1:] == [
        {"tool_call_id": "t-02", "tool": "query_logs", "evidence_status": "EMPTY", "control": STOP_REQUIRED},
        {
            "tool_call_id": "t-03",
            "tool": "query_logs",
            "evidence_status": "NOT_EXECUTED",
            "control": STOP_REQUIRED,
        },
    ]
    assert [r.tool_call_id for r in logs.requests] == ["t-01", "t-02"]
    assert h.generator.received[2][-1].role.value == "tool"  # told once, in the observation
    assert (result.outcome, result.stop_reason) == ("DRAFT", "COMPLETED_AFTER_STOP_REQUIRED")
    assert result.draft is not None and result.draft.model_dump(mode="json") == final
    assert checks(result) == [("t-01", "EMPTY", None), ("t-02", "EMPTY", None)]
    assert result.progress is not None and result.progress.stop_required is True
    assert result.progress.saturation == "INFORMATION_SATURATED"
    assert h.generator.calls == 3 and result.exit_code == 0


async def test_harness_requires_stop_after_a_no_gain_evaluation() -> None:
    logs = RecordingAdapter(answer=found(LOG_DATA))
    h = harness(
        scenario(
            tools_round(call("t-01", "query_logs", logs_input(level="INFO"))),
            tools_round(call("t-02", "query_logs", logs_input(level="ERROR"), evaluated("t-01", "NO_GAIN"))),
            text_round(NULL_DRAFT),
            settings={"protocol": {"max_consecutive_no_gain": 1}},
        ),
        adapters={"query_logs": logs},
    )

    result = await h.run()

    assert seen(h, 2)[1] == {
        "tool_call_id": "t-02",
        "tool": "query_logs",
        "evidence_status": "NOT_EXECUTED",
        "control": STOP_REQUIRED,
    }
    assert [r.tool_call_id for r in logs.requests] == ["t-01"]
    assert (result.outcome, result.stop_reason) == ("DRAFT", "COMPLETED_AFTER_STOP_REQUIRED")
    assert checks(result) == [("t-01", "FOUND", "NO_GAIN")]


async def test_harness_requires_stop_before_the_last_budgeted_round() -> None:
    kb = RecordingAdapter(answer=found(DOC_DATA))
    h = harness(
        scenario(
            tools_round(call("t-01", "lookup_knowledge", {"query": "支付超时"})),
            text_round(as_text(draft("连接池耗尽。", [finding("runbook。", "t-01")]))),
            settings={"budget": {"max_model_calls": 2}},
        ),
        adapters={"lookup_knowledge": kb},
    )

    result = await h.run()

    assert last_user_text(h, 1) == '{"control":{"code":"STOP_REQUIRED"}}'
    assert (result.outcome, result.stop_reason) == ("DRAFT", "COMPLETED_AFTER_STOP_REQUIRED")
    assert result.progress is not None
    assert (result.progress.stop_required, result.progress.saturation) == (True, None)
    assert h.generator.calls == 2


# =============================================================================================
# Requirement: Stage-four execution SHALL remain internal and auditable
# =============================================================================================
async def test_internal_audited_execution_completes(tmp_path: Path) -> None:
    hook_saw: list[tuple[str, str, str]] = []
    sink_saw: list[tuple[str, str, str]] = []
    store = AuditStore(tmp_path / "audit.db")
    logs = RecordingAdapter(answer=found(LOG_DATA))
    h = harness(
        scenario(
            tools_round(call("a-1", "query_logs", logs_input(level="ERROR"))),
            text_round(as_text(draft("连接池耗尽。", [finding("连接获取超时。", "a-1")]))),
        ),
        adapters={"query_logs": logs},
        extra_hooks={
            "before_llm": [RecordingHook("before_llm", hook_saw)],
            "before_tool": [RecordingHook("before_tool", hook_saw)],
        },
        sinks=[lambda e: sink_saw.append((e["type"], e["session_id"], e["run_id"])), AuditSink(store)],
    )

    try:
        result = await h.run()
        run_row = store.get_run(result.run_id)
        invocations = store.list_invocations(result.run_id)
    finally:
        store.close()

    ids = (result.session_id, result.run_id)
    assert (result.outcome, result.stop_reason) == ("DRAFT", "COMPLETED")
    # The injected hook observed both model rounds and the tool round, all with this run's identity.
    assert hook_saw == [("before_llm", *ids), ("before_tool", *ids), ("before_llm", *ids)]
    assert {(s, r) for _, s, r in sink_saw} == {ids}
    assert {"model_round_started", "tool_started", "tool_finished", "run_finished"} <= {
        t for t, _, _ in sink_saw
    }
    [request] = logs.requests
    assert (request.session_id, request.run_id, request.tool_call_id) == (*ids, "a-1")
    # The canonical invocation is audited under the same identity.
    assert run_row is not None and (run_row["session_id"], run_row["run_id"]) == ids
    assert [
        (i["run_id"], i["session_id"], i["tool_call_id"], i["tool"], i["status"]) for i in invocations
    ] == [(result.run_id, result.session_id, "a-1", "query_logs", "FOUND")]


async def test_stage_four_is_archived(agent_runs: list[Agent], tmp_path: Path) -> None:
    """The engine stays an internal entry (one Agent per execution) and the CLI entry point is unchanged."""
    h = harness(scenario(text_round(NULL_DRAFT), text_round(NULL_DRAFT)))

    first = await h.run()
    second = await h.run()

    assert first.outcome == second.outcome == "DRAFT"
    assert len(agent_runs) == 2 and agent_runs[0] is not agent_runs[1]
    # The engine never imports the console, the audit or the TUI.
    probe = (
        "import sys, agent.use_case, agent.harness, agent.hooks; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'console', 'audit', 'textual'}))"
    )
    code, out, err = await run_python(["-c", probe])
    assert (code, out.strip()) == (0, "[]"), err
    # The public entry point is still `diagnose = console.cli:main` and still runs one diagnosis.
    pyproject = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    assert 'diagnose = "console.cli:main"' in pyproject
    scenario_file = tmp_path / "inline.yaml"
    inline = yaml.safe_dump(scenario(text_round(NULL_DRAFT)), allow_unicode=True)
    scenario_file.write_text(inline, encoding="utf-8")
    code, out, err = await run_python(
        [
            "-c",
            "import sys; from console.cli import main; sys.exit(main())",
            "run",
            "--scenario",
            str(scenario_file),
            "--audit-db",
            str(tmp_path / "audit.db"),
            "--json",
        ],
        home=tmp_path,
    )
    assert code == 0, err
    printed = json.loads(out)
    assert (printed["outcome"], printed["stop_reason"]) == ("DRAFT", "COMPLETED")
    assert printed["draft"] == json.loads(NULL_DRAFT)
    assert set(printed) == set(first.to_json_dict())


# =============================================================================================
# Requirement: Diagnosis execution SHALL preserve controlled stop outcomes
# =============================================================================================
async def test_model_ignores_stop_required() -> None:
    logs = RecordingAdapter(answer=empty())
    h = harness(
        scenario(
            tools_round(call("t-01", "query_logs", logs_input("account-service", level="ERROR"))),
            tools_round(call("t-02", "query_logs", logs_input("account-service", level="WARN"))),
            tools_round(call("t-03", "query_logs", logs_input("account-service", level="INFO"))),
            text_round(as_text(draft(missing=["spare round that must never be requested"]))),
            settings={"protocol": {"max_consecutive_no_gain": 2}},
        ),
        adapters={"query_logs": logs},
    )

    result = await h.run()

    assert seen(h, 2)[1]["control"] == STOP_REQUIRED
    assert (result.outcome, result.stop_reason) == ("CONTROLLED_STOP", "INFORMATION_SATURATED")
    assert result.draft is None and result.failure is None and result.exit_code == 10
    assert result.progress is not None
    assert result.progress.model_dump() == {
        "checks": [
            {"tool_call_id": "t-01", "tool": "query_logs", "evidence_status": "EMPTY", "evaluation": None},
            {"tool_call_id": "t-02", "tool": "query_logs", "evidence_status": "EMPTY", "evaluation": None},
        ],
        "stop_required": True,
        "saturation": "INFORMATION_SATURATED",
    }
    assert [r.tool_call_id for r in logs.requests] == ["t-01", "t-02"]
    assert started_tools(h) == [("t-01", "query_logs"), ("t-02", "query_logs")]
    assert h.generator.calls == 3 and len(h.generator.received) == 3
    stopped = [e for e in h.of_type("protocol_changed") if e["code"] == "COLLECTION_STOPPED"]
    assert [e["detail"] for e in stopped] == [{"tool_call_ids": ["t-03"]}]
    assert_single_finish(h, result)


async def test_model_ignores_stop_required_after_protocol_violations() -> None:
    logs = RecordingAdapter(answer=found(LOG_DATA))
    h = harness(
        scenario(
            tools_round(call("t-01", "query_logs", logs_input(level="WARN"))),
            tools_round(call("t-02", "query_logs", logs_input("order-service"), omit_previous=True)),
            tools_round(call("t-03", "query_logs", logs_input("order-service"), evaluated("t-02"))),
            tools_round(call("t-04", "query_logs", logs_input("order-service"), evaluated("t-01"))),
            text_round(NULL_DRAFT),
            settings={"protocol": {"max_protocol_violations": 2}},
        ),
        adapters={"query_logs": logs},
    )

    result = await h.run()

    assert seen(h, 2)[1]["control"]["code"] == "INVALID_PROGRESS_PROTOCOL"
    assert seen(h, 3)[2] == {
        "tool_call_id": "t-03",
        "tool": "query_logs",
        "evidence_status": "NOT_EXECUTED",
        "control": STOP_REQUIRED,
    }
    assert (result.outcome, result.stop_reason) == ("CONTROLLED_STOP", "PROGRESS_PROTOCOL_VIOLATED")
    assert result.draft is None
    assert checks(result) == [("t-01", "FOUND", None)]
    assert result.progress is not None and result.progress.saturation == "PROGRESS_PROTOCOL_VIOLATED"
    assert [r.tool_call_id for r in logs.requests] == ["t-01"]
    assert h.generator.calls == 4


async def test_unclassified_framework_failure(agent_runs: list[Agent]) -> None:
    exploding = ExplodingHook()
    logs = RecordingAdapter(answer=found(LOG_DATA))
    h = harness(
        scenario(
            tools_round(call("t-01", "query_logs", logs_input(level="ERROR"))),
            text_round(NULL_DRAFT),
        ),
        adapters={"query_logs": logs},
        extra_hooks={"before_tool": [exploding]},
    )

    result = await h.run()

    assert (result.outcome, result.stop_reason) == ("FAILED", "AGENT_ERROR")
    assert result.draft is None and result.progress is None  # no safe progress is fabricated
    assert result.failure is not None and result.failure.code == "AGENT_ERROR"
    assert "hunter2" not in json.dumps(result.to_json_dict()) + json.dumps(h.events, ensure_ascii=False)
    assert exploding.calls == 1 and h.generator.calls == 1 and len(agent_runs) == 1  # no retry
    assert result.exit_code == 1
    assert_single_finish(h, result)


async def test_unclassified_framework_failure_at_exit() -> None:
    h = harness(scenario(text_round(NULL_DRAFT)), extra_hooks={"on_exit": [ExplodingHook()]})

    result = await h.run()

    assert (result.outcome, result.stop_reason) == ("FAILED", "AGENT_ERROR")
    assert result.draft is None and result.progress is None
    assert h.generator.calls == 1


async def test_unclassified_framework_failure_before_a_model_round() -> None:
    logs = RecordingAdapter(answer=found(LOG_DATA))
    h = harness(
        scenario(
            tools_round(call("t-01", "query_logs", logs_input(level="ERROR"))),
            text_round(NULL_DRAFT),
        ),
        adapters={"query_logs": logs},
        extra_hooks={"before_llm": [ExplodingHook(on_call=2)]},
    )

    result = await h.run()

    assert h.generator.calls == 1 and len(h.generator.received) == 1  # round 2 never reached the model
    assert (result.outcome, result.stop_reason) == ("FAILED", "AGENT_ERROR")
    assert result.progress is None
    assert result.usage.model_calls == 1


async def test_adapter_crash_is_a_tool_error_not_a_framework_failure() -> None:
    def crash(_request: ToolRequest) -> AdapterResult:
        raise RuntimeError("boom at 10.0.0.7")

    logs = RecordingAdapter(answer=crash)
    h = harness(
        scenario(tools_round(call("t-01", "query_logs", logs_input())), text_round(NULL_DRAFT)),
        adapters={"query_logs": logs},
    )

    result = await h.run()

    assert seen(h, 1)[0]["error_code"] == "BACKEND_ERROR"
    assert (result.outcome, result.stop_reason) == ("DRAFT", "COMPLETED")
    assert "10.0.0.7" not in json.dumps(h.events)


INVALID_FINALS = [
    pytest.param("", "EMPTY_OUTPUT", id="empty"),
    pytest.param(None, "EMPTY_OUTPUT", id="no-text"),
    pytest.param("  \n ", "EMPTY_OUTPUT", id="blank"),
    pytest.param('{"conclusion": null, "analysis": [', "MALFORMED_JSON", id="truncated"),
    pytest.param('["t-01"]', "NOT_A_JSON_OBJECT", id="array"),
    pytest.param(as_text({**draft(), "confidence": "LEAKED-MARKER"}), "SCHEMA_MISMATCH", id="extra-key"),
    pytest.param(
        as_text(
            {
                **draft(),
                "analysis": [{"kind": "FINDING", "statement": "LEAKED-MARKER", "evidence": "NO_EVIDENCE"}],
            }
        ),
        "SCHEMA_MISMATCH",
        id="finding-without-ids",
    ),
    pytest.param(
        '{"conclusion": null, "conclusion": "LEAKED-MARKER", "analysis": [], "action_plan": [],'
        ' "recommendations": [], "limitations": {"checked_scope": [], "missing_info": []}}',
        "DUPLICATE_KEY",
        id="duplicate-key",
    ),
    pytest.param(
        as_text(draft(None, [finding("LEAKED-MARKER", "t-77")])), "UNKNOWN_CITATION", id="unknown-id"
    ),
]


@pytest.mark.parametrize(("text", "violation"), INVALID_FINALS)
async def test_invalid_final_draft_after_verified_checks(text: str | None, violation: str) -> None:
    logs = RecordingAdapter(answer=found(LOG_DATA))
    kb = RecordingAdapter(answer=empty())
    h = harness(
        scenario(
            tools_round(call("t-01", "query_logs", logs_input(level="ERROR"))),
            tools_round(call("t-02", "lookup_knowledge", {"query": "支付超时"}, evaluated("t-01"))),
            text_round(text),
            text_round(as_text(draft(missing=["repair round that must never be requested"]))),
        ),
        adapters={"query_logs": logs, "lookup_knowledge": kb},
    )

    result = await h.run()

    assert (result.outcome, result.stop_reason, result.draft) == ("FAILED", "INVALID_DRAFT", None)
    assert result.to_json_dict()["failure"] == {"code": "INVALID_DRAFT", "violation": violation}
    assert result.progress is not None
    assert result.progress.model_dump() == {
        "checks": [
            {
                "tool_call_id": "t-01",
                "tool": "query_logs",
                "evidence_status": "FOUND",
                "evaluation": "GAINED",
            },
            {
                "tool_call_id": "t-02",
                "tool": "lookup_knowledge",
                "evidence_status": "EMPTY",
                "evaluation": None,
            },
        ],
        "stop_required": False,
        "saturation": None,
    }
    # No repair round, and the discarded text is nowhere in the result or the run_finished event.
    assert h.generator.calls == 3 and len(h.generator.received) == 3
    assert "LEAKED-MARKER" not in json.dumps(result.to_json_dict(), ensure_ascii=False)
    assert "LEAKED-MARKER" not in json.dumps(h.of_type("run_finished"), ensure_ascii=False)
    assert_single_finish(h, result)


@pytest.mark.parametrize(("text", "violation"), INVALID_FINALS)
async def test_invalid_final_draft_without_verified_checks(text: str | None, violation: str) -> None:
    h = harness(
        scenario(
            text_round(text),
            text_round(as_text(draft(missing=["repair round that must never be requested"]))),
        )
    )

    result = await h.run()

    assert (result.outcome, result.stop_reason) == ("FAILED", "INVALID_DRAFT")
    assert result.to_json_dict()["failure"] == {"code": "INVALID_DRAFT", "violation": violation}
    # Nothing is fabricated: no Draft (not even a no-conclusion one) and no progress.
    assert result.draft is None and result.progress is None
    assert h.generator.calls == 1 and len(h.generator.received) == 1


@pytest.mark.parametrize(
    "first_round",
    [
        pytest.param(tools_round(call("x-1", "page_oncall", {"team": "payment"})), id="unknown-tool-only"),
        pytest.param(
            tools_round(call("t-1", "query_logs", {"service": "payment-service"})), id="invalid-input-only"
        ),
    ],
)
async def test_invalid_final_draft_without_verified_checks_after_unexecuted_calls(
    first_round: dict[str, Any],
) -> None:
    logs = RecordingAdapter(answer=found(LOG_DATA))
    h = harness(scenario(first_round, text_round("我无法给出结论。")), adapters={"query_logs": logs})

    result = await h.run()

    assert logs.requests == []
    assert (result.outcome, result.stop_reason) == ("FAILED", "INVALID_DRAFT")
    assert result.draft is None and result.progress is None


async def test_invalid_final_draft_with_deeply_nested_json_fails_closed() -> None:
    text = '{"conclusion": ' + "[" * 3000 + "]" * 3000 + "}"
    h = harness(scenario(text_round(text)))

    result = await h.run()

    assert (result.outcome, result.stop_reason) == ("FAILED", "INVALID_DRAFT")
    assert len(h.of_type("run_finished")) == 1


async def test_invalid_final_draft_that_is_not_utf8_encodable_fails_closed() -> None:
    text = as_text(draft(action_plan=["\ud800"]))
    h = harness(scenario(text_round(text)))

    result = await h.run()

    assert (result.outcome, result.stop_reason) == ("FAILED", "INVALID_DRAFT")
    assert len(h.of_type("run_finished")) == 1
