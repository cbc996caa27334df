"""Spec: the Agent may perform zero Tool calls and return a no-conclusion Draft, and SHALL NOT make
calls merely to show activity — also when request shaping holds a small model to a grammar.

Before (issue 32, item 13), `request_shaping = "llama.cpp"` forced one call on every round but the
last (`tool_choice: "required"`, a `<tool_call>` prefill): a query with no context cost forced calls
and ended only by saturation. Now every round on which a tool may be called admits either one call or
the run's Draft (one `response_format`, a branch per tool and one for the Draft); the reply comes
back as text and a call object is taken up as that call.

Against a local server on 127.0.0.1 answering as llama.cpp's `/v1/chat/completions`, `/v1/models`
and `/props` do (what `request_shaping = "auto"` asks), with replies of the shape it writes when a
`response_format` holds the reply: the JSON value as the message's `content`, no `tool_calls`.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema

from agent.draft.rules import RunEvidence, run_bounds
from agent.events.run_events import RunEvent
from agent.evidence import build_boundary
from agent.model.factory import build_model
from agent.settings import load_settings
from agent.use_case import DiagnosisUseCase
from console.commands.render_text import render_result
from tests.support.openai_server import completion, fake_openai

LLAMA_CPP = {
    "/v1/models": (200, json.dumps({"data": [{"id": "m", "owned_by": "llamacpp"}]})),
    "/props": (200, json.dumps({"chat_template": "... <tool_call>\n{{ call }}\n</tool_call> ..."})),
}
NO_CONTEXT = "线上好像有点问题，帮忙看一下是什么原因。"
STOP: dict[str, Any] = {
    "conclusion": None,
    "analysis": [],
    "action_plan": [],
    "recommendations": [],
    "limitations": {"checked_scope": [], "missing_info": ["出问题的服务、时间和错误现象"]},
}
WINDOW = {"start": "2026-11-30T02:00:00Z", "end": "2026-11-30T03:00:00Z"}
CALL = {
    "name": "query_logs",
    "arguments": {"previous_observation": None, "input": {"service": "payment-service", **WINDOW}},
}


def _use_case(url: str, max_model_calls: int = 3) -> tuple[DiagnosisUseCase, list[RunEvent]]:
    settings = load_settings(
        None,
        overrides={
            "model": {
                "provider": "openai",
                "base_url": url,
                "name": "m",
                "timeout_s": 30,
                "max_tokens": 1024,
            },
            "budget": {"max_model_calls": max_model_calls},
        },
    )
    choice = build_model(settings.model, None)
    events: list[RunEvent] = []
    use_case = DiagnosisUseCase(
        settings, choice.generator, build_boundary(settings), model_label=choice.label, sinks=[events.append]
    )
    return use_case, events


def _reply_schema(request: dict[str, Any]) -> dict[str, Any]:
    schema: dict[str, Any] = request["response_format"]["json_schema"]["schema"]
    return schema


async def test_the_first_round_admits_a_call_or_the_draft_and_the_model_stops_at_once() -> None:
    with fake_openai([completion(text=json.dumps(STOP, ensure_ascii=False))], LLAMA_CPP) as srv:
        use_case, events = _use_case(srv.url)
        result = await use_case.execute(NO_CONTEXT)

    (request,) = srv.requests  # one request: no forced call, no saturation
    assert request["tool_choice"] == "none", "a forced call is what kept the model from stopping"
    assert request["messages"][-1]["role"] == "user", "no reply started inside a call"
    assert "stop" not in request
    schema = _reply_schema(request)
    valid = jsonschema.Draft202012Validator(schema).is_valid
    assert valid(STOP), "the Draft is admitted on a round where a tool may be called"
    assert valid(CALL), "and so is one call"
    assert not valid({"name": "query_logs"})
    assert not valid({**STOP, "conclusion": "编造的根因"})
    assert [t["function"]["name"] for t in request["tools"]] == [
        "lookup_knowledge",
        "query_logs",
        "query_mysql",
    ]
    assert (result.outcome, result.stop_reason) == ("DRAFT", "COMPLETED")
    assert result.draft is not None
    assert result.draft.conclusion is None
    assert [e for e in events if e["type"] == "tool_started"] == []
    assert result.usage.model_calls == 1


async def test_a_call_written_as_the_reply_is_taken_up_as_that_call() -> None:
    replies = [completion(text=json.dumps(CALL)), completion(text=json.dumps(STOP, ensure_ascii=False))]
    with fake_openai(replies, LLAMA_CPP) as srv:
        use_case, events = _use_case(srv.url)
        result = await use_case.execute("payment-service 2026-11-30 02:00-03:00Z 支付超时")

    started = [e for e in events if e["type"] == "tool_started"]
    assert [(e["tool"], e["tool_call_id"]) for e in started] == [("query_logs", "call-r1-1")]
    assert not [
        e for e in events if e["type"] == "protocol_changed" and e["code"] == "INVALID_PROGRESS_PROTOCOL"
    ]
    _, second = srv.requests
    # The call is in the transcript as a call, its observation answers it under the assigned ID.
    sent_back = second["messages"]
    (assistant,) = [m for m in sent_back if m["role"] == "assistant"]
    assert assistant["tool_calls"][0]["id"] == "call-r1-1"
    assert json.loads(assistant["tool_calls"][0]["function"]["arguments"]) == CALL["arguments"]
    assert sent_back[-1]["role"] == "tool"
    assert sent_back[-1]["tool_call_id"] == "call-r1-1"
    # The second round may still stop: its schema admits the Draft beside a call that evaluates the
    # pending observation.
    assert jsonschema.Draft202012Validator(_reply_schema(second)).is_valid(STOP)
    assert (result.outcome, result.stop_reason) == ("DRAFT", "COMPLETED")


async def test_a_draft_string_at_the_bound_the_server_was_held_to_is_named_in_the_result() -> None:
    """A grammar ends a string at its bound, maybe mid-sentence: the Result says which (issue 32, 14)."""
    bounds = run_bounds(16_384, RunEvidence({}), 1024)
    assert bounds.holds_a_sentence
    at_bound = {**STOP, "limitations": {"checked_scope": [], "missing_info": ["缺" * bounds.max_note_chars]}}
    with fake_openai([completion(text=json.dumps(at_bound, ensure_ascii=False))], LLAMA_CPP) as srv:
        use_case, _ = _use_case(srv.url)
        result = await use_case.execute(NO_CONTEXT)
    assert (result.outcome, result.bounds_reached) == ("DRAFT", ["limitations.missing_info[0]"])
    assert result.to_json_dict()["bounds_reached"] == ["limitations.missing_info[0]"]
    assert "limitations.missing_info[0]" in render_result(result)
