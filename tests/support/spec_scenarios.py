"""Builders and views shared by the spec tests: inline scenarios, evidence answers, what the model saw.

Each spec test drives the real Haystack Agent through `DiagnosisUseCase` with a scripted model whose
scenario is written inline (own tool call IDs, queries and data), and evidence from either the
embedded demo sources or `RecordingAdapter`s. These helpers only build inputs and read results; they
never drive the model/tool loop themselves.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support import Harnessed, tool_messages_seen_by_model
from tools.adapter import AdapterResult, ToolRequest
from tools.vocabulary import EvidenceStatus

REPO = Path(__file__).resolve().parents[2]
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
    return lambda _request: AdapterResult(EvidenceStatus.FOUND, data)


def empty() -> Callable[[ToolRequest], AdapterResult]:
    return lambda _request: AdapterResult(EvidenceStatus.EMPTY, {"entries": [], "returned": 0})


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


def last_user_text(h: Harnessed, round_index: int) -> str | None:
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
