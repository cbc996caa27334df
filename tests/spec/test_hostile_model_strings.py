"""No model string can crash a run (issue 21, item 3).

Every string a model sends is echoed somewhere: a tool name in the observation and the transcript
sent back to the provider, a tool call ID in events, the audit and citations, argument strings in the
transcript and the canonical input, the Draft's text in the result, and a reply's usage and finish
fields in the usage accounting. Each may hold lone surrogates (a JSON `\\ud800` escape), NUL, C0/C1
controls, bidi characters, or a mebibyte. Whatever it holds and wherever it sits, `diagnose run` ends
with a typed outcome and its exit code, one `run_finished` as the last event, a finished audit row,
and nothing on stderr: never an exception from JSON encoding, SQLite, logging or the terminal.

Through scripted scenario files (JSON, so surrogates travel as escapes) and through the real OpenAI
client against the local stub. Evidence a source returns is held to the same rule. Default variants
run a dozen or two examples each; under the `long` Hypothesis profile, hundreds.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.vocabulary import EXIT_CODE_OF, OUTCOME_OF, Outcome, StopReason
from audit import AuditSink
from audit.factory import open_audit_store
from audit.location import SqliteLocation
from tests.support import RecordingAdapter, harness, tool_messages_seen_by_model
from tests.support.audit_reader import AuditReader
from tests.support.hostile_text import hostile_strings, small_hostile_strings
from tests.support.hypothesis_budget import examples
from tests.support.openai_server import completion, fake_openai
from tests.support.resilience import (
    QUERY,
    WINDOW,
    CliRun,
    assert_audit_consistent,
    read_events,
    run_cli,
    run_cli_process,
    write_config,
)
from tests.support.spec_scenarios import call, found
from tools.unicode_text import encodable

KB = {"query": "支付超时 连接池"}
NULL_DRAFT: dict[str, Any] = {
    "conclusion": None,
    "analysis": [
        {
            "kind": "NEGATIVE_OBSERVATION",
            "statement": "没有证据。",
            "scope": "本次运行",
            "evidence": "NO_EVIDENCE",
        }
    ],
    "action_plan": [],
    "recommendations": [],
    "limitations": {"checked_scope": ["本次运行"], "missing_info": ["可用的证据"]},
}
SCRIPTED = settings(
    max_examples=examples(20, long=400), deadline=None, database=None, suppress_health_check=list(HealthCheck)
)
STUB = settings(
    max_examples=examples(12, long=400), deadline=None, database=None, suppress_health_check=list(HealthCheck)
)
# pydantic warns when the OpenAI client serializes a usage count that is text; `diagnose` sends
# warnings to its log (checked in a process of its own below), pytest would only collect them here.
pytestmark = pytest.mark.filterwarnings("ignore:Pydantic serializer warnings:UserWarning")


def _draft_with(field: str, s: str) -> dict[str, Any]:
    """The null Draft with `s` in one of its text fields (a citation counts as one)."""
    draft: dict[str, Any] = json.loads(json.dumps(NULL_DRAFT))
    item = draft["analysis"][0]
    match field:
        case "conclusion":
            draft["conclusion"] = s
        case "statement" | "scope":
            item[field] = s
        case "evidence":
            item["evidence"] = [s]
        case "action_plan" | "recommendations":
            draft[field] = [s]
        case _:
            draft["limitations"][field] = [s]
    return draft


DRAFT_FIELDS = (
    "conclusion",
    "statement",
    "scope",
    "evidence",
    "action_plan",
    "recommendations",
    "checked_scope",
    "missing_info",
)


# --- where a model string sits: one scripted model per place -------------------------------------------

Rounds = list[dict[str, Any]]


def _then_draft(*rounds: dict[str, Any]) -> Rounds:
    return [*rounds, {"text": json.dumps(NULL_DRAFT)}]


SCRIPTED_PLACES: dict[str, Callable[[str], Rounds]] = {
    "tool_name": lambda s: _then_draft({"tool_calls": [call("c1", s, KB)]}),
    "tool_call_id": lambda s: _then_draft({"tool_calls": [call(s, "lookup_knowledge", KB)]}),
    "argument_value": lambda s: _then_draft({"tool_calls": [call("c1", "lookup_knowledge", {"query": s})]}),
    "argument_key": lambda s: _then_draft(
        {"tool_calls": [call("c1", "lookup_knowledge", {"query": "x", s: 1})]}
    ),
    "envelope_key": lambda s: _then_draft(
        {"tool_calls": [{"id": "c1", "name": "query_logs", "arguments": {"input": KB, s: None}}]}
    ),
    "evaluated_id": lambda s: _then_draft(
        {"tool_calls": [call("c1", "lookup_knowledge", KB)]},
        {
            "tool_calls": [
                call("c2", "lookup_knowledge", {"query": "y"}, {"tool_call_id": s, "evaluation": "GAINED"})
            ]
        },
    ),
    "reply_text": lambda s: _then_draft({"text": s, "tool_calls": [call("c1", "lookup_knowledge", KB)]}),
    "draft_text": lambda s: [{"text": s}],
}


def _draft_place(field: str) -> Callable[[str], Rounds]:
    return lambda s: [{"text": json.dumps(_draft_with(field, s))}]


SCRIPTED_PLACES.update({f"draft_{field}": _draft_place(field) for field in DRAFT_FIELDS})


def _check_typed_run(run: CliRun, events_file: Path, audit: Path) -> dict[str, Any]:
    """A typed outcome, its exit code, one `run_finished` last, a finished audit row, a quiet stderr."""
    assert run.err == "", run.err[:500]
    result = run.result
    reason = StopReason(result["stop_reason"])
    assert result["outcome"] == OUTCOME_OF[reason]
    assert run.code == EXIT_CODE_OF[Outcome(result["outcome"])]
    events = read_events(events_file)
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert [e["type"] for e in events].count("run_finished") == 1
    assert events[-1]["type"] == "run_finished"
    assert events[-1]["result"] == result
    row = assert_audit_consistent(audit, [result["run_id"]])[result["run_id"]]
    assert (row["outcome"], row["stop_reason"]) == (result["outcome"], result["stop_reason"])
    return result


def _scripted_run(
    capsys: pytest.CaptureFixture[str], folder: Path, rounds: Rounds
) -> tuple[dict[str, Any], Path]:
    work = Path(tempfile.mkdtemp(dir=folder))
    scenario = work / "scenario.json"
    # Plain json.dumps: ASCII with escapes, the way a lone surrogate reaches a file at all.
    scenario.write_text(json.dumps({"name": "hostile", "query": QUERY, "rounds": rounds}), encoding="utf-8")
    audit, events = work / "audit.db", work / "events.ndjson"
    run = run_cli(capsys, "run", "--scenario", scenario, "--json", "--audit-db", audit, "--events", events)
    return _check_typed_run(run, events, audit), events


def _check_scripted(capsys: pytest.CaptureFixture[str], folder: Path, place: str, s: str) -> None:
    result, events_file = _scripted_run(capsys, folder, SCRIPTED_PLACES[place](s))
    if place == "tool_name":
        # The UNKNOWN_TOOL control, and the run goes on to its Draft.
        events = read_events(events_file)
        unknown = [e for e in events if e["type"] == "protocol_changed" and e["code"] == "UNKNOWN_TOOL"]
        assert [e["tool_call_id"] for e in unknown] == ["c1"]
        assert (result["outcome"], result["usage"]["model_calls"]) == ("DRAFT", 2)


@SCRIPTED
@given(place=st.sampled_from(sorted(SCRIPTED_PLACES)), s=small_hostile_strings)
def test_a_hostile_string_anywhere_in_a_scripted_reply_ends_typed(
    place: str, s: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _check_scripted(capsys, tmp_path, place, s)


@pytest.mark.parametrize("name", ["lookup_\ud800", "query_logs\udfff", "\ud83d\ude00"])
def test_an_unknown_tool_whose_name_cannot_be_encoded_gets_unknown_tool_and_the_run_goes_on(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result, events_file = _scripted_run(capsys, tmp_path, SCRIPTED_PLACES["tool_name"](name))

    assert (result["outcome"], result["stop_reason"], result["usage"]["model_calls"]) == (
        "DRAFT",
        "COMPLETED",
        2,
    )
    events = read_events(events_file)
    assert [(e["code"], e["tool_call_id"]) for e in events if e["type"] == "protocol_changed"] == [
        ("UNKNOWN_TOOL", "c1")
    ]
    assert not [e for e in events if e["type"] == "tool_started"]


def test_a_draft_whose_json_escapes_decode_to_a_surrogate_fails_as_invalid_draft(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result, _ = _scripted_run(capsys, tmp_path, SCRIPTED_PLACES["draft_action_plan"]("\ud800"))

    assert (result["outcome"], result["stop_reason"]) == ("FAILED", "INVALID_DRAFT")
    assert result["failure"]["violation"] == "INVALID_ENCODING"


# --- the real OpenAI client: what the server's JSON can carry -------------------------------------------

Replies = list[dict[str, Any]]
KB_ARGS = json.dumps({"previous_observation": None, "input": KB})


def _reply(text: str | None = None, calls: list[dict[str, Any]] | None = None, **top: Any) -> dict[str, Any]:
    """A chat completion; `calls` are raw OpenAI tool calls (arguments are JSON text, possibly broken)."""
    reply = completion(text=text)
    choice = reply["choices"][0]
    if calls:
        choice["message"]["tool_calls"] = calls
        choice["finish_reason"] = "tool_calls"
    for key, value in top.items():
        if key == "finish_reason":
            choice["finish_reason"] = value
        else:
            reply[key] = value
    return reply


def _raw_call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def _final() -> dict[str, Any]:
    return _reply(json.dumps(NULL_DRAFT))


STUB_PLACES: dict[str, Callable[[str], Replies]] = {
    "tool_name": lambda s: [_reply(calls=[_raw_call("c1", s, KB_ARGS)]), _final()],
    "tool_call_id": lambda s: [_reply(calls=[_raw_call(s, "lookup_knowledge", KB_ARGS)]), _final()],
    "argument_value": lambda s: [
        _reply(calls=[_raw_call("c1", "query_logs", json.dumps({"input": {"service": s}}))]),
        _final(),
    ],
    "malformed_arguments": lambda s: [
        _reply(text="thinking", calls=[_raw_call("c1", "lookup_knowledge", '{"input": {"query": "' + s)]),
        _final(),
    ],
    "reply_text": lambda s: [_reply(text=s, calls=[_raw_call("c1", "lookup_knowledge", KB_ARGS)]), _final()],
    "draft_text": lambda s: [_reply(text=s)],
    "draft_field": lambda s: [_reply(text=json.dumps(_draft_with("missing_info", s)))],
    "usage": lambda s: [_reply(text=json.dumps(NULL_DRAFT), usage={"prompt_tokens": s, "total_tokens": [s]})],
    "finish_reason": lambda s: [_reply(text=json.dumps(NULL_DRAFT), finish_reason=s)],
    "model_field": lambda s: [_reply(text=json.dumps(NULL_DRAFT), model=s)],
    "truncated_call": lambda s: [
        _reply(calls=[_raw_call(s, s, KB_ARGS)], finish_reason="length"),
    ],
}


def _check_stub(capsys: pytest.CaptureFixture[str], folder: Path, place: str, s: str) -> None:
    work = Path(tempfile.mkdtemp(dir=folder))
    audit, events = work / "audit.db", work / "events.ndjson"
    with fake_openai(STUB_PLACES[place](s)) as stub:
        config = write_config(
            work / "config.toml",
            {"model": {"provider": "openai", "base_url": stub.url, "name": "test-model", "timeout_s": 10}},
        )
        run = run_cli(
            capsys,
            "run", "--query", QUERY, "--config", config, "--json", "--audit-db", audit, "--events", events,
        )  # fmt: skip
        sent = list(stub.requests)
    result = _check_typed_run(run, events, audit)
    assert len(sent) == result["usage"]["model_calls"], "every model round reached the server, once"
    if place == "tool_name":
        assert (result["outcome"], result["usage"]["model_calls"]) == ("DRAFT", 2)


@STUB
@given(place=st.sampled_from(sorted(STUB_PLACES)), s=hostile_strings)
def test_a_hostile_string_anywhere_in_a_provider_reply_ends_typed(
    place: str, s: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _check_stub(capsys, tmp_path, place, s)


@pytest.mark.parametrize("place", ["tool_name", "argument_value", "reply_text", "malformed_arguments"])
def test_a_lone_surrogate_in_a_provider_reply_ends_typed_and_quiet(
    place: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The transcript sent back holds U+FFFD where the model sent a lone surrogate, so the next request
    can be encoded; a malformed call Haystack skips is logged escaped, not with a traceback on stderr."""
    _check_stub(capsys, tmp_path, place, "x\ud800y")


