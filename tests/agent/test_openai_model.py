"""The `openai` model path against a local server on 127.0.0.1 shaped like the OpenAI chat-completions
API: tool calls reach the harness, one HTTP request per model round, and no retry ever happens."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent.events.run_events import RunEvent
from agent.evidence import build_adapters
from agent.model.factory import build_model
from agent.settings import ConfigError, ModelSettings, load_settings
from agent.use_case import DiagnosisUseCase
from tests.support.openai_server import completion, fake_openai
from tools.boundary import ToolBoundary

DRAFT = {
    "conclusion": None,
    "analysis": [
        {
            "kind": "NEGATIVE_OBSERVATION",
            "statement": "account-service 无错误日志",
            "scope": "account-service 02:00-03:00Z",
            "evidence": ["srv-1"],
        }
    ],
    "action_plan": [],
    "recommendations": [],
    "limitations": {"checked_scope": ["account-service ERROR 日志"], "missing_info": ["trace_id"]},
}


def _use_case(url: str, **budget: Any) -> DiagnosisUseCase:
    settings = load_settings(
        None,
        overrides={
            "model": {"provider": "openai", "base_url": url, "name": "test-model", "timeout_s": 5},
            "budget": budget,
        },
    )
    model = build_model(settings.model, None)
    return DiagnosisUseCase(
        settings, model.generator, ToolBoundary(build_adapters(settings)), model_label=model.label
    )


async def test_openai_round_trip_with_tool_call_and_strict_draft() -> None:
    call = {
        "id": "srv-1",
        "name": "query_logs",
        "arguments": {
            "previous_observation": None,
            "input": {
                "service": "account-service",
                "start": "2026-11-30T02:00:00Z",
                "end": "2026-11-30T03:00:00Z",
                "level": "ERROR",
            },
        },
    }
    with fake_openai(
        [completion(tool_calls=[call]), completion(text=json.dumps(DRAFT, ensure_ascii=False))]
    ) as srv:
        result = await _use_case(srv.url).execute("ent-40215 SSO 登录失败")
    assert (result.outcome, result.stop_reason) == ("DRAFT", "COMPLETED")
    assert result.usage.model_calls == 2
    assert result.usage.total_tokens == 240
    assert len(srv.requests) == 2
    first = srv.requests[0]
    assert [t["function"]["name"] for t in first["tools"]] == [
        "lookup_knowledge",
        "query_logs",
        "query_mysql",
    ]
    assert json.loads(first["messages"][1]["content"]) == {
        "query": "ent-40215 SSO 登录失败",
        "previous_turn": None,
    }
    tool_reply = srv.requests[1]["messages"][-1]
    assert tool_reply["role"] == "tool"
    assert tool_reply["tool_call_id"] == "srv-1"
    assert json.loads(tool_reply["content"])["evidence_status"] == "EMPTY"


@pytest.mark.parametrize(
    "reply",
    [
        (500, '{"error": {"message": "boom"}}'),
        (200, "{not json"),
        (429, '{"error": {"message": "slow down"}}'),
    ],
)
async def test_model_server_failure_is_model_error_without_retry(reply: tuple[int, str]) -> None:
    with fake_openai([reply, completion(text=json.dumps(DRAFT))]) as srv:
        result = await _use_case(srv.url).execute("payment-service 超时")
    assert (result.outcome, result.stop_reason) == ("FAILED", "MODEL_ERROR")
    assert len(srv.requests) == 1  # max_retries=0: the second scripted reply is never asked for
    assert result.failure is not None
    assert "boom" not in json.dumps(result.to_json_dict())


async def test_refused_connection_is_model_error() -> None:
    result = await _use_case("http://127.0.0.1:9/v1").execute("payment-service 超时")
    assert (result.outcome, result.stop_reason) == ("FAILED", "MODEL_ERROR")


def test_openai_without_key_or_base_url_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        build_model(ModelSettings(provider="openai"), None)


async def test_openai_client_never_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_KEY", "sk-test-not-real-000000000000")
    choice = build_model(
        ModelSettings(provider="openai", api_key_env="TEST_KEY", base_url="http://x/v1"), None
    )
    choice.generator.warm_up()
    await choice.generator.warm_up_async()
    assert choice.generator.client.max_retries == 0
    assert choice.generator.async_client.max_retries == 0
    assert choice.label == "openai: gpt-4o-mini @ http://x/v1"


async def test_malformed_tool_call_arguments_fail_closed_without_invocation() -> None:
    """Small local models often emit broken tool-call JSON: the run ends typed, nothing executes."""
    broken = completion(tool_calls=[{"id": "bad-1", "name": "query_logs", "arguments": {}}])
    broken["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = '{"input": {"service": '
    with fake_openai([broken, completion(text="not json")]) as srv:
        use_case = _use_case(srv.url)
        events: list[RunEvent] = []
        use_case.sinks.append(events.append)
        result = await use_case.execute("payment-service 超时")
    assert (result.outcome, result.stop_reason) == ("FAILED", "INVALID_DRAFT")
    assert result.failure is not None
    assert result.failure.violation == "EMPTY_OUTPUT"
    assert len(srv.requests) == 1  # no second model call to "repair" the broken reply
    assert not [e for e in events if e["type"] == "tool_started"]
