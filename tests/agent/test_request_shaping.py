"""What each `[model] request_shaping` policy sends, round by round, and what "auto" picks.

Checked on request bodies recorded by a local server shaped like the OpenAI chat-completions API,
which answers with replies recorded from llama.cpp's `llama-server` (tests/data/recorded_tool_rounds.json:
SmolLM2-135M and Gemma 3 270M behind the chat templates `diagnose demo model-server` writes; under
"a call or the Draft" a call comes back as the reply's JSON text, and one recording is of the forced
call before it, a `tool_calls` reply, which the harness takes up the same way).
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from agent.events.run_events import RunEvent
from agent.evidence import build_boundary
from agent.haystack_tools import frozen_tools
from agent.model.factory import build_model
from agent.model.server_kind import shaping_mode
from agent.settings import ModelSettings, load_settings
from agent.use_case import DiagnosisUseCase
from tests.support.openai_server import completion, fake_openai

RECORDED = {
    r["name"]: r
    for r in json.loads((Path(__file__).parents[1] / "data" / "recorded_tool_rounds.json").read_text("utf-8"))
}
WINDOW = {"start": "2026-11-30T02:00:00Z", "end": "2026-11-30T03:00:00Z"}
FROZEN = {tool.name: tool for tool in frozen_tools()}
LLAMA_CPP_MODELS = json.dumps(
    {"object": "list", "data": [{"id": "m", "object": "model", "owned_by": "llamacpp"}]}
)


def use_case(
    url: str, shaping: str, max_model_calls: int = 2, max_tokens: int = 384
) -> tuple[DiagnosisUseCase, list[RunEvent]]:
    settings = load_settings(
        None,
        overrides={
            "model": {
                "provider": "openai",
                "base_url": url,
                "name": "m",
                "timeout_s": 5,
                "max_tokens": max_tokens,
                "request_shaping": shaping,
            },
            "budget": {"max_model_calls": max_model_calls, "max_draft_bytes": 2048},
        },
    )
    choice = build_model(settings.model, None)
    events: list[RunEvent] = []
    uc = DiagnosisUseCase(
        settings, choice.generator, build_boundary(settings), model_label=choice.label, sinks=[events.append]
    )
    return uc, events


def replies(name: str) -> list[dict[str, Any]]:
    return [exchange["reply"] for exchange in RECORDED[name]["exchanges"]]


def parameters(request: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["function"]["name"]: t["function"]["parameters"] for t in request["tools"]}


# ------------------------------------------------------------------------------------------ llama.cpp
@pytest.mark.parametrize(
    "recording", ["gemma-3-270m-shaped-payment-timeout", "smollm2-135m-shaped-payment-timeout"]
)
async def test_llama_cpp_shaping_asks_for_one_call_or_the_draft_then_the_draft(recording: str) -> None:
    with fake_openai(replies(recording)) as srv:
        uc, events = use_case(srv.url, "llama.cpp", max_tokens=RECORDED[recording]["max_tokens"])
        result = await uc.execute(RECORDED[recording]["query"])
    tool_round, final = srv.requests
    # The tool round: one JSON value, a call of one of the three tools or the run's Draft.
    assert tool_round["tool_choice"] == "none"
    assert "stop" not in tool_round
    assert tool_round["messages"][-1]["role"] == "user"
    branches = tool_round["response_format"]["json_schema"]["schema"]["anyOf"]
    calls, draft = branches[:-1], branches[-1]
    assert [b["properties"]["name"]["const"] for b in calls] == list(FROZEN)
    assert [b["properties"]["arguments"] for b in calls] == list(parameters(tool_round).values())
    assert draft["properties"]["conclusion"] == {"type": "null"}  # nothing found yet: no conclusion
    # The same three tools, names and descriptions; parameters narrowed: nothing is pending yet.
    assert [t["function"]["name"] for t in tool_round["tools"]] == list(FROZEN)
    assert all(
        t["function"]["description"] == FROZEN[t["function"]["name"]].description for t in tool_round["tools"]
    )
    for schema in parameters(tool_round).values():
        assert schema["properties"]["previous_observation"] == {"type": "null"}
    # The recorded call was protocol-valid and ran; the final round asks for this run's Draft.
    started = [e for e in events if e["type"] == "tool_started"]
    assert len(started) == 1
    assert not [e for e in events if e["type"] == "protocol_changed" and e["code"] != "STOP_REQUIRED"]
    assert final["tool_choice"] == "none"
    assert final["response_format"]["type"] == "json_schema"
    final_schema = final["response_format"]["json_schema"]["schema"]
    assert all("name" not in b["properties"] for b in final_schema.get("anyOf", [final_schema]))  # no call
    assert "stop" not in final
    assert "parallel_tool_calls" not in final
    assert (result.outcome, result.stop_reason) == ("DRAFT", "COMPLETED_AFTER_STOP_REQUIRED")


async def test_a_pending_found_observation_narrows_the_next_call_to_its_evaluation() -> None:
    recording = RECORDED["gemma-3-270m-shaped-evaluates-found"]
    with fake_openai(replies(recording["name"])) as srv:
        uc, events = use_case(srv.url, "llama.cpp", max_model_calls=3)
        await uc.execute(recording["query"])
    first_call = next(e for e in events if e["type"] == "tool_finished")
    assert first_call["status"] == "FOUND"
    second = srv.requests[1]
    assert second["tool_choice"] == "none"
    assert "response_format" in second
    for tool, schema in parameters(second).items():
        previous = schema["properties"]["previous_observation"]
        assert "previous_observation" in schema["required"], tool
        assert previous["properties"]["tool_call_id"]["enum"] == [first_call["tool_call_id"]]
        assert previous["properties"]["evaluation"]["enum"] == ["GAINED", "NO_GAIN"]
    # The server held the model to it: the evaluation was recorded, no protocol violation.
    codes = [e["code"] for e in events if e["type"] == "protocol_changed"]
    assert "EVALUATION_RECORDED" in codes
    assert "INVALID_PROGRESS_PROTOCOL" not in codes


async def test_unshaped_the_same_server_writes_until_max_tokens() -> None:
    """Why the shaping exists: with the frozen request, the recorded reply runs into the token limit."""
    recording = RECORDED["gemma-3-270m-off-payment-timeout"]
    with fake_openai(replies(recording["name"])) as srv:
        uc, _ = use_case(srv.url, "off")
        result = await uc.execute(recording["query"])
    (request,) = srv.requests
    assert "tool_choice" not in request
    assert "stop" not in request
    assert request["messages"][-1]["role"] == "user"
    assert parameters(request) == {name: tool.parameters for name, tool in FROZEN.items()}
    assert result.failure is not None
    assert result.failure.cause == "MAX_TOKENS"


# ------------------------------------------------------------------------------------------- strict
async def test_strict_shaping_sends_strict_narrowed_functions_and_leaves_the_choice_to_the_model() -> None:
    call = {
        "id": "call_1",
        "name": "query_logs",
        "arguments": {
            "previous_observation": None,
            "input": {
                "service": "payment-service",
                **WINDOW,
                "level": "ERROR",
                "contains": None,
                "limit": 10,
            },
        },
    }
    answer: dict[str, Any] = {
        "conclusion": None,
        "analysis": [],
        "action_plan": [],
        "recommendations": [],
        "limitations": {"checked_scope": ["payment-service"], "missing_info": ["更多日志"]},
    }
    with fake_openai([completion(tool_calls=[call]), completion(text=json.dumps(answer))]) as srv:
        uc, events = use_case(srv.url, "strict")
        result = await uc.execute("payment-service 02:00-03:00Z 超时")
    tool_round, final = srv.requests
    assert "tool_choice" not in tool_round
    assert "stop" not in tool_round
    assert tool_round["parallel_tool_calls"] is False
    assert tool_round["messages"][-1]["role"] == "user"  # no prefill
    for tool in tool_round["tools"]:
        assert tool["function"]["strict"] is True
        business = tool["function"]["parameters"]["properties"]["input"]
        for shape in business.get("anyOf", [business]):  # lookup_knowledge: a search or a read
            assert set(shape["required"]) == set(shape["properties"])
    jsonschema.validate(call["arguments"], parameters(tool_round)["query_logs"])
    assert [e["status"] for e in events if e["type"] == "tool_finished"] == ["FOUND"]
    assert final["tool_choice"] == "none"
    assert all(t["function"]["strict"] is True for t in final["tools"])
    assert result.outcome == "DRAFT"


# --------------------------------------------------------------------------------------------- auto
LLAMA_CPP_PROPS = json.dumps({"chat_template": "{{- '<tool_call>\\n' }} …"})


@pytest.mark.parametrize(
    ("routes", "expected"),
    [
        ({"/v1/models": (200, LLAMA_CPP_MODELS), "/props": (200, LLAMA_CPP_PROPS)}, "llama.cpp"),
        (
            {"/v1/models": (200, LLAMA_CPP_MODELS), "/props": (200, '{"chat_template": "[TOOL_CALLS]"}')},
            "strict",
        ),
        ({"/v1/models": (200, '{"data": [{"id": "m", "owned_by": "vllm"}]}')}, "strict"),
        ({"/v1/models": (200, '{"data": [{"id": "m", "owned_by": "library"}]}')}, "off"),
        ({"/v1/models": (200, "not json")}, "off"),
        ({}, "off"),
    ],
)
async def test_auto_asks_the_server_once_and_sends_what_it_honours(
    routes: dict[str, tuple[int, str]], expected: str
) -> None:
    with fake_openai([completion(text="{}"), completion(text="{}")], routes) as srv:
        for _ in range(2):
            uc, _ = use_case(srv.url, "auto", max_model_calls=1)
            await uc.execute("payment-service 超时")
    asked = srv.gets
    assert asked[0] == "/v1/models"
    assert len(asked) == (2 if "/props" in routes else 1)  # once, not per run
    request = srv.requests[0]
    if expected == "off":
        assert parameters(request) == {name: tool.parameters for name, tool in FROZEN.items()}
    else:
        assert parameters(request) != {name: tool.parameters for name, tool in FROZEN.items()}
        assert all(t["function"].get("strict") is (expected == "strict" or None) for t in request["tools"])


async def test_auto_with_no_answer_sends_nothing_extra_and_asks_again_next_run() -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{closed.getsockname()[1]}/v1"
    settings = ModelSettings(provider="openai", base_url=url, timeout_s=1)
    assert await shaping_mode(settings) == "off"
    with fake_openai([], {"/v1/models": (200, LLAMA_CPP_MODELS), "/props": (200, LLAMA_CPP_PROPS)}) as srv:
        listening = ModelSettings(provider="openai", base_url=srv.url, timeout_s=1)
        assert await shaping_mode(listening) == "llama.cpp"


async def test_auto_needs_no_question_for_openai_or_a_scripted_model() -> None:
    assert await shaping_mode(ModelSettings(provider="openai", base_url=None)) == "strict"
    assert await shaping_mode(ModelSettings(provider="scripted")) == "off"
    assert (
        await shaping_mode(
            ModelSettings(provider="openai", base_url="http://x.invalid/v1", request_shaping="off")
        )
        == "off"
    )


async def test_a_failure_computing_the_round_request_is_the_harness_s_not_the_model_s(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import agent.model.request_shaping

    def broken(*_: Any) -> Any:
        raise ValueError("bug")

    monkeypatch.setattr(agent.model.request_shaping, "narrowed_tools", broken)
    with fake_openai([completion(text="{}")]) as srv:
        uc, _ = use_case(srv.url, "llama.cpp")
        result = await uc.execute("payment-service 超时")
    assert srv.requests == []
    assert result.failure is not None
    assert result.failure.code == "AGENT_ERROR"


async def test_the_final_round_repeats_the_last_tool_rounds_schemas_to_keep_the_prompt_cache() -> None:
    call = {
        "id": "call_found",
        "name": "query_logs",
        "arguments": {"previous_observation": None, "input": {"service": "payment-service", **WINDOW}},
    }
    answer = json.dumps(
        {
            "conclusion": None,
            "analysis": [],
            "action_plan": [],
            "recommendations": [],
            "limitations": {"checked_scope": ["payment-service"], "missing_info": ["更多日志"]},
        }
    )
    with fake_openai([completion(tool_calls=[call]), completion(text=answer)]) as srv:
        uc, events = use_case(srv.url, "llama.cpp")
        await uc.execute("payment-service 02:00-03:00Z 超时")
    assert [e["status"] for e in events if e["type"] == "tool_finished"] == ["FOUND"]  # now pending
    tool_round, final = srv.requests
    assert final["tools"] == tool_round["tools"]
