"""Runs as OpenTelemetry traces, received by a real OTLP/HTTP receiver (docs/contracts.md, "Traces").

Every run is sent to `tests.support.otlp.OtlpReceiver`, which decodes the exporter's real protobuf
requests as a collector would; the span tree, names, attributes, parent links and times are read
from what arrived, and compared with what the audit recorded for the same run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from agent.vocabulary import USAGE_ERROR
from console.traces.ids import span_id_of, trace_id_of
from console.traces.sink import instant_ns
from console.wiring import open_run_environment
from tests.support.audit_reader import AuditReader
from tests.support.hostile_text import small_hostile_strings
from tests.support.otlp import BlackHole, OtlpReceiver, ReceivedSpan, refused_endpoint
from tests.support.resilience import (
    CliRun,
    no_conclusion_draft,
    run_cli,
    scenario,
    tool_call,
    write_config,
    write_scenario,
)

SPAN_KIND_INTERNAL, SPAN_KIND_CLIENT = 1, 3
STATUS_UNSET, STATUS_ERROR = 0, 2


@pytest.fixture
def receiver() -> Any:
    with OtlpReceiver() as running:
        yield running


def traced_run(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, endpoint: str, *args: str | Path
) -> CliRun:
    return run_cli(
        capsys, "run", "--json", "--audit-db", tmp_path / "audit.db", "--trace-endpoint", endpoint, *args
    )


def tree(
    spans: list[ReceivedSpan], run_id: str
) -> tuple[ReceivedSpan, list[ReceivedSpan], list[ReceivedSpan]]:
    """The run's root, chat and execute_tool spans; every span of the run is one of them, in its trace."""
    mine = [s for s in spans if s.trace_id == f"{trace_id_of(run_id):032x}"]
    (root,) = [s for s in mine if not s.parent_id]
    assert root.attributes["diagnose.run.id"] == run_id
    chats = sorted(
        (s for s in mine if s.attributes["gen_ai.operation.name"] == "chat"),
        key=lambda s: s.attributes["diagnose.round"],
    )
    tools = sorted(
        (s for s in mine if s.attributes["gen_ai.operation.name"] == "execute_tool"), key=lambda s: s.start_ns
    )
    assert len(mine) == 1 + len(chats) + len(tools)
    for child in (*chats, *tools):
        assert child.parent_id == root.span_id
        assert root.start_ns <= child.start_ns <= child.end_ns <= root.end_ns
    return root, chats, tools


# --- the span tree of a run -----------------------------------------------------------------------------