def test_a_provider_reply_whose_odd_fields_make_libraries_complain_leaves_stderr_empty(
    tmp_path: Path,
) -> None:
    """In a process of its own, as an operator runs it: Haystack logs the malformed call's arguments
    (a lone surrogate, an escape sequence) and pydantic warns about a usage count that is text; both
    go to the log, escaped, and the terminal shows only the result."""
    broken = _raw_call("c1", "lookup_knowledge", '{"input": {"query": "\ud800\x1b[2J')
    reply = _reply(text="thinking", calls=[broken], usage={"prompt_tokens": "\ud800", "total_tokens": "x"})
    audit = tmp_path / "audit.db"
    with fake_openai([reply]) as stub:
        config = write_config(
            tmp_path / "config.toml",
            {"model": {"provider": "openai", "base_url": stub.url, "name": "test-model", "timeout_s": 10}},
        )
        run = run_cli_process("run", "--query", QUERY, "--config", config, "--json", "--audit-db", audit)

    assert run.err == ""
    assert run.code == 1
    assert (run.result["outcome"], run.result["stop_reason"]) == ("FAILED", "INVALID_DRAFT")
    assert_audit_consistent(audit, [run.result["run_id"]])
    log = (tmp_path / "state" / "diagnosis-console" / "diagnose.log").read_text(encoding="utf-8")
    assert "\\ud800" in log  # the malformed arguments, escaped


