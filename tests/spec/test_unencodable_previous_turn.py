"""A previous turn that cannot be encoded is a typed rejection (issue 21, item 2).

A PreviousTurn is sent to the model, shown and audited, all as UTF-8. One holding a lone surrogate
(what a JSON `\\ud800` escape decodes to) is REJECTED / PREVIOUS_TURN_INVALID before any model call,
with a `run_finished` and an audit row; a scenario file holding one is refused at load (exit 3, one
line). Through the real Agent, the CLI and the real SQLite audit.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from pydantic_core import ErrorDetails

from agent.contracts import Limitations, PreviousTurn
from agent.scenarios import ScenarioError, parse_scenario
from tests.support import harness
from tests.support.hostile_text import small_hostile_strings
from tests.support.resilience import assert_audit_consistent, run_cli
from tests.support.spec_scenarios import NULL_DRAFT, scenario, text_round

FOLLOW_UP = "回滚之后还有超时吗？"
NOT_UNICODE = "the previous turn is not valid Unicode text (it holds a lone surrogate)"
LONE_SURROGATE = " is not valid Unicode text (it holds a lone surrogate)"  # after the string's path
TURN: dict[str, Any] = {
    "query": "payment-service 超时，请诊断。",
    "conclusion": "连接池耗尽。",
    "limitations": {"checked_scope": ["payment-service 日志"], "missing_info": ["数据库锁等待"]},
}
SURROGATE_PLACES = {
    "conclusion": {**TURN, "conclusion": "连接池\ud800耗尽"},
    "checked_scope": {**TURN, "limitations": {"checked_scope": ["\udfff"], "missing_info": []}},
    "missing_info": {**TURN, "limitations": {"checked_scope": [], "missing_info": ["ok", "a\ud83db"]}},
    "query": {**TURN, "query": "payment-service \ud800"},
}


@pytest.mark.parametrize("turn", list(SURROGATE_PLACES.values()), ids=list(SURROGATE_PLACES))
async def test_a_previous_turn_holding_a_lone_surrogate_is_rejected_before_any_model_call(
    turn: dict[str, Any],
) -> None:
    h = harness(scenario(text_round(NULL_DRAFT)))

    result = await h.run(FOLLOW_UP, turn)

    assert (result.outcome, result.stop_reason) == ("REJECTED", "PREVIOUS_TURN_INVALID")
    assert result.failure is not None
    assert result.failure.detail == NOT_UNICODE
    assert h.generator.calls == 0
    assert result.usage.model_calls == 0
    assert [e["type"] for e in h.events] == ["run_finished"]


async def test_a_previous_turn_built_without_validation_is_rejected_too() -> None:
    turn = PreviousTurn.model_construct(
        query="q", conclusion="\ud800", limitations=Limitations(checked_scope=[], missing_info=[])
    )
    h = harness(scenario(text_round(NULL_DRAFT)))

    result = await h.run(FOLLOW_UP, turn)

    assert (result.outcome, result.stop_reason, h.generator.calls) == ("REJECTED", "PREVIOUS_TURN_INVALID", 0)
    assert result.failure is not None
    assert result.failure.detail == NOT_UNICODE


def test_a_previous_turn_file_with_a_surrogate_escape_is_rejected_exit_2_and_audited(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    turn_file = tmp_path / "turn.json"
    # JSON escapes, as a file written by any JSON encoder holds them: the file itself is plain ASCII.
    turn_file.write_text(json.dumps(SURROGATE_PLACES["checked_scope"]), encoding="utf-8")
    audit, events = tmp_path / "audit.db", tmp_path / "events.ndjson"

    run = run_cli(
        capsys,
        "run", "--query", FOLLOW_UP, "--previous-turn", turn_file, "--json",
        "--audit-db", audit, "--events", events,
    )  # fmt: skip

    assert run.code == 2
    result = run.result
    assert (result["outcome"], result["stop_reason"]) == ("REJECTED", "PREVIOUS_TURN_INVALID")
    assert result["failure"] == {"code": "PREVIOUS_TURN_INVALID", "detail": NOT_UNICODE}
    assert result["usage"]["model_calls"] == 0
    lines = [json.loads(line) for line in events.read_text(encoding="utf-8").splitlines()]
    assert [e["type"] for e in lines] == ["run_finished"]
    row = assert_audit_consistent(audit, [result["run_id"]])[result["run_id"]]
    assert (row["outcome"], row["stop_reason"]) == ("REJECTED", "PREVIOUS_TURN_INVALID")
    assert row["query"] == FOLLOW_UP


def test_a_scenario_whose_previous_turn_holds_a_surrogate_is_refused_at_load_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = {
        "name": "bad-turn",
        "query": FOLLOW_UP,
        "previous_turn": SURROGATE_PLACES["missing_info"],
        "rounds": [{"text": NULL_DRAFT}],
    }
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps(data), encoding="utf-8")  # the surrogate as a JSON escape
    audit = tmp_path / "audit.db"

    run = run_cli(capsys, "run", "--scenario", path, "--json", "--audit-db", audit)

    assert run.code == 3
    assert run.out == ""
    assert run.err.count("\n") == 1
    assert run.err.startswith("diagnose: ")
    assert "previous_turn.limitations.missing_info[1] is not valid Unicode text" in run.err
    assert "\ud83d" not in run.err


# --- the class: any string of a previous turn, any hostile content ---------------------------------------

turn_strings = st.one_of(small_hostile_strings, st.sampled_from(["连接池耗尽", "x", " "]))
hostile_turns = st.fixed_dictionaries(
    {
        "query": turn_strings,
        "conclusion": st.none() | turn_strings,
        "limitations": st.fixed_dictionaries(
            {
                "checked_scope": st.lists(turn_strings, max_size=3),
                "missing_info": st.lists(turn_strings, max_size=3),
            }
        ),
    }
)


def _lone_surrogate(text: str) -> bool:
    return any("\ud800" <= char <= "\udfff" for char in text)


def _strings(value: dict[str, Any]) -> list[str]:
    limitations = value["limitations"]
    return [
        value["query"],
        value["conclusion"] or "",
        *limitations["checked_scope"],
        *limitations["missing_info"],
    ]


def _validated(value: dict[str, Any]) -> PreviousTurn | list[ErrorDetails]:
    """The turn, or why it was refused."""
    try:
        return PreviousTurn.model_validate(value)
    except ValidationError as error:
        return error.errors(include_input=False)


@settings(max_examples=40, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(hostile_turns)
def test_a_previous_turn_is_refused_or_can_be_sent_shown_and_stored(value: dict[str, Any]) -> None:
    turn = _validated(value)
    if isinstance(turn, PreviousTurn):
        assert not any(map(_lone_surrogate, _strings(value)))
        # Every string of it is UTF-8 text, so it serializes for the model, the screen and the audit.
        turn.model_dump_json().encode("utf-8")
        return
    # Refused for one of two reasons only: a blank query, or a lone surrogate (the turn says where).
    for problem in turn:
        if problem["type"] == "string_unicode":  # the field's own check: a query holding one
            assert problem["loc"] == ("query",)
            assert _lone_surrogate(value["query"])
        elif problem["loc"] == ("query",):
            assert problem["msg"] in {
                "String should have at least 1 character",
                "Value error, must not be blank",
            }
        else:
            assert problem["msg"].startswith("Value error, previous_turn."), problem
            assert problem["msg"].endswith(LONE_SURROGATE), problem
            assert any(map(_lone_surrogate, _strings(value)))


@settings(max_examples=40, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(hostile_turns)
def test_a_scenario_previous_turn_is_a_scenario_error_or_usable(value: dict[str, Any]) -> None:
    text = json.dumps({"name": "n", "previous_turn": value, "rounds": [{"text": "x"}]})
    try:
        loaded = parse_scenario(text)
    except ScenarioError as error:
        refusal = str(error)
    else:
        assert loaded.previous_turn is not None
        loaded.previous_turn.model_dump_json().encode("utf-8")
        return
    assert "\n" not in refusal
    assert refusal.startswith("<scenario>: "), refusal
    reasons = (
        LONE_SURROGATE,
        "unable to parse raw data as a unicode string",
        "must not be blank",
        "at least 1 character",
    )
    assert refusal.endswith(reasons), refusal