def test_an_evidence_backed_run_is_one_trace_of_genai_spans_that_matches_its_audit(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, receiver: OtlpReceiver
) -> None:
    run = traced_run(capsys, tmp_path, receiver.endpoint, "--scenario", "evidence-backed-diagnosis")
    assert run.code == 0, run.err
    result = run.result
    root, chats, tools = tree(receiver.spans(), result["run_id"])
    db = tmp_path / "audit.db"

    assert root.name == "invoke_agent diagnosis"
    assert root.kind == SPAN_KIND_INTERNAL
    assert root.span_id == f"{span_id_of(result['run_id'], 'run'):016x}"
    assert root.resource["service.name"] == "diagnosis-console"
    assert root.status_code == STATUS_UNSET
    assert (
        root.attributes
        | {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "diagnosis",
            "gen_ai.conversation.id": result["session_id"],
            "gen_ai.provider.name": "scripted",
            "gen_ai.request.model": "evidence-backed-diagnosis",
            "gen_ai.usage.input_tokens": result["usage"]["prompt_tokens"],
            "gen_ai.usage.output_tokens": result["usage"]["completion_tokens"],
            "diagnose.usage.model_calls": 4,
            "diagnose.outcome": "DRAFT",
            "diagnose.stop_reason": "COMPLETED",
            "diagnose.budget.model_calls.used": 4,
            "diagnose.budget.model_calls.limit": 8,
            "diagnose.budget.tokens.used": result["usage"]["total_tokens"],
            "diagnose.protocol.max_consecutive_no_gain": 3,
        }
        == root.attributes
    )

    audit = AuditReader(db)
    run_row = audit.run(result["run_id"])
    assert run_row is not None
    assert (root.start_ns, root.end_ns) == (
        instant_ns(run_row["started_at"]),
        instant_ns(run_row["finished_at"]),
    )

    rounds = audit.model_rounds(result["run_id"])
    assert [c.name for c in chats] == ["chat evidence-backed-diagnosis"] * 4
    for chat, row in zip(chats, rounds, strict=True):
        assert chat.kind == SPAN_KIND_CLIENT
        assert chat.attributes["gen_ai.operation.name"] == "chat"
        assert chat.attributes["gen_ai.request.model"] == "evidence-backed-diagnosis"
        assert chat.attributes["gen_ai.conversation.id"] == result["session_id"]
        assert chat.attributes["gen_ai.usage.input_tokens"] == row["prompt_tokens"]
        assert chat.attributes["gen_ai.usage.output_tokens"] == row["completion_tokens"]
        assert chat.attributes["diagnose.round.tool_call_ids"] == json.loads(row["tool_call_ids"])
        assert (chat.start_ns, chat.end_ns) == (instant_ns(row["started_at"]), instant_ns(row["finished_at"]))

    invocations = audit.query("SELECT * FROM invocations WHERE run_id = ? ORDER BY seq", (result["run_id"],))
    assert [t.name for t in tools] == [f"execute_tool {row['tool']}" for row in invocations]
    for span, row in zip(tools, invocations, strict=True):
        assert span.kind == SPAN_KIND_INTERNAL
        assert span.span_id == f"{span_id_of(result['run_id'], 'call', row['tool_call_id']):016x}"
        assert span.attributes["gen_ai.tool.name"] == row["tool"]
        assert span.attributes["gen_ai.tool.call.id"] == row["tool_call_id"]
        assert span.attributes["gen_ai.tool.type"] == "function"
        assert span.attributes["diagnose.evidence.status"] == row["status"] == "FOUND"
        assert span.attributes.get("diagnose.evaluation") == row["evaluation"]
        assert (span.start_ns, span.end_ns) == (instant_ns(row["started_at"]), instant_ns(row["finished_at"]))
    # call-1 and call-2 were evaluated GAINED by the next call; call-3 was still pending at the Draft.
    assert [t.attributes.get("diagnose.evaluation") for t in tools] == ["GAINED", "GAINED", None]


def test_a_no_evidence_stop_keeps_its_empty_results_and_honest_ending(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, receiver: OtlpReceiver
) -> None:
    run = traced_run(capsys, tmp_path, receiver.endpoint, "--scenario", "tool-finds-no-evidence")
    assert run.code == 0
    assert run.result["draft"]["conclusion"] is None
    root, chats, tools = tree(receiver.spans(), run.result["run_id"])
    assert (root.attributes["diagnose.outcome"], root.attributes["diagnose.stop_reason"]) == (
        "DRAFT",
        "COMPLETED",
    )
    assert [t.attributes["diagnose.evidence.status"] for t in tools] == ["EMPTY", "EMPTY"]
    assert all(t.status_code == STATUS_UNSET and "diagnose.evaluation" not in t.attributes for t in tools)
    assert len(chats) == run.result["usage"]["model_calls"]


def test_a_saturated_run_shows_its_protocol_codes_on_the_root(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, receiver: OtlpReceiver
) -> None:
    run = traced_run(capsys, tmp_path, receiver.endpoint, "--scenario", "stop-required-ignored")
    assert run.code == 10
    root, _, _ = tree(receiver.spans(), run.result["run_id"])
    assert root.attributes["diagnose.outcome"] == "CONTROLLED_STOP"
    assert root.attributes["diagnose.stop_reason"] == "INFORMATION_SATURATED"
    codes = [attributes["diagnose.protocol.code"] for name, _, attributes in root.events]
    assert {name for name, _, _ in root.events} == {"diagnose.protocol"}
    assert "SATURATED" in codes
    assert "STOP_REQUIRED" in codes
    audited = AuditReader(tmp_path / "audit.db").query(
        "SELECT code, at FROM protocol_events WHERE run_id = ? ORDER BY seq", (run.result["run_id"],)
    )
    assert [(a["code"], instant_ns(a["at"])) for a in audited] == [
        (attributes["diagnose.protocol.code"], at) for _, at, attributes in root.events
    ]
    stop = next(a for _, _, a in root.events if a["diagnose.protocol.code"] == "STOP_REQUIRED")
    assert stop["diagnose.protocol.cause"] == "SATURATION"
    assert stop["diagnose.protocol.stop_required"] is True