# --- evidence: what a source returns is shown, whatever it holds -----------------------------------------


def test_a_log_line_whose_json_escape_decodes_to_a_surrogate_is_evidence_not_a_crash(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    line = {
        "ts": "2026-11-30T02:10:00Z",
        "service": "payment-service",
        "level": "ERROR",
        "message": "bad \ud800 row",
    }
    (logs / "app.ndjson").write_text(json.dumps(line) + "\n", encoding="utf-8")  # the escape, as written
    config = write_config(tmp_path / "config.toml", {"logs": {"source": "file", "path": logs}})
    rounds = _then_draft({"tool_calls": [call("c1", "query_logs", {"service": "payment-service", **WINDOW})]})
    scenario = tmp_path / "scenario.json"
    scenario.write_text(json.dumps({"name": "logs", "query": QUERY, "rounds": rounds}), encoding="utf-8")
    audit, events = tmp_path / "audit.db", tmp_path / "events.ndjson"

    run = run_cli(
        capsys,
        "run",
        "--scenario",
        scenario,
        "--config",
        config,
        "--json",
        "--audit-db",
        audit,
        "--events",
        events,
    )

    result = _check_typed_run(run, events, audit)
    assert (result["outcome"], result["stop_reason"]) == ("DRAFT", "COMPLETED")
    finished = [e for e in read_events(events) if e["type"] == "tool_finished"]
    assert [e["status"] for e in finished] == ["FOUND"]
    assert finished[0]["projection"]["entries"][0]["message"] == "bad \ufffd row"


@SCRIPTED
@given(values=st.lists(small_hostile_strings, min_size=1, max_size=3))
async def test_any_evidence_string_reaches_the_model_and_the_audit_as_text(
    values: list[str], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Whatever text a source answers with (any adapter: this one answers what it is given), the run
    ends typed and the audit holds it; text that is not Unicode arrives as U+FFFD."""
    documents = [{"title": v, "source": "x.md", "snippet": v, "score": 1.0} for v in values]
    kb = RecordingAdapter(answer=found({"documents": documents, "returned": len(documents)}))
    folder = tmp_path_factory.mktemp("evidence")
    store = open_audit_store(SqliteLocation(folder / "audit.db"))
    rounds = _then_draft({"tool_calls": [call("c1", "lookup_knowledge", KB)]})
    h = harness({"name": "evidence", "query": QUERY, "rounds": rounds}, adapters={"lookup_knowledge": kb})
    h.use_case.required_sinks.append(AuditSink(store))
    try:
        result = await h.run()
        assert (result.outcome, result.stop_reason) == ("DRAFT", "COMPLETED")
        (message,) = tool_messages_seen_by_model(h.generator, 1)
        assert message.tool_call_result is not None
        assert isinstance(message.tool_call_result.result, str)
        seen = json.loads(message.tool_call_result.result)
        assert [d["snippet"] for d in seen["data"]["documents"]] == [encodable(v) for v in values]
        (row,) = AuditReader(store).invocations(result.run_id)
        assert row["status"] == "FOUND"
        assert json.loads(row["projection_json"]) == seen["data"]
    finally:
        store.close()
