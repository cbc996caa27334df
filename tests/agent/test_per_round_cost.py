"""The harness does O(that round) work per tool round, whatever the run's length.

Proved by counting operations, never by timing: the same scripted investigation runs with 4, 8 and 16
tool rounds, and every counted operation (history messages visited for usage, strings redacted, SQL
statements, commits) must grow by the same amount per round — twice as much from 8 to 16 rounds as
from 4 to 8. Anything that walks, re-serialises, re-redacts or re-writes the whole history each round
grows quadratically and fails this.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from agent.model.scripted import ScriptedChatGenerator
from agent.settings import load_settings
from agent.usage import WireSizes
from agent.use_case import DiagnosisUseCase
from agent.vocabulary import Outcome
from audit import AuditSink, SqliteAuditStore
from audit.factory import open_audit_store
from audit.location import SqliteLocation
from tests.support.long_runs import knowledge_rounds
from tools.adapter import AdapterResult, ToolRequest
from tools.boundary import ToolBoundary
from tools.definitions import ToolName
from tools.redaction import Redactor
from tools.vocabulary import EvidenceStatus

_SIZE = WireSizes._size
PROJECTION = {"documents": [{"title": "连接池耗尽", "snippet": "HikariPool-1 timeout", "score": 1.5}]}


class Knowledge:
    async def execute(self, request: ToolRequest) -> AdapterResult:
        return AdapterResult(EvidenceStatus.FOUND, PROJECTION)


class CountingRedactor(Redactor):
    """Counts the strings it redacts (each costs the pattern passes)."""

    def __init__(self, counts: Counter[str]) -> None:
        super().__init__(["per-round-secret-42"])
        self.counts = counts

    def text(self, value: str) -> str:
        self.counts["strings redacted"] += 1
        return super().text(value)


async def counted_run(tool_rounds: int, folder: Path, monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    counts: Counter[str] = Counter()
    settings = load_settings(
        None,
        overrides={
            "budget": {"max_model_calls": tool_rounds + 4, "max_total_tokens": 10_000_000},
            "protocol": {"max_consecutive_no_gain": 100, "max_protocol_violations": 100},
        },
    )
    redactor = CountingRedactor(counts)
    store = open_audit_store(SqliteLocation(folder / f"audit-{tool_rounds}.db"))
    assert isinstance(store, SqliteAuditStore)  # its statements are traced on the SQLite connection
    statements: list[str] = []
    store.db.conn.set_trace_callback(statements.append)

    def counting_size(self: WireSizes, item: Any, measure: Any) -> int:
        counts["history items visited for usage"] += 1
        return _SIZE(self, item, measure)

    monkeypatch.setattr(WireSizes, "_size", counting_size)
    use_case = DiagnosisUseCase(
        settings,
        ScriptedChatGenerator(knowledge_rounds(tool_rounds, reported_usage=False)),
        ToolBoundary({ToolName.LOOKUP_KNOWLEDGE: Knowledge()}, redactor=redactor),
        required_sinks=[AuditSink(store)],
        redactor=redactor,
    )
    try:
        result = await use_case.execute("payment-service 超时")
    finally:
        store.db.conn.set_trace_callback(None)
        store.close()
    assert result.outcome == Outcome.DRAFT, result.failure
    assert result.usage.prompt_tokens > 10 * tool_rounds  # estimated from the history sent each round
    # Statements the audit issues (FTS5's own, traced with a leading "--", merge segments in batches).
    counts["SQL statements"] = sum(1 for s in statements if not s.startswith("--"))
    counts["commits"] = sum(1 for s in statements if s.strip().upper() == "COMMIT")
    # Statements on the text index (FTS5's own included) before the run's final commit, the last one.
    final_commit = max(i for i, s in enumerate(statements) if s.startswith("BEGIN IMMEDIATE"))
    counts["text index statements in rounds"] = sum(1 for s in statements[:final_commit] if "_fts" in s)
    counts["text index statements at the finish"] = sum(1 for s in statements[final_commit:] if "_fts" in s)
    return counts


async def test_every_counted_operation_grows_linearly_with_the_rounds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    small, medium, large = [await counted_run(n, tmp_path, monkeypatch) for n in (4, 8, 16)]
    for operation in ("history items visited for usage", "strings redacted", "SQL statements", "commits"):
        first_step = medium[operation] - small[operation]  # 4 more rounds
        second_step = large[operation] - medium[operation]  # 8 more rounds
        assert first_step > 0, operation
        counted = (operation, small[operation], medium[operation], large[operation])
        assert second_step == 2 * first_step, counted


async def test_a_tool_round_costs_one_commit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Round rows, finishes and evaluations ride in the next durable commit: one per tool call."""
    medium, large = [await counted_run(n, tmp_path, monkeypatch) for n in (8, 16)]
    assert large["commits"] - medium["commits"] == 8


async def test_a_tool_round_does_not_touch_the_text_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run's rows are indexed in one batch at its finish (the store's text search), not round by round."""
    small, large = [await counted_run(n, tmp_path, monkeypatch) for n in (4, 16)]
    for counts in (small, large):
        assert counts["text index statements in rounds"] == 0
        assert counts["text index statements at the finish"] > 0  # the finish indexes the run
