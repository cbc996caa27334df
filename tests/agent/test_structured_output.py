"""The round where no tool may be called carries THIS run's Draft schema; other rounds carry none.

Checked on request bodies recorded by a local server shaped like the OpenAI chat-completions API.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema

from agent.draft.rules import run_bounds
from agent.events.run_events import RunEvent
from agent.evidence import build_boundary
from agent.model.factory import build_model
from agent.prompt import system_prompt
from agent.settings import load_settings
from agent.use_case import DiagnosisUseCase
from tests.support.openai_server import completion, fake_openai

WINDOW = {"start": "2026-11-30T02:00:00Z", "end": "2026-11-30T03:00:00Z"}


def logs_call(call_id: str, service: str, previous: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "id": call_id,
        "name": "query_logs",
        "arguments": {"previous_observation": previous, "input": {"service": service, **WINDOW}},
    }


def use_case(url: str, structured_output: str = "auto", **budget: Any) -> DiagnosisUseCase:
    settings = load_settings(
        None,
        overrides={
            "model": {
                "provider": "openai",
                "base_url": url,
                "name": "m",
                "timeout_s": 5,
                "structured_output": structured_output,
            },
            "budget": budget,
        },
    )
    choice = build_model(settings.model, None)
    return DiagnosisUseCase(settings, choice.generator, build_boundary(settings), model_label=choice.label)


def concluded(call_id: str) -> dict[str, Any]:
    return {
        "conclusion": "payment-service 连接池耗尽导致超时",
        "analysis": [{"kind": "FINDING", "statement": "ERROR 日志显示连接池耗尽", "evidence": [call_id]}],
        "action_plan": ["回滚 v2.14.0"],
        "recommendations": [],
        "limitations": {"checked_scope": ["payment-service 日志"], "missing_info": []},
    }


async def test_final_round_carries_the_run_schema_and_earlier_rounds_do_not() -> None:
    # Budget of two calls: round 2 is the final completion opportunity (STOP_REQUIRED first).
    replies = [
        completion(tool_calls=[logs_call("srv-found", "payment-service")]),
        completion(text=json.dumps(concluded("srv-found"), ensure_ascii=False)),
    ]
    with fake_openai(replies) as srv:
        result = await use_case(srv.url, max_model_calls=2).execute("payment-service 02:00-03:00Z 超时")
    assert (result.outcome, result.stop_reason) == ("DRAFT", "COMPLETED_AFTER_STOP_REQUIRED")
    first, final = srv.requests
    assert "response_format" not in first
    assert "tool_choice" not in first
    assert final["tool_choice"] == "none"
    assert [t["function"]["name"] for t in final["tools"]] == [t["function"]["name"] for t in first["tools"]]
    fmt = final["response_format"]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["name"] == "DiagnosisDraft"
    schema = fmt["json_schema"]["schema"]
    # The FOUND call enables a conclusion, citing exactly that call.
    jsonschema.validate(concluded("srv-found"), schema)
    invented = concluded("call-999")
    assert not jsonschema.Draft202012Validator(schema).is_valid(invented)


async def test_no_found_call_means_the_final_round_admits_only_a_null_conclusion() -> None:
    replies = [
        completion(tool_calls=[logs_call("srv-empty", "no-such-service")]),
        completion(text="{}"),
    ]
    with fake_openai(replies) as srv:
        await use_case(srv.url, max_model_calls=2).execute("no-such-service 02:00-03:00Z 超时")
    schema = srv.requests[1]["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["conclusion"] == {"type": "null"}
    negative = schema["properties"]["analysis"]["items"]["anyOf"][0]
    assert negative["properties"]["evidence"]["items"]["enum"] == ["srv-empty"]


async def test_structured_output_off_sends_no_schema_and_the_prompt_carries_it() -> None:
    replies = [completion(tool_calls=[logs_call("srv-1", "payment-service")]), completion(text="{}")]
    with fake_openai(replies) as srv:
        await use_case(srv.url, structured_output="off", max_model_calls=2).execute("payment-service 超时")
    assert all("response_format" not in body for body in srv.requests)
    system = srv.requests[0]["messages"][0]["content"]
    assert system == system_prompt(run_bounds(16_384, max_tokens=4096))


async def test_a_model_answering_on_the_first_round_was_given_the_draft_schema() -> None:
    """The model may answer before STOP_REQUIRED: the prompt it reads then carries the Draft's shape,
    the run's limits and the citation rules (before, a one-line example without any of them)."""
    with fake_openai([completion(text="{}")]) as srv:
        await use_case(srv.url, max_draft_bytes=8_192).execute("payment-service 超时")
    (only,) = srv.requests
    assert "response_format" not in only  # tools are allowed on this round: the schema is in the prompt
    system = only["messages"][0]["content"]
    bounds = run_bounds(8_192, max_tokens=4096)
    assert system == system_prompt(bounds)
    for shape in (
        f"T=非空白文本，≤{bounds.max_text_chars} 字",
        f"S=非空白文本，≤{bounds.max_note_chars} 字",
        f"≤{bounds.max_analysis} 项",
        f"1-{bounds.max_cited} 个 A 类 ID",
        f"列表 ≤{bounds.max_list_items} 项",
        "未评估为 NO_GAIN",
        "只能由 NEGATIVE_OBSERVATION 引用",
        "零宽字符都算空白",
        "NOT_EXECUTED",
    ):
        assert shape in system
    assert "STOP_REQUIRED" in system  # the protocol rules stay


async def test_tool_schemas_mark_timestamps_as_date_time() -> None:
    with fake_openai([completion(text="{}")]) as srv:
        await use_case(srv.url).execute("payment-service 超时")
    tools = {t["function"]["name"]: t["function"]["parameters"] for t in srv.requests[0]["tools"]}
    logs_input = tools["query_logs"]["properties"]["input"]["properties"]
    assert logs_input["start"]["format"] == logs_input["end"]["format"] == "date-time"
    assert "title" not in json.dumps(tools)


async def test_strict_tools_send_every_property_required_and_the_call_still_validates() -> None:
    settings = load_settings(
        None,
        overrides={"model": {"provider": "openai", "base_url": "", "name": "m", "strict_tools": True}},
    )
    strict_call = {
        "id": "st-1",
        "name": "query_logs",
        "arguments": {
            "previous_observation": None,
            "input": {"service": "payment-service", **WINDOW, "level": None, "contains": None, "limit": 10},
        },
    }
    with fake_openai([completion(tool_calls=[strict_call]), completion(text="{}")]) as srv:
        model = build_model(settings.model.model_copy(update={"base_url": srv.url}), None)
        uc = DiagnosisUseCase(settings, model.generator, build_boundary(settings))
        events: list[RunEvent] = []
        uc.sinks.append(events.append)
        await uc.execute("payment-service 超时")
    tools = {t["function"]["name"]: t["function"] for t in srv.requests[0]["tools"]}
    logs = tools["query_logs"]
    assert logs["strict"] is True
    business = logs["parameters"]["properties"]["input"]
    assert set(business["required"]) == set(business["properties"])
    assert business["additionalProperties"] is False
    finished = [e for e in events if e["type"] == "tool_finished"]
    assert [e["status"] for e in finished] == ["FOUND"]  # explicit nulls are valid business input
