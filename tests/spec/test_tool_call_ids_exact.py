"""Tool call IDs are kept exact (issue 21, item 4).

An ID is an identifier, not content: the redaction step must not rewrite one that merely looks like a
credential (`token:abc123x`), or two IDs of one round become one audit key and the run dies, and a
Draft's citation no longer names its invocation. Events, the audit, the observations the model sees,
the Draft's citations, the progress checks and `diagnose run`'s output all keep the ID the model
emitted. The one exception is an ID holding a configured secret value: that call is answered with
INVALID_PROGRESS_PROTOCOL (`invalid_field: tool_call_id`) under an assigned ID, never executed, and
the secret is echoed nowhere. The team audit compares keys with trailing spaces ignored, so an ID
ending in a space is refused the same way rather than colliding there, and so is an ID that shows as
nothing (only blank characters), which no Draft could cite.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.blank_text import BLANK_RANGES
from agent.model.scripted import ScriptedChatGenerator
from agent.scenarios import Scenario
from agent.settings import load_settings
from agent.use_case import DiagnosisUseCase
from audit import AuditSink
from tests.support import RecordingAdapter, tool_messages_seen_by_model
from tests.support.audit_backends import AuditTarget, sqlite_target
from tests.support.audit_reader import AuditReader
from tests.support.resilience import assert_audit_consistent, read_events, run_cli, tool_call, write_config
from tests.support.spec_scenarios import DOC_DATA, as_text, draft, found
from tools.boundary import ToolBoundary
from tools.redaction import Redactor

QUERY = "payment-service 02:10Z 起支付超时，请诊断。"
SECRET = "Zq8-vault-pass-5521"


def _call(call_id: str, query: str, previous: str | None = None) -> dict[str, Any]:
    return tool_call(call_id, "lookup_knowledge", {"query": query}, evaluates=previous)


def _citing(*ids: str) -> str:
    """A Draft whose one FINDING cites every ID given (all FOUND in these runs)."""
    finding = {"kind": "FINDING", "statement": "知识库命中连接池耗尽。", "evidence": list(ids)}
    return as_text(draft("连接池耗尽。", [finding], checked=["知识库"], missing=["数据库锁等待"]))


def _two_calls_then_draft(first: str, second: str) -> list[dict[str, Any]]:
    """Two calls in one round; the Draft cites both."""
    return [
        {"tool_calls": [_call(first, "支付超时"), _call(second, "连接池")]},
        {"text": _citing(first, second)},
    ]


def _answered(generator: ScriptedChatGenerator, round_index: int) -> list[dict[str, Any]]:
    """The observations the model received in that round, under the IDs their messages carry."""
    observations = []
    for message in tool_messages_seen_by_model(generator, round_index):
        result = message.tool_call_result
        assert result is not None
        assert isinstance(result.result, str)
        observation = json.loads(result.result)
        assert observation["tool_call_id"] == result.origin.id
        observations.append(observation)
    return observations


def _audit_files_holding(folder: Path, text: str) -> list[str]:
    """The audit file and its WAL and shared-memory files that hold `text` anywhere in their bytes."""
    files = sorted(folder.glob("audit.db*"))
    assert files, "the run wrote an audit"
    return [path.name for path in files if text.encode() in path.read_bytes()]


class Run:
    """A real use case on a real audit store, the configured secret known to its redactor."""

    def __init__(self, target: AuditTarget, rounds: list[dict[str, Any]]) -> None:
        self.events: list[dict[str, Any]] = []
        self.store = target.open()
        self.audit = AuditReader(self.store)
        self.kb = RecordingAdapter(answer=found(DOC_DATA))
        self.generator = ScriptedChatGenerator(
            Scenario.model_validate({"name": "ids", "rounds": rounds}).rounds
        )
        self.use_case = DiagnosisUseCase(
            load_settings(None),
            self.generator,
            ToolBoundary({"lookup_knowledge": self.kb}),
            sinks=[lambda event: self.events.append(event.to_wire())],
            required_sinks=[AuditSink(self.store)],
            redactor=Redactor([SECRET]),
        )

    async def execute(self) -> Any:
        try:
            return await self.use_case.execute(QUERY)
        finally:
            self.store.flush()

    def ids_in_events(self) -> set[str]:
        return {e["tool_call_id"] for e in self.events if e.get("tool_call_id") is not None}


CREDENTIAL_LOOKING = [
    ("token:abc123x", "token:abc123y"),
    ("password=hunter22a", "password=hunter22b"),
    ("Authorization: Bearer abc.def.1", "Authorization: Bearer abc.def.2"),
    ("ghp_" + "a" * 36, "ghp_" + "b" * 36),
    ("call_AKIAIOSFODNN7EXAMPLE", "call_AKIAIOSFODNN7EXAMPLF"),
]


async def _check_exact_everywhere(target: AuditTarget, first: str, second: str) -> None:
    run = Run(target, _two_calls_then_draft(first, second))
    try:
        result = await run.execute()

        assert (result.outcome, result.stop_reason) == ("DRAFT", "COMPLETED")
        assert [r.tool_call_id for r in run.kb.requests] == [first, second]
        assert result.draft is not None
        assert result.draft.cited_ids() == [first, second]
        assert result.progress is not None
        assert [c.tool_call_id for c in result.progress.checks] == [first, second]
        assert run.ids_in_events() == {first, second}
        finished = [e for e in run.events if e["type"] == "tool_finished"]
        assert [e["observation"]["tool_call_id"] for e in finished] == [first, second]
        rounds = [e["tool_call_ids"] for e in run.events if e["type"] == "model_round_finished"]
        assert rounds[0] == [first, second]
        final = run.events[-1]["result"]
        assert final["draft"]["analysis"][0]["evidence"] == [first, second]
        assert [c["tool_call_id"] for c in final["progress"]["checks"]] == [first, second]
        # What the model was answered under, in the round after.
        assert [o["tool_call_id"] for o in _answered(run.generator, 1)] == [first, second]
        assert [r["tool_call_id"] for r in run.audit.invocations(result.run_id)] == [first, second]
        row = run.audit.run(result.run_id)
        assert row is not None
        assert json.loads(row["result_json"]) == final
    finally:
        run.store.close()


async def test_two_ids_that_redaction_would_make_one_are_two_invocations_on_both_stores(
    audit_target: AuditTarget,
) -> None:
    await _check_exact_everywhere(audit_target, "token:abc123x", "token:abc123y")


@pytest.mark.parametrize(
    ("first", "second"), CREDENTIAL_LOOKING, ids=[a.split(":")[0][:8] for a, _ in CREDENTIAL_LOOKING]
)
async def test_ids_that_look_like_credentials_stay_exact_everywhere(
    first: str, second: str, tmp_path: Path
) -> None:
    await _check_exact_everywhere(sqlite_target(tmp_path), first, second)


async def test_an_id_that_only_looks_like_a_credential_keeps_its_evaluation_chain(tmp_path: Path) -> None:
    """The evaluation names the pending observation by the exact ID it was given."""
    rounds: list[dict[str, Any]] = [
        {"tool_calls": [_call("token:abc123x", "支付超时")]},
        {"tool_calls": [_call("token:abc123y", "连接池", previous="token:abc123x")]},
        {"text": _citing("token:abc123x", "token:abc123y")},
    ]
    run = Run(sqlite_target(tmp_path), rounds)
    try:
        result = await run.execute()
        assert (result.outcome, result.stop_reason) == ("DRAFT", "COMPLETED")
        evaluations = {r["tool_call_id"]: r["evaluation"] for r in run.audit.invocations(result.run_id)}
        assert evaluations == {"token:abc123x": "GAINED", "token:abc123y": None}
    finally:
        run.store.close()


def test_diagnose_run_prints_and_audits_the_ids_exactly(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first, second = "token:abc123x", "token:abc123y"
    scenario = tmp_path / "ids.json"
    scenario.write_text(
        json.dumps({"name": "ids", "query": QUERY, "rounds": _two_calls_then_draft(first, second)}),
        encoding="utf-8",
    )
    audit, events = tmp_path / "audit.db", tmp_path / "events.ndjson"

    as_json = run_cli(
        capsys, "run", "--scenario", scenario, "--json", "--audit-db", audit, "--events", events
    )
    as_text_out = run_cli(capsys, "run", "--scenario", scenario, "--audit-db", audit)

    assert as_json.code == 0
    assert as_text_out.code == 0
    assert as_json.result["draft"]["analysis"][0]["evidence"] == [first, second]
    assert [c["tool_call_id"] for c in as_json.result["progress"]["checks"]] == [first, second]
    assert f"<- {first}, {second}" in as_text_out.out
    assert read_events(events)[-1]["result"] == as_json.result
    assert_audit_consistent(audit)


# --- the class: any two distinct credential-shaped IDs in one round -------------------------------------

_PREFIXES = [
    "token:",
    "token=",
    "password: ",
    "secret=",
    "api_key=",
    "Bearer ",
    "sk-",
    "ghp_",
    "AKIA",
    "",
    "pwd ",
]
credential_ids = st.builds(
    lambda prefix, tail: prefix + tail,
    st.sampled_from(_PREFIXES),
    st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFXYZ0123456789-_.:/+=", min_size=1, max_size=40),
).filter(lambda value: not value.endswith(" "))


@settings(max_examples=25, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(ids=st.lists(credential_ids, min_size=2, max_size=2, unique=True))
async def test_any_two_credential_shaped_ids_are_two_invocations_cited_exactly(
    ids: list[str], tmp_path_factory: pytest.TempPathFactory
) -> None:
    first, second = ids
    run = Run(sqlite_target(tmp_path_factory.mktemp("ids")), _two_calls_then_draft(first, second))
    try:
        result = await run.execute()
        assert (result.outcome, result.stop_reason) == ("DRAFT", "COMPLETED")
        assert result.draft is not None
        assert result.draft.cited_ids() == [first, second]
        assert run.ids_in_events() == {first, second}
        assert [r["tool_call_id"] for r in run.audit.invocations(result.run_id)] == [first, second]
    finally:
        run.store.close()


# --- the exception: a configured secret inside an ID -----------------------------------------------------


@pytest.mark.parametrize("call_id", [SECRET, f"call-{SECRET}", f"{SECRET}:1"])
async def test_an_id_holding_a_configured_secret_is_refused_and_echoed_nowhere(
    call_id: str, tmp_path: Path
) -> None:
    rounds: list[dict[str, Any]] = [
        {"tool_calls": [_call(call_id, "支付超时")]},
        {"text": as_text(draft(missing=["证据"]))},
    ]
    run = Run(sqlite_target(tmp_path), rounds)
    try:
        result = await run.execute()
    finally:
        run.store.close()

    assert (result.outcome, result.stop_reason) == ("DRAFT", "COMPLETED")
    assert run.kb.requests == [], "the call never runs"
    protocol = [
        (e["code"], e["tool_call_id"], e["detail"]) for e in run.events if e["type"] == "protocol_changed"
    ]
    assert protocol == [("INVALID_PROGRESS_PROTOCOL", "call-r1-1", {"invalid_field": "tool_call_id"})]
    answered = _answered(run.generator, 1)
    assert [(o["tool_call_id"], o["evidence_status"], o["control"]) for o in answered] == [
        ("call-r1-1", "NOT_EXECUTED", {"code": "INVALID_PROGRESS_PROTOCOL", "invalid_field": "tool_call_id"})
    ]
    # Nowhere: events, the transcript sent back to the model, the result, the audit file.
    assert SECRET not in json.dumps(run.events, ensure_ascii=False)
    assert not any(SECRET in repr(m) for m in run.generator.received[1])
    assert SECRET not in json.dumps(result.to_json_dict(), ensure_ascii=False)
    assert _audit_files_holding(tmp_path, SECRET) == []


def test_an_id_holding_the_configured_mysql_password_is_refused_end_to_end(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DC_TEST_MYSQL_PASSWORD", SECRET)
    config = write_config(tmp_path / "config.toml", {"mysql": {"password_env": "DC_TEST_MYSQL_PASSWORD"}})
    rounds: list[dict[str, Any]] = [
        {"tool_calls": [_call(f"id-{SECRET}", "支付超时")]},
        {"text": as_text(draft(missing=["证据"]))},
    ]
    scenario = tmp_path / "secret-id.json"
    scenario.write_text(json.dumps({"name": "secret-id", "query": QUERY, "rounds": rounds}), encoding="utf-8")
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

    assert run.code == 0
    assert SECRET not in run.out + run.err + events.read_text(encoding="utf-8")
    assert _audit_files_holding(tmp_path, SECRET) == []
    assert [c["tool_call_id"] for c in run.result["progress"]["checks"]] == []


# --- an ID that shows as nothing -------------------------------------------------------------------------

# Any character of the Draft's blank class (whitespace, controls, format and zero-width characters),
# each range as likely as any other so the narrow ones (U+200B, U+2060, U+FEFF) come up.
blank_chars = st.sampled_from(BLANK_RANGES).flatmap(lambda span: st.integers(*span)).map(chr)


@settings(max_examples=30, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(call_id=st.text(blank_chars, min_size=1, max_size=4))
async def test_an_id_of_blank_characters_is_replaced_on_arrival_and_never_runs(
    call_id: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Before, a call whose ID was only zero-width characters ran and was audited under it, and a
    FINDING citing that exact ID was then refused as blank: evidence nobody could cite or read."""
    rounds: list[dict[str, Any]] = [
        {"tool_calls": [_call(call_id, "支付超时")]},
        {"text": as_text(draft(missing=["证据"]))},
    ]
    run = Run(sqlite_target(tmp_path_factory.mktemp("blank-id")), rounds)
    try:
        result = await run.execute()
        assert (result.outcome, result.stop_reason) == ("DRAFT", "COMPLETED")
        assert run.kb.requests == [], "the call never runs"
        assert run.audit.invocations(result.run_id) == []
        assert [(r["code"], r["tool_call_id"]) for r in run.audit.protocol_events(result.run_id)] == [
            ("INVALID_PROGRESS_PROTOCOL", "call-r1-1")
        ]
        answered = _answered(run.generator, 1)
        assert [(o["tool_call_id"], o["control"]) for o in answered] == [
            ("call-r1-1", {"code": "INVALID_PROGRESS_PROTOCOL", "invalid_field": "tool_call_id"})
        ]
        assert call_id not in run.ids_in_events()
    finally:
        run.store.close()


# --- the team audit: a key that ignores trailing spaces --------------------------------------------------


async def test_ids_differing_only_by_a_trailing_space_never_collide_on_the_audit_key(
    audit_target: AuditTarget,
) -> None:
    rounds: list[dict[str, Any]] = [
        {"tool_calls": [_call("c-1", "支付超时"), _call("c-1 ", "连接池")]},
        {"text": _citing("c-1")},
    ]
    run = Run(audit_target, rounds)
    try:
        result = await run.execute()

        assert (result.outcome, result.stop_reason) == ("DRAFT", "COMPLETED")
        assert [r["tool_call_id"] for r in run.audit.invocations(result.run_id)] == ["c-1"]
        assert [(r["code"], r["tool_call_id"]) for r in run.audit.protocol_events(result.run_id)] == [
            ("INVALID_PROGRESS_PROTOCOL", "call-r1-2")
        ]
    finally:
        run.store.close()
