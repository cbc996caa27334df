"""The Detail panel shows the observation a call that ran nothing got, exactly as the model received it
(issue 12, item 11): a duplicate call, an invalid progress envelope, and calls refused because the run
had to stop (collection stopped, a budget spent in that round).

Real runs of scenario files through the real engine on the investigate screen; the tool messages the
harness answered with are captured where they are built (the same `ChatMessage.from_tool` the engine
calls), and, where the model got another round, also from what the scripted model received.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from haystack.dataclasses import ChatMessage
from rich.console import Group
from rich.json import JSON
from textual.widgets import Static

from agent.model.scripted import ScriptedChatGenerator
from console.app import DiagnoseApp
from console.run_state import RunState
from console.widgets.detail import DetailPanel, entry_detail
from tests.support.console import SIZE, plain, run_to_end
from tests.support.engine import harness, scenario_from, tool_messages_seen_by_model

AppFactory = Callable[..., DiagnoseApp]

LOGS_ERROR = (
    "{previous_observation: null, input: {service: account-service, start: '2026-11-30T02:00:00Z', "
    "end: '2026-11-30T03:00:00Z', level: ERROR, limit: 20}}"
)
LOGS_WARN = (
    "{previous_observation: null, input: {service: order-service, start: '2026-11-30T02:00:00Z', "
    "end: '2026-11-30T03:00:00Z', level: WARN, limit: 20}}"
)
NO_CONCLUSION = (
    '\'{"conclusion": null, "analysis": [], "action_plan": [], "recommendations": [], '
    '"limitations": {"checked_scope": [], "missing_info": ["not enough evidence"]}}\''
)


def scenario_file(folder: Path, name: str, *rounds: str) -> str:
    """A trainer's scenario file: one line per model round (a tool call, or the final text)."""
    lines = [f"name: {name}", f"title: {name}", "description: detail test", "query: 'q'", "rounds:"]
    lines += [f"  - {r}" for r in rounds]
    path = folder / f"{name}.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def call(tool_call_id: str, tool: str, arguments: str) -> str:
    return f"tool_calls: [{{id: {tool_call_id}, name: {tool}, arguments: {arguments}}}]"