def test_a_budget_stop_says_which_budget_ran_out(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, receiver: OtlpReceiver
) -> None:
    run = traced_run(capsys, tmp_path, receiver.endpoint, "--scenario", "model-call-budget-exhausted")
    assert run.code == 11
    root, chats, tools = tree(receiver.spans(), run.result["run_id"])
    assert root.attributes["diagnose.outcome"] == "BUDGET_EXHAUSTED"
    assert root.attributes["diagnose.stop_reason"] == "MODEL_CALLS_EXHAUSTED"
    assert root.attributes["diagnose.budget.exhausted"] == "MODEL_CALLS_EXHAUSTED"
    used, limit = (
        root.attributes["diagnose.budget.model_calls.used"],
        root.attributes["diagnose.budget.model_calls.limit"],
    )
    assert used == limit == len(chats) == run.result["usage"]["model_calls"]
    assert root.status_code == STATUS_UNSET  # a controlled stop is a result, not an error
    assert [t.attributes["gen_ai.tool.call.id"] for t in tools] == ["call-1", "call-2"]


def test_failures_set_the_span_status(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, receiver: OtlpReceiver
) -> None:
    failed = traced_run(capsys, tmp_path, receiver.endpoint, "--scenario", "fenced-json-fails-closed")
    tool_error = traced_run(capsys, tmp_path, receiver.endpoint, "--scenario", "tool-error-no-retry")
    spans = receiver.spans()

    root, _, _ = tree(spans, failed.result["run_id"])
    assert failed.code == 1
    assert (root.status_code, root.status_message) == (STATUS_ERROR, "INVALID_DRAFT")
    assert root.attributes["error.type"] == root.attributes["diagnose.failure.code"] == "INVALID_DRAFT"
    assert root.attributes["diagnose.failure.violation"] == failed.result["failure"]["violation"]

    root, _, tools = tree(spans, tool_error.result["run_id"])
    assert root.status_code == STATUS_UNSET
    (tool,) = tools
    code = tool.attributes["diagnose.error.code"]
    assert tool.attributes["diagnose.evidence.status"] == "ERROR"
    assert (tool.status_code, tool.attributes["error.type"]) == (STATUS_ERROR, code)


def test_a_rejected_run_is_a_root_span_with_its_reason(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, receiver: OtlpReceiver
) -> None:
    run = traced_run(capsys, tmp_path, receiver.endpoint, "--scenario", "oversized-query-rejected")
    assert run.code == 2
    root, chats, tools = tree(receiver.spans(), run.result["run_id"])
    assert chats == tools == []
    assert root.attributes["diagnose.outcome"] == "REJECTED"
    assert root.attributes["diagnose.stop_reason"] == "QUERY_TOO_LARGE"
    assert root.attributes["gen_ai.request.model"] == "oversized-query-rejected"
    assert root.start_ns == root.end_ns


