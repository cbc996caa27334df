"""`[model]` generation settings reach every request, and a reply cut at the token limit fails typed.

Checked on the request bodies recorded by a local server shaped like the OpenAI chat-completions API.
"""

from __future__ import annotations

import json
from typing import Any

from agent.events.run_events import RunEvent
from agent.evidence import build_boundary
from agent.model.factory import build_model
from agent.settings import load_settings
from agent.use_case import DiagnosisUseCase
from tests.support.openai_server import completion, fake_openai

LOGS_CALL = {
    "id": "gen-1",
    "name": "query_logs",
    "arguments": {
        "previous_observation": None,
        "input": {
            "service": "payment-service",
            "start": "2026-11-30T02:00:00Z",
            "end": "2026-11-30T03:00:00Z",
            "level": "ERROR",
        },
    },
}
NULL_DRAFT: dict[str, Any] = {
    "conclusion": None,
    "analysis": [],
    "action_plan": [],
    "recommendations": [],
    "limitations": {"checked_scope": ["payment-service ERROR 日志"], "missing_info": ["trace_id"]},
}


def use_case(url: str, model: dict[str, Any] | None = None, **budget: Any) -> DiagnosisUseCase:
    settings = load_settings(
        None,
        overrides={
            "model": {"provider": "openai", "base_url": url, "name": "m", "timeout_s": 5, **(model or {})},
            "budget": budget,
        },
    )
    choice = build_model(settings.model, None)
    return DiagnosisUseCase(settings, choice.generator, build_boundary(settings), model_label=choice.label)


async def test_generation_settings_reach_every_model_request() -> None:
    replies = [completion(tool_calls=[LOGS_CALL]), completion(text=json.dumps(NULL_DRAFT))]
    with fake_openai(replies) as srv:
        result = await use_case(srv.url, {"max_tokens": 321, "temperature": 0.3, "seed": 7}).execute(
            "payment-service 02:00-03:00Z 超时"
        )
    assert result.usage.model_calls == 2
    assert len(srv.requests) == 2
    for body in srv.requests:
        assert (body["max_tokens"], body["temperature"], body["seed"]) == (321, 0.3, 7)


async def test_default_generation_settings_bound_every_request() -> None:
    with fake_openai([completion(text=json.dumps(NULL_DRAFT))]) as srv:
        result = await use_case(srv.url).execute("线上好像有点问题")
    assert result.outcome == "DRAFT"
    (body,) = srv.requests
    assert body["max_tokens"] == 4096
    assert body["temperature"] == 0.0
    assert "seed" not in body  # no seed unless configured


async def test_reply_cut_at_the_token_limit_is_a_typed_model_error() -> None:
    cut = completion(text='{"conclusion": null, "analysis": [', prompt_tokens=900, completion_tokens=64)
    cut["choices"][0]["finish_reason"] = "length"
    with fake_openai([cut, completion(text=json.dumps(NULL_DRAFT))]) as srv:
        uc = use_case(srv.url, {"max_tokens": 64})
        events: list[RunEvent] = []
        uc.sinks.append(events.append)
        result = await uc.execute("线上好像有点问题")
    assert (result.outcome, result.stop_reason) == ("FAILED", "MODEL_ERROR")
    expected = {"code": "MODEL_ERROR", "cause": "MAX_TOKENS", "endpoint": srv.url}
    assert result.to_json_dict()["failure"] == expected
    assert len(srv.requests) == 1  # no second call to finish the answer
    # The cut round still counts: its tokens were spent.
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (900, 64)
    finished = [e for e in events if e["type"] == "model_round_finished"]
    assert [(e["round"], e["completion_tokens"]) for e in finished] == [(1, 64)]


async def test_cut_tool_call_round_is_also_max_tokens() -> None:
    cut = completion(tool_calls=[LOGS_CALL])
    cut["choices"][0]["finish_reason"] = "length"
    with fake_openai([cut]) as srv:
        uc = use_case(srv.url)
        events: list[RunEvent] = []
        uc.sinks.append(events.append)
        result = await uc.execute("payment-service 超时")
    assert result.failure is not None
    assert result.failure.cause == "MAX_TOKENS"
    assert not [e for e in events if e["type"] == "tool_started"]  # a half tool call never runs