@pytest.fixture
def answered(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Every tool message built during the test, by tool call ID: the text handed to the model."""
    sent: dict[str, str] = {}
    original = ChatMessage.from_tool

    def recording(*args: Any, **kwargs: Any) -> ChatMessage:
        message = original(*args, **kwargs)
        result = message.tool_call_result
        assert result is not None
        assert result.origin.id is not None
        assert isinstance(result.result, str)
        sent[result.origin.id] = result.result
        return message

    monkeypatch.setattr(ChatMessage, "from_tool", staticmethod(recording))
    return sent


async def detail_of(app: DiagnoseApp, pilot: Any, tool_call_id: str) -> tuple[str, JSON | None]:
    """Select the call in the timeline with the keyboard, as an operator does; return what the Detail
    panel then shows (its plain text, and the observation's JSON block if it shows one)."""
    timeline = app.investigate.run_view.timeline
    timeline.focus()
    await pilot.press("home")
    for _ in range(timeline.line_count):
        node = timeline.cursor_node
        if node is not None and node.data == ("call", tool_call_id):
            break
        await pilot.press("down")
    assert timeline.cursor_node is not None
    assert timeline.cursor_node.data == ("call", tool_call_id)
    await pilot.pause()
    panel = app.investigate.query_one(DetailPanel)
    assert panel.key == ("call", tool_call_id)
    body = panel.query_one("#detail-body", Static).content
    assert isinstance(body, Group)
    blocks = list(body.renderables)
    texts = [plain(b) for b in blocks]
    heading = next((i for i, t in enumerate(texts) if "exactly what the model saw" in t), None)
    block = blocks[heading + 1] if heading is not None else None
    assert block is None or isinstance(block, JSON)
    return " ".join(" ".join(texts).split()), block


def compact(block: JSON) -> str:
    """The shown JSON in the compact form the harness sends: equal text means the same keys, order
    and values as the model's message."""
    return json.dumps(json.loads(block.text.plain), ensure_ascii=False, separators=(",", ":"))


def model_received(app: DiagnoseApp, tool_call_id: str) -> str:
    """The tool message for this call in what the scripted model received in a later round."""
    for messages in app.investigate.use_case.chat_generator.received:
        for message in messages:
            result = message.tool_call_result
            if result is not None and result.origin.id == tool_call_id:
                return str(result.result)
    raise AssertionError(f"the model never received an answer for {tool_call_id}")


CASES: dict[str, tuple[Callable[[Path], str], str, str, dict[str, Any]]] = {
    "duplicate": (
        lambda folder: scenario_file(
            folder,
            "duplicate",
            call("call-1", "query_logs", LOGS_ERROR),
            call("call-2", "query_logs", LOGS_ERROR),
            f"text: {NO_CONCLUSION}",
        ),
        "call-2",
        "query_logs",
        {"code": "DUPLICATE_CALL"},
    ),
    "invalid-envelope": (
        lambda folder: scenario_file(
            folder,
            "invalid-envelope",
            call("call-1", "query_logs", LOGS_WARN),
            call("call-2", "lookup_knowledge", "{previous_observation: null, input: {query: timeout}}"),
            f"text: {NO_CONCLUSION}",
        ),
        "call-2",
        "lookup_knowledge",
        {
            "code": "INVALID_PROGRESS_PROTOCOL",
            "missing_field": "previous_observation",
            "expected_tool_call_id": "call-1",
        },
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
async def test_a_refused_call_shows_the_control_observation_the_model_received(
    case: str, app_factory: AppFactory, tmp_path: Path, answered: dict[str, str]
) -> None:
    make, tool_call_id, tool, control = CASES[case]
    app = app_factory(make(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await run_to_end(pilot)
        received = model_received(app, tool_call_id)
        assert received == answered[tool_call_id]
        sent = json.loads(received)
        assert sent["evidence_status"] == "NOT_EXECUTED"
        assert sent["control"] == control

        text, block = await detail_of(app, pilot, tool_call_id)
        assert block is not None, text
        assert compact(block) == received
        assert text.startswith(f"{tool_call_id} {tool} round 2 NOT_EXECUTED")
        assert "Not executed: nothing ran for this call" in text
        assert "Observation" in text
        assert "Observation" not in text.split("Observation")[0]
        assert "(tool name not recorded)" not in text
        assert "Observation(" not in text


@pytest.mark.parametrize(
    ("scenario", "tool_call_id", "tool", "round_"),
    [
        ("stop-required-ignored", "call-3", "query_logs", 3),  # the final opportunity spent on a tool
        ("token-budget-exhausted", "call-2", "lookup_knowledge", 2),  # the round spent the token budget
    ],
)
async def test_a_call_refused_because_the_run_must_stop_shows_its_observation(
    scenario: str,
    tool_call_id: str,
    tool: str,
    round_: int,
    app_factory: AppFactory,
    answered: dict[str, str],
) -> None:
    app = app_factory(scenario)
    async with app.run_test(size=SIZE) as pilot:
        await run_to_end(pilot)
        sent = answered[tool_call_id]  # the run stops: the model gets no later round to read it in
        assert json.loads(sent) == {
            "tool_call_id": tool_call_id,
            "tool": tool,
            "evidence_status": "NOT_EXECUTED",
            "control": {"code": "STOP_REQUIRED"},
        }
        text, block = await detail_of(app, pilot, tool_call_id)
        assert block is not None, text
        assert compact(block) == sent
        assert text.startswith(f"{tool_call_id} {tool} round {round_} NOT_EXECUTED")
        assert "Not executed: nothing ran for this call" in text


async def test_an_invalid_input_shows_the_error_observation_not_a_control(
    app_factory: AppFactory, tmp_path: Path, answered: dict[str, str]
) -> None:
    bad = "{previous_observation: null, input: {service: account-service}}"
    path = scenario_file(tmp_path, "bad-input", call("call-1", "query_logs", bad), f"text: {NO_CONCLUSION}")
    app = app_factory(path)
    async with app.run_test(size=SIZE) as pilot:
        await run_to_end(pilot)
        received = model_received(app, "call-1")
        assert json.loads(received)["error_code"] == "INVALID_INPUT"
        text, block = await detail_of(app, pilot, "call-1")
        assert block is not None
        assert compact(block) == received
        assert "input was refused before anything ran" in text
        assert "NOT_EXECUTED" not in text


def engine_run(scenario: dict[str, Any]) -> tuple[list[Any], list[dict[str, Any]], ScriptedChatGenerator]:
    """A real run without the console: the event objects in-process sinks get, and their JSON."""
    objects: list[Any] = []
    h = harness(scenario_from(scenario), sinks=[objects.append])
    asyncio.run(h.run())
    return objects, h.events, h.generator


def script(*rounds: dict[str, Any]) -> dict[str, Any]:
    names = {"name": "detail", "title": "detail", "description": "detail"}
    return {**names, "query": "q", "rounds": list(rounds)}


def logs_call(tool_call_id: str) -> dict[str, Any]:
    business = {
        "service": "account-service",
        "start": "2026-11-30T02:00:00Z",
        "end": "2026-11-30T03:00:00Z",
        "level": "ERROR",
        "limit": 20,
    }
    arguments = {"previous_observation": None, "input": business}
    return {"tool_calls": [{"id": tool_call_id, "name": "query_logs", "arguments": arguments}]}


FINAL = {"text": NO_CONCLUSION.strip("'")}  # the final round's Draft text


def test_the_observation_stays_off_the_wire_and_a_replay_says_it_is_not_recorded() -> None:
    objects, wire, generator = engine_run(script(logs_call("call-1"), logs_call("call-2"), FINAL))
    assert all("unexecuted_observations" not in json.dumps(event) for event in wire)
    sent = next(
        m.tool_call_result.result
        for m in tool_messages_seen_by_model(generator, 2)
        if m.tool_call_result is not None and m.tool_call_result.origin.id == "call-2"
    )

    live, replay = RunState(), RunState()
    live.apply_all(objects)
    replay.apply_all(wire)
    live_text = detail_text(live, "call-2")
    assert "exactly what the model saw" in live_text
    assert json.dumps(live.calls["call-2"].observation, ensure_ascii=False, separators=(",", ":")) == sent

    replay_text = detail_text(replay, "call-2")
    assert "exactly what the model saw" not in replay_text  # nothing shown, so nothing promised
    assert "evidence_status NOT_EXECUTED, control DUPLICATE_CALL" in replay_text
    assert "does not hold its exact text" in replay_text
    assert replay_text.startswith("call-2 (tool name not recorded)")


def test_a_hostile_tool_name_in_a_control_observation_is_shown_inert() -> None:
    name = "evil\x1b[2J\x07[bold red]x[/]"
    arguments = {"previous_observation": None, "input": {"query": "x"}}
    rounds = [{"tool_calls": [{"id": "call-1", "name": name, "arguments": arguments}]}]
    objects, _, generator = engine_run(script(*rounds, FINAL))
    message = tool_messages_seen_by_model(generator, 1)[0].tool_call_result
    assert message is not None
    sent = json.loads(message.result)
    assert sent["tool"] == name
    assert sent["control"] == {"code": "UNKNOWN_TOOL"}

    state = RunState()
    state.apply_all(objects)
    text = detail_text(state, "call-1")
    assert "\x1b" not in text
    assert "\x07" not in text
    assert "[bold red]x[/]" in text  # markup shown as text, never applied
    assert "exactly what the model saw" in text
    assert "UNKNOWN_TOOL" in text


def detail_text(state: RunState, tool_call_id: str) -> str:
    parts = entry_detail(state, ("call", tool_call_id), show_timings=False)
    return " ".join(" ".join(plain(part) for part in parts).split())