async def test_a_cancelled_run_ends_every_span(tmp_path: Path, receiver: OtlpReceiver) -> None:
    waits = {"tool_calls": [tool_call("call-2", "lookup_knowledge", {"query": "回滚"}, evaluates="call-1")]}
    rounds: list[dict[str, Any]] = [
        {"tool_calls": [tool_call("call-1", "lookup_knowledge", {"query": "连接池 耗尽"})]},
        {**waits, "delay_ms": 60_000},  # the model "thinks": cancelled while it does
        {"text": no_conclusion_draft()},
    ]
    env = open_run_environment(
        scenario=str(write_scenario(tmp_path, scenario(rounds))),
        audit_db=tmp_path / "audit.db",
        trace_endpoint=receiver.endpoint,
    )
    assert env.scenario is not None
    use_case: Any = None

    def cancel_in_round_two(event: Any) -> None:
        if event.type == "model_round_started" and event.round == 2:
            use_case.cancel()

    use_case = env.use_case(sinks=[cancel_in_round_two])
    result = await use_case.execute(env.scenario.query)
    await env.aclose()

    assert (result.outcome, result.stop_reason) == ("CANCELLED", "CANCELLED")
    root, chats, tools = tree(receiver.spans(), result.run_id)
    assert (root.attributes["diagnose.outcome"], root.status_code) == ("CANCELLED", STATUS_UNSET)
    assert [c.attributes["diagnose.round"] for c in chats] == [1, 2]
    # Round 2 was waiting for the model: it ends with the run, marked by what ended it.
    assert chats[1].attributes["diagnose.ended_by"] == "CANCELLED"
    assert chats[1].end_ns == root.end_ns
    assert "gen_ai.usage.input_tokens" not in chats[1].attributes
    assert [t.attributes["gen_ai.tool.call.id"] for t in tools] == ["call-1"]


async def test_a_run_stopped_by_its_audit_ends_its_spans_failed_with_the_cause(
    tmp_path: Path, receiver: OtlpReceiver
) -> None:
    """The audit refused a write mid-run: the run still ends typed (FAILED / AGENT_ERROR, cause
    AUDIT_WRITE_FAILED) and its closing event reaches the trace, which says why."""
    env = open_run_environment(
        scenario="evidence-backed-diagnosis", audit_db=tmp_path / "audit.db", trace_endpoint=receiver.endpoint
    )
    assert env.scenario is not None

    def lose_the_audit(event: Any) -> None:  # after the audit wrote call-1's finish: the next write fails
        if event.type == "tool_finished" and event.tool_call_id == "call-1":
            env.audit.close()

    use_case = env.use_case(sinks=[lose_the_audit])
    result = await use_case.execute(env.scenario.query)
    await env.aclose()

    assert (result.outcome, result.stop_reason) == ("FAILED", "AGENT_ERROR")
    (root,) = [s for s in receiver.spans() if not s.parent_id]
    _, chats, tools = tree(receiver.spans(), root.attributes["diagnose.run.id"])
    assert root.attributes["diagnose.outcome"] == "FAILED"
    assert (root.status_code, root.attributes["error.type"]) == (STATUS_ERROR, "AGENT_ERROR")
    assert root.attributes["diagnose.failure.cause"] == "AUDIT_WRITE_FAILED"
    assert [t.attributes["gen_ai.tool.call.id"] for t in tools] == ["call-1"]
    assert len(chats) == 2


def test_a_reply_of_a_hundred_calls_lists_the_first_ids_and_counts_them(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, receiver: OtlpReceiver
) -> None:
    calls = [tool_call(f"call-{n}", "lookup_knowledge", {"query": f"连接池 {n}"}) for n in range(1, 101)]
    path = write_scenario(tmp_path, scenario([{"tool_calls": calls}, {"text": no_conclusion_draft()}]))
    run = traced_run(capsys, tmp_path, receiver.endpoint, "--scenario", path)
    root, chats, _ = tree(receiver.spans(), run.result["run_id"])
    assert chats[0].attributes["diagnose.round.tool_call_count"] == 100
    assert chats[0].attributes["diagnose.round.tool_call_ids"] == [f"call-{n}" for n in range(1, 65)]
    (capped,) = [a for _, _, a in root.events if a["diagnose.protocol.code"] == "TOO_MANY_CALLS"]
    assert (capped["diagnose.protocol.cap"], capped["diagnose.protocol.limit"]) == ("ROUND", 8)
    assert capped["diagnose.protocol.tool_call_count"] == 92
    assert capped["diagnose.protocol.tool_call_ids"] == [f"call-{n}" for n in range(9, 73)]


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(call_id=small_hostile_strings, tool=small_hostile_strings, text=small_hostile_strings)
def test_strings_from_a_hostile_model_never_cost_a_trace(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    receiver: OtlpReceiver,
    call_id: str,
    tool: str,
    text: str,
) -> None:
    """Whatever a model sends (as IDs, tool names, arguments), every span of the run arrives: a string
    the exporter could not encode would cost the whole batch, other runs' spans included."""
    calls = [
        tool_call(call_id, "lookup_knowledge", {"query": text}),
        tool_call("call-2", tool, {"query": text}),
    ]
    path = tmp_path / "hostile.json"  # JSON escapes keep lone surrogates writable
    path.write_text(json.dumps(scenario([{"tool_calls": calls}, {"text": no_conclusion_draft()}])), "utf-8")
    config = write_config(tmp_path / "diagnose.toml", {"telemetry.traces": {"capture_content": True}})
    # `--query=TEXT`: a generated text may start with "-", which argparse would read as an option.
    run = traced_run(
        capsys, tmp_path, receiver.endpoint, "--config", config, "--scenario", path, f"--query={text}"
    )
    assert run.code in (0, 2, 10, 11), run.err
    root, chats, _ = tree(receiver.spans(), run.result["run_id"])
    assert root.attributes["diagnose.outcome"] == run.result["outcome"]
    assert len(chats) == run.result["usage"]["model_calls"]


