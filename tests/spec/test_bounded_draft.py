"""Spec requirement: Diagnosis output SHALL be a bounded DiagnosisDraft.

Every "#### Scenario:" of this requirement, end to end through the real Haystack Agent.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Callable

import pytest
from haystack.components.agents import Agent

from agent.draft.rules import MIN_CLAIM_CHARS, RunEvidence, run_bounds
from agent.prompt import system_prompt
from agent.settings import load_settings
from console.model_server.catalog import MODELS
from console.model_server.command import config_block
from tests.support import RecordingAdapter, harness
from tests.support.spec_scenarios import (
    DOC_DATA,
    LOG_DATA,
    as_text,
    call,
    checks,
    draft,
    evaluated,
    finding,
    found,
    logs_input,
    scenario,
    text_round,
    tools_round,
)


async def test_supported_draft_is_returned() -> None:
    ids = ["call_AbC-09:x", "调用-日志-2"]
    final = {
        "conclusion": "payment-service v2.14.0 发布后连接池耗尽。",
        "analysis": [
            {"kind": "FINDING", "statement": "runbook 指向连接池耗尽。", "evidence": [ids[0]]},
            {
                "kind": "FINDING",
                "statement": "ERROR 日志持续出现连接获取超时。",
                "evidence": [ids[1], ids[0]],
                "scope": "payment-service 02:00-03:00Z",
            },
            {
                "kind": "NEGATIVE_OBSERVATION",
                "statement": "未查询数据库锁等待。",
                "scope": "MySQL payments 库",
                "evidence": "NO_EVIDENCE",
            },
        ],
        "action_plan": ["回滚到 v2.13.4", "观察 HikariPool-1 等待线程"],
        "recommendations": ["复盘事务边界"],
        "limitations": {
            "checked_scope": ["runbook", "payment-service ERROR 日志"],
            "missing_info": ["锁等待详情"],
        },
    }
    kb = RecordingAdapter(answer=found(DOC_DATA))
    logs = RecordingAdapter(answer=found(LOG_DATA))
    h = harness(
        scenario(
            tools_round(call(ids[0], "lookup_knowledge", {"query": "支付超时"})),
            tools_round(call(ids[1], "query_logs", logs_input(level="ERROR"), evaluated(ids[0]))),
            text_round(json.dumps(final, ensure_ascii=False, indent=2)),
        ),
        adapters={"lookup_knowledge": kb, "query_logs": logs},
    )

    result = await h.run()

    assert (result.outcome, result.stop_reason, result.failure) == ("DRAFT", "COMPLETED", None)
    assert result.draft is not None
    assert result.draft.model_dump(mode="json") == final
    assert result.to_json_dict()["draft"] == final
    assert [item.evidence for item in result.draft.analysis] == [[ids[0]], [ids[1], ids[0]], "NO_EVIDENCE"]
    assert [r.tool_call_id for r in kb.requests + logs.requests] == ids
    assert result.exit_code == 0


async def test_supported_draft_at_the_byte_limit_is_returned_and_one_byte_more_fails() -> None:
    text = as_text(draft(checked=["范围"], missing=["x"]))
    limit = len(text.encode())
    ok = harness(scenario(text_round(text)), settings_overrides={"budget": {"max_draft_bytes": limit}})
    too_large = harness(
        scenario(text_round(text)), settings_overrides={"budget": {"max_draft_bytes": limit - 1}}
    )

    accepted = await ok.run()
    rejected = await too_large.run()

    assert (accepted.outcome, accepted.stop_reason) == ("DRAFT", "COMPLETED")
    assert (rejected.outcome, rejected.stop_reason, rejected.draft) == ("FAILED", "DRAFT_TOO_LARGE", None)
    assert rejected.to_json_dict()["failure"] == {
        "code": "DRAFT_TOO_LARGE",
        "violation": "DRAFT_TOO_LARGE",
        "detail": f"the text is {limit} UTF-8 bytes; the limit is {limit - 1}",
    }
    assert too_large.generator.calls == 1


@pytest.mark.parametrize(
    ("wrap", "violation", "detail"),
    [
        pytest.param(
            lambda j: f"```json\n{j}\n```",
            "NOT_A_JSON_OBJECT",
            "starts with a Markdown code fence",
            id="markdown-fence",
        ),
        pytest.param(
            lambda j: f"以下是诊断结果：\n{j}",
            "NOT_A_JSON_OBJECT",
            "prose before the JSON object",
            id="explanatory-prefix",
        ),
        pytest.param(
            lambda j: f"Here is the draft: {j}",
            "NOT_A_JSON_OBJECT",
            "prose before the JSON object",
            id="english-prefix",
        ),
        pytest.param(
            lambda j: f"{j}\n以上是我的诊断。",
            "MALFORMED_JSON",
            "text after the JSON object (line 2, column 1)",
            id="explanatory-suffix",
        ),
        pytest.param(
            lambda j: f"{j}\n```",
            "MALFORMED_JSON",
            "a Markdown code fence after the JSON object",
            id="trailing-fence",
        ),
    ],
)
async def test_model_returns_prose_around_json(
    wrap: Callable[[str], str], violation: str, detail: str, agent_runs: list[Agent]
) -> None:
    valid = as_text(draft("连接池耗尽。", [finding("连接获取超时。", "t-01")]))
    logs = RecordingAdapter(answer=found(LOG_DATA))
    h = harness(
        scenario(
            tools_round(call("t-01", "query_logs", logs_input(level="ERROR"))),
            text_round(wrap(valid)),
            text_round(valid),  # a "second chance" that must never be requested
        ),
        adapters={"query_logs": logs},
    )

    result = await h.run()

    assert (result.outcome, result.stop_reason, result.draft) == ("FAILED", "INVALID_DRAFT", None)
    assert result.to_json_dict()["failure"] == {
        "code": "INVALID_DRAFT",
        "violation": violation,
        "detail": detail,
    }
    assert h.generator.calls == 2
    assert len(h.generator.received) == 2
    assert len(agent_runs) == 1
    assert checks(result) == [("t-01", "FOUND", None)]
    assert result.exit_code == 1


# --- the configured Draft limit is the limit (issue 32, item 14) -----------------------------------------


def _many_citations_draft(ids: list[str]) -> dict[str, object]:
    """A Draft of ~1.3 KB: five citations in one FINDING, a 117-character step, nine analysis items."""
    negative = {"kind": "NEGATIVE_OBSERVATION", "scope": "网关", "evidence": "NO_EVIDENCE"}
    items = [finding("连接获取超时。", *ids)] + [
        {**negative, "statement": f"第 {n} 项未见异常。"} for n in range(8)
    ]
    step = "Roll payment-service back to v2.13.4, then watch HikariPool-1's pending threads until they drain."
    return draft("连接池耗尽。", items, checked=["日志"], missing=["锁等待"]) | {
        "action_plan": [step + " Then re-run it all."]
    }


@pytest.mark.parametrize("max_draft_bytes", [16_384, 1_048_576])
async def test_a_draft_within_the_configured_bytes_is_accepted_however_its_bytes_are_shared(
    max_draft_bytes: int,
) -> None:
    """Before, fixed caps beside the byte limit refused this Draft as DRAFT_TOO_LARGE at 16 KiB and at
    1 MiB alike (4 citations, 100-character notes, 8 items), and a long call ID elsewhere in the run
    shrank them further. Only the configured bytes (and DESIGN's rules) decide now."""
    ids = [f"t-0{n}" for n in range(1, 6)]
    long_id = "call_" + "x" * 120  # an ID of 125 characters, cited nowhere
    final = _many_citations_draft(ids)
    steps = final["action_plan"]
    assert isinstance(steps, list)
    assert len(steps[0]) == 117
    text = as_text(final)
    assert 1_000 < len(text.encode()) < 2_000
    logs = RecordingAdapter(answer=found(LOG_DATA))
    rounds = [tools_round(*(call(i, "query_logs", logs_input(limit=n + 1)) for n, i in enumerate(ids)))]
    rounds.append(tools_round(call(long_id, "query_logs", logs_input(limit=9), evaluated(ids[-1]))))
    h = harness(
        scenario(*rounds, text_round(text)),
        adapters={"query_logs": logs},
        settings_overrides={"budget": {"max_draft_bytes": max_draft_bytes}},
    )

    result = await h.run()

    assert (result.outcome, result.stop_reason, result.failure) == ("DRAFT", "COMPLETED", None)
    assert result.draft is not None
    assert result.draft.model_dump(mode="json") == final
    assert "bounds_reached" not in result.to_json_dict()  # no schema held this model to bounds


@pytest.mark.parametrize("max_draft_bytes", [2_048, 16_384])
def test_the_demo_model_servers_block_leaves_a_claim_a_sentence(max_draft_bytes: int) -> None:
    """Before, the block `diagnose demo model-server` prints gave claims of 15 characters and notes of
    6 (every local Draft read `wITYkX`): a bound derived for a grammar must hold a sentence."""
    block = tomllib.loads(config_block(MODELS["smollm2"], "http://127.0.0.1:18090/v1"))
    settings = load_settings(
        None, overrides={**block, "budget": {**block["budget"], "max_draft_bytes": max_draft_bytes}}
    )
    bounds = run_bounds(
        settings.budget.max_draft_bytes, RunEvidence.of({"c" * 32: "FOUND"}), settings.model.max_tokens
    )
    assert bounds.holds_a_sentence
    assert bounds.max_text_chars >= MIN_CLAIM_CHARS == 120
    assert bounds.max_note_chars >= 40
    prompt = system_prompt(bounds)
    assert f"T=非空白文本，≤{bounds.max_text_chars} 字" in prompt
