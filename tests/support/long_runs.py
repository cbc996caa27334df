"""A scripted investigation of any length, shared by the per-round cost test and the harness benchmark.

One `lookup_knowledge` call per round with a distinct input (so no call is a duplicate), each round
evaluating the previous FOUND as GAINED, then one round with a Draft citing the first call.
"""

from __future__ import annotations

import json

from agent.scenarios import ScriptedRound, ScriptedToolCall, ScriptedUsage
from tools.definitions import ToolName

DRAFT = {
    "conclusion": "payment-service 的连接池在发布后耗尽。",
    "analysis": [{"kind": "FINDING", "statement": "runbook 描述了连接池耗尽。", "evidence": ["call-1"]}],
    "action_plan": ["回滚"],
    "recommendations": ["扩大连接池"],
    "limitations": {"checked_scope": ["runbooks"], "missing_info": ["锁等待详情"]},
}


def knowledge_rounds(tool_rounds: int, *, reported_usage: bool = True) -> list[ScriptedRound]:
    """`tool_rounds` one-call rounds, then the Draft round. Without `reported_usage` the tool rounds
    report no usage, so every round's prompt size is estimated from the history sent."""
    rounds: list[ScriptedRound] = []
    for i in range(1, tool_rounds + 1):
        previous = None if i == 1 else {"tool_call_id": f"call-{i - 1}", "evaluation": "GAINED"}
        call = ScriptedToolCall(
            id=f"call-{i}",
            name=ToolName.LOOKUP_KNOWLEDGE,
            arguments={"previous_observation": previous, "input": {"query": f"连接池 耗尽 step {i}"}},
        )
        usage = ScriptedUsage(prompt_tokens=900, completion_tokens=60) if reported_usage else None
        rounds.append(ScriptedRound(tool_calls=[call], usage=usage))
    final_usage = ScriptedUsage(prompt_tokens=1500, completion_tokens=200)
    rounds.append(ScriptedRound(text=json.dumps(DRAFT, ensure_ascii=False), usage=final_usage))
    return rounds