# --- configuration --------------------------------------------------------------------------------------


def test_the_configuration_turns_traces_on_and_the_environment_overrides_it(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    receiver: OtlpReceiver,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    config = write_config(
        tmp_path / "diagnose.toml",
        {"telemetry.traces": {"endpoint": refused_endpoint(), "service_name": "oncall"}},
    )
    monkeypatch.setenv("DIAGNOSE_TELEMETRY__TRACES__ENDPOINT", receiver.endpoint)
    run = run_cli(
        capsys,
        "run",
        "--json",
        "--config",
        config,
        "--audit-db",
        tmp_path / "a.db",
        "--scenario",
        "unknown-tool",
    )
    assert run.code == 0
    root, _, _ = tree(receiver.spans(), run.result["run_id"])
    assert root.resource["service.name"] == "oncall"


def test_no_endpoint_no_trace_and_no_opentelemetry(tmp_path: Path) -> None:
    env = open_run_environment(scenario="unknown-tool", audit_db=tmp_path / "audit.db")
    assert env.traces is None
    assert env.warnings == []
    assert type(env.use_case()).__name__ == "DiagnosisUseCase"


def test_sampling_zero_sends_no_span(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, receiver: OtlpReceiver
) -> None:
    config = write_config(tmp_path / "diagnose.toml", {"telemetry.traces": {"sample_ratio": 0.0}})
    run = traced_run(capsys, tmp_path, receiver.endpoint, "--config", config, "--scenario", "unknown-tool")
    assert run.code == 0
    assert receiver.spans() == []


@pytest.mark.parametrize(
    "url",
    [
        "http://user:pw@127.0.0.1:4318/v1/traces",
        "http://127.0.0.1:4318/v1/traces?api_key=abc",
        "ftp://127.0.0.1/v1/traces",
        "http:///v1/traces",
        "http://127.0.0.1:port/v1/traces",
    ],
)
def test_an_endpoint_with_credentials_or_no_host_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, url: str
) -> None:
    with pytest.raises(SystemExit) as usage:
        run_cli(capsys, "run", "--scenario", "unknown-tool", "--trace-endpoint", url)
    assert usage.value.code == USAGE_ERROR
    config = write_config(tmp_path / "diagnose.toml", {"telemetry.traces": {"endpoint": url}})
    run = run_cli(
        capsys, "run", "--config", config, "--audit-db", tmp_path / "a.db", "--scenario", "unknown-tool"
    )
    assert run.code == 3
    assert "pw" not in run.err
    assert "abc" not in run.err
    assert run.err.count("\n") == 1


