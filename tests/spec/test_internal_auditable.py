"""Spec requirement: Stage-four execution SHALL remain internal and auditable.

Every "#### Scenario:" of this requirement, end to end through the real Haystack Agent.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from haystack.components.agents import Agent

from audit import AuditSink, SqliteAuditStore
from tests.support import RecordingAdapter, harness
from tests.support.audit_reader import AuditReader
from tests.support.spec_scenarios import (
    LOG_DATA,
    NULL_DRAFT,
    REPO,
    RecordingHook,
    as_text,
    call,
    draft,
    finding,
    found,
    logs_input,
    run_python,
    scenario,
    text_round,
    tools_round,
)


async def test_internal_audited_execution_completes(audit_store: SqliteAuditStore) -> None:
    hook_saw: list[tuple[str, str, str]] = []
    sink_saw: list[tuple[str, str, str]] = []
    logs = RecordingAdapter(answer=found(LOG_DATA))
    h = harness(
        scenario(
            tools_round(call("a-1", "query_logs", logs_input(level="ERROR"))),
            text_round(as_text(draft("连接池耗尽。", [finding("连接获取超时。", "a-1")]))),
        ),
        adapters={"query_logs": logs},
        extra_hooks={
            "before_llm": [RecordingHook("before_llm", hook_saw)],
            "before_tool": [RecordingHook("before_tool", hook_saw)],
        },
        sinks=[lambda e: sink_saw.append((e["type"], e["session_id"], e["run_id"])), AuditSink(audit_store)],
    )

    result = await h.run()
    run_row = AuditReader(audit_store).run(result.run_id)
    invocations = AuditReader(audit_store).invocations(result.run_id)

    ids = (result.session_id, result.run_id)
    assert (result.outcome, result.stop_reason) == ("DRAFT", "COMPLETED")
    # The injected hook observed both model rounds and the tool round, all with this run's identity.
    assert hook_saw == [("before_llm", *ids), ("before_tool", *ids), ("before_llm", *ids)]
    assert {(s, r) for _, s, r in sink_saw} == {ids}
    assert {"model_round_started", "tool_started", "tool_finished", "run_finished"} <= {
        t for t, _, _ in sink_saw
    }
    [request] = logs.requests
    assert (request.session_id, request.run_id, request.tool_call_id) == (*ids, "a-1")
    # The canonical invocation is audited under the same identity.
    assert run_row is not None
    assert (run_row["session_id"], run_row["run_id"]) == ids
    assert [
        (i["run_id"], i["session_id"], i["tool_call_id"], i["tool"], i["status"]) for i in invocations
    ] == [(result.run_id, result.session_id, "a-1", "query_logs", "FOUND")]


async def test_stage_four_is_archived(agent_runs: list[Agent], tmp_path: Path) -> None:
    """The engine stays an internal entry (one Agent per execution) and the CLI entry point is unchanged."""
    h = harness(scenario(text_round(NULL_DRAFT), text_round(NULL_DRAFT)))

    first = await h.run()
    second = await h.run()

    assert first.outcome == second.outcome == "DRAFT"
    assert len(agent_runs) == 2
    assert agent_runs[0] is not agent_runs[1]
    # The engine never imports the console, the audit or the TUI.
    probe = (
        "import sys, agent.use_case, agent.harness, agent.hooks; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'console', 'audit', 'textual'}))"
    )
    code, out, err = await run_python(["-c", probe])
    assert (code, out.strip()) == (0, "[]"), err
    # The public entry point is still `diagnose = console.cli:main` and still runs one diagnosis.
    pyproject = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    assert 'diagnose = "console.cli:main"' in pyproject
    scenario_file = tmp_path / "inline.yaml"
    inline = yaml.safe_dump(scenario(text_round(NULL_DRAFT)), allow_unicode=True)
    scenario_file.write_text(inline, encoding="utf-8")
    code, out, err = await run_python(
        [
            "-c",
            "import sys; from console.cli import main; sys.exit(main())",
            "run",
            "--scenario",
            str(scenario_file),
            "--audit-db",
            str(tmp_path / "audit.db"),
            "--json",
        ],
        home=tmp_path,
    )
    assert code == 0, err
    printed = json.loads(out)
    assert (printed["outcome"], printed["stop_reason"]) == ("DRAFT", "COMPLETED")
    assert printed["draft"] == json.loads(NULL_DRAFT)
    assert set(printed) == set(first.to_json_dict())