def test_the_auth_header_comes_from_its_variable_and_is_a_secret(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    receiver: OtlpReceiver,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    token = "otlp-token-7f3a9c"
    monkeypatch.setenv("TRACE_AUTH", f"Authorization=Bearer%20{token},x-tenant=ops")
    config = write_config(tmp_path / "diagnose.toml", {"telemetry.traces": {"headers_env": "TRACE_AUTH"}})
    run = traced_run(
        capsys,
        tmp_path,
        receiver.endpoint,
        "--config",
        config,
        "--scenario",
        "unknown-tool",
        "--query",
        f"why {token}?",
    )
    assert run.code == 0
    assert receiver.headers
    assert all(h["authorization"] == f"Bearer {token}" and h["x-tenant"] == "ops" for h in receiver.headers)
    # The token is a configured secret: the query that held it was redacted before anything kept it.
    assert token not in (tmp_path / "audit.db").read_bytes().decode("utf-8", "replace")
    assert token.encode() not in b"".join(receiver.bodies)


def test_an_unset_header_variable_turns_traces_off_with_a_warning(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, receiver: OtlpReceiver
) -> None:
    config = write_config(
        tmp_path / "diagnose.toml", {"telemetry.traces": {"headers_env": "NOT_SET_ANYWHERE"}}
    )
    run = traced_run(capsys, tmp_path, receiver.endpoint, "--config", config, "--scenario", "unknown-tool")
    assert run.code == 0
    assert run.result["outcome"] == "DRAFT"
    assert run.err == (
        "diagnose: warning: traces are off: the variable NOT_SET_ANYWHERE that "
        "[telemetry.traces] headers_env names is not set\n"
    )
    assert receiver.spans() == []


def test_without_the_traces_extra_the_run_goes_on_with_a_warning(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    receiver: OtlpReceiver,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(__import__("sys").modules, "opentelemetry.sdk.trace", None)  # as if not installed
    run = traced_run(capsys, tmp_path, receiver.endpoint, "--scenario", "unknown-tool")
    assert run.code == 0
    assert run.err == (
        "diagnose: warning: traces are off: the OpenTelemetry packages are not installed "
        "(pip install 'diagnosis-console[traces]')\n"
    )


# --- a dead endpoint changes nothing ---------------------------------------------------------------------


@pytest.mark.parametrize("dead", ["refused", "black hole"])
def test_a_dead_endpoint_changes_neither_the_result_nor_the_audit(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, dead: str
) -> None:
    with BlackHole() as hole:
        endpoint = refused_endpoint() if dead == "refused" else hole.endpoint
        config = write_config(tmp_path / "diagnose.toml", {"telemetry.traces": {"flush_timeout_s": 0.2}})
        untraced = run_cli(
            capsys,
            "run",
            "--json",
            "--audit-db",
            tmp_path / "a.db",
            "--scenario",
            "evidence-backed-diagnosis",
        )
        traced = traced_run(
            capsys, tmp_path, endpoint, "--config", config, "--scenario", "evidence-backed-diagnosis"
        )
    assert (traced.code, traced.err) == (untraced.code, untraced.err) == (0, "")
    keep = ("outcome", "stop_reason", "draft", "progress", "usage", "failure")
    assert {k: traced.result[k] for k in keep} == {k: untraced.result[k] for k in keep}
    audited = {
        r["run_id"]: (r["outcome"], r["stop_reason"], r["model_calls"])
        for r in AuditReader(tmp_path / "audit.db").runs() + AuditReader(tmp_path / "a.db").runs()
    }
    assert audited[traced.result["run_id"]] == audited[untraced.result["run_id"]] == ("DRAFT", "COMPLETED", 4)


async def test_close_says_whether_the_spans_left(tmp_path: Path, receiver: OtlpReceiver) -> None:
    for endpoint, delivered in ((receiver.endpoint, True), (refused_endpoint(), False)):
        env = open_run_environment(
            scenario="unknown-tool", audit_db=tmp_path / "audit.db", trace_endpoint=endpoint
        )
        assert env.traces is not None
        await env.use_case().execute("why?")
        assert env.traces.close() is delivered
        assert env.traces.close() is True  # closed: nothing left to send
        await env.aclose()
    assert len({s.trace_id for s in receiver.spans()}) == 1
