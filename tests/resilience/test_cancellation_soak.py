"""Cancellation soak: many runs in one event loop, each cancelled at a random point, then nothing is left.

Cancel points: during a model round (scripted `delay_ms`), during each tool (slow test adapters for
lookup_knowledge and query_logs, the real MysqlAdapter on a heavy join), between rounds (from a run-event
sink, right after a tool round) and anywhere in a longer run. Half are cancelled the way an operator does
(`DiagnosisUseCase.cancel`, the run returns CANCELLED), half the way the console's worker is
(`Task.cancel`, the run records CANCELLED and re-raises). Afterwards: no leaked asyncio task, no
invocation STARTED, no statement of ours on the server, the connection pool idle with no orphan server
connections.
"""

from __future__ import annotations

import asyncio
import random
import secrets
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from agent.model.scripted import ScriptedChatGenerator
from agent.scenarios import Scenario
from agent.settings import load_settings
from agent.use_case import DiagnosisUseCase
from audit import AuditSink
from audit.factory import open_audit_store
from audit.location import SqliteLocation
from tests.support import RecordingAdapter
from tests.support.mysql import MysqlTestEnv, running_with_marker, wait_until
from tests.support.resilience import QUERY, WINDOW, assert_audit_consistent, no_conclusion_draft, tool_call
from tools.boundary import ToolBoundary
from tools.definitions import ToolName

pytestmark = pytest.mark.mysql

MARKER = "dc_soak_"
MODES = (
    "model",
    ToolName.LOOKUP_KNOWLEDGE,
    ToolName.QUERY_LOGS,
    ToolName.QUERY_MYSQL,
    "between_rounds",
    "anywhere",
)
SLOW_TOOL_S = 0.25
MODEL_DELAY_MS = 250


def _call(tool: str, i: int, call_id: str = "call-1", evaluates: str | None = None) -> dict[str, Any]:
    business: dict[str, Any] = {
        ToolName.LOOKUP_KNOWLEDGE: {"query": f"连接池 耗尽 {i}"},
        ToolName.QUERY_LOGS: {"service": "payment-service", **WINDOW, "contains": f"timeout {i}"},
        ToolName.QUERY_MYSQL: {
            "sql": f"SELECT COUNT(*) AS {MARKER}{i} FROM numbers a JOIN numbers b ON a.n <> b.n "
            "JOIN numbers c ON c.n < a.n"
        },
    }[ToolName(tool)]
    return tool_call(call_id, tool, business, evaluates)


def _rounds(mode: str, i: int) -> list[dict[str, Any]]:
    draft = {"text": no_conclusion_draft()}
    if mode == "model":
        return [{"tool_calls": [_call(ToolName.LOOKUP_KNOWLEDGE, i)], "delay_ms": MODEL_DELAY_MS}, draft]
    if mode in (ToolName.LOOKUP_KNOWLEDGE, ToolName.QUERY_LOGS, ToolName.QUERY_MYSQL):
        return [{"tool_calls": [_call(mode, i)]}, draft]
    if mode == "between_rounds":
        return [
            {"tool_calls": [_call(ToolName.QUERY_LOGS, i)]},
            {"tool_calls": [_call(ToolName.LOOKUP_KNOWLEDGE, i, "call-2", evaluates="call-1")]},
            draft,
        ]
    return [  # anywhere: model, fast-ish tools, model, the heavy join, model
        {"tool_calls": [_call(ToolName.LOOKUP_KNOWLEDGE, i)], "delay_ms": 40},
        {"tool_calls": [_call(ToolName.QUERY_LOGS, i, "call-2", evaluates="call-1")], "delay_ms": 40},
        {"tool_calls": [_call(ToolName.QUERY_MYSQL, i, "call-3", evaluates="call-2")], "delay_ms": 40},
        draft,
    ]


class Soak:
    def __init__(self, mysql_env: MysqlTestEnv, audit_path: Path, seed: int) -> None:
        self.rng = random.Random(seed)
        self.store = open_audit_store(SqliteLocation(audit_path))
        self.mysql = mysql_env.adapter(statement_timeout_ms=30_000)
        self.boundary = ToolBoundary(
            {
                ToolName.LOOKUP_KNOWLEDGE: RecordingAdapter(delay_s=SLOW_TOOL_S),
                ToolName.QUERY_LOGS: RecordingAdapter(delay_s=SLOW_TOOL_S),
                ToolName.QUERY_MYSQL: self.mysql,
            }
        )
        self.settings = load_settings(None, overrides={"budget": {"deadline_s": 120}})
        self.outcomes: Counter[str] = Counter()
        self.run_ids: list[str] = []

    async def one(self, i: int, mode: str) -> None:
        operator = self.rng.random() < 0.5
        trigger = asyncio.Event()
        holder: dict[str, Any] = {}

        def cancel() -> None:
            if operator:
                holder["use_case"].cancel()
            else:
                holder["task"].cancel()

        def sink(event: Any) -> None:
            if event["type"] == "run_started":
                self.run_ids.append(event["run_id"])
            if event["type"] == "tool_started":
                trigger.set()
            if (
                mode == "between_rounds"
                and event["type"] == "tool_finished"
                and event["status"] != "CANCELLED"
            ):
                cancel()  # inside the harness, after the tool round, before the next model round

        rounds = Scenario.model_validate({"name": f"soak-{i}", "rounds": _rounds(mode, i)}).rounds
        use_case = DiagnosisUseCase(
            self.settings,
            ScriptedChatGenerator(rounds),
            self.boundary,
            sinks=[sink],
            required_sinks=[AuditSink(self.store)],
        )
        holder["use_case"] = use_case
        task = asyncio.create_task(use_case.execute(QUERY))
        holder["task"] = task
        if mode == "model":
            await asyncio.sleep(self.rng.uniform(0.01, (MODEL_DELAY_MS - 20) / 1000))
            cancel()
        elif mode in (ToolName.LOOKUP_KNOWLEDGE, ToolName.QUERY_LOGS, ToolName.QUERY_MYSQL):
            async with asyncio.timeout(10):
                await trigger.wait()
            await asyncio.sleep(
                self.rng.uniform(0, SLOW_TOOL_S - 0.05 if mode != ToolName.QUERY_MYSQL else 0.4)
            )
            cancel()
        elif mode == "anywhere":
            await asyncio.sleep(self.rng.uniform(0, 0.9))
            cancel()
        try:
            async with asyncio.timeout(30):
                result = await asyncio.shield(task)
            self.outcomes[f"{mode}:{result.outcome.value}"] += 1
        except asyncio.CancelledError:
            assert task.cancelled()
            assert not operator
            self.outcomes[f"{mode}:raised CancelledError"] += 1

    async def close(self) -> None:
        await self.boundary.aclose()
        self.store.close()


async def _soak(mysql_env: MysqlTestEnv, tmp_path: Path, runs: int, seed: int) -> None:
    audit_path = tmp_path / "audit.db"
    soak = Soak(mysql_env, audit_path, seed)
    try:
        assert (await soak.mysql.execute(_mysql_ping())).status == "FOUND"
        baseline_tasks = {t for t in asyncio.all_tasks() if not t.done()}
        for i in range(runs):
            try:
                await soak.one(i, MODES[i % len(MODES)])
            except BaseException:
                print(f"\nrun {i} failed; reproduce with seed {seed}")
                raise

        async def no_leaked_tasks() -> bool:
            return {t for t in asyncio.all_tasks() if not t.done()} <= baseline_tasks

        assert await wait_until(no_leaked_tasks, timeout_s=5), [
            t for t in asyncio.all_tasks() if t not in baseline_tasks
        ]

        async def nothing_of_ours_running() -> bool:
            return await running_with_marker(mysql_env, MARKER) == []

        assert await wait_until(nothing_of_ours_running, timeout_s=2)
        pool = soak.mysql.pool_stats()
        assert pool["in_use"] == 0, pool
        assert pool["size"] <= pool["max"], pool

        async def no_orphan_connections() -> bool:
            rows = await mysql_env.admin_async(
                "SELECT COUNT(*) FROM information_schema.processlist WHERE db = %s AND id <> CONNECTION_ID()",
                (mysql_env.shop,),
            )
            return int(rows[0][0]) == soak.mysql.pool_stats()["size"]

        assert await wait_until(no_orphan_connections, timeout_s=2)
        assert (await soak.mysql.execute(_mysql_ping())).status == "FOUND"  # the pool still works
    finally:
        await soak.close()

    rows = assert_audit_consistent(audit_path, soak.run_ids)
    assert len(rows) == runs
    by_outcome = Counter(row["outcome"] for row in rows.values())
    assert by_outcome["CANCELLED"] >= runs * 0.8, (by_outcome, soak.outcomes)
    for key, count in soak.outcomes.items():
        mode, outcome = key.split(":", 1)
        if mode != "anywhere":  # only a random point may come after the run already ended
            assert outcome in ("CANCELLED", "raised CancelledError"), (key, count)
    print(f"\n{runs} runs (seed {seed}): {dict(sorted(soak.outcomes.items()))}")


def _mysql_ping() -> Any:
    from tests.support.mysql import mysql_request

    return mysql_request(f"SELECT 1 AS {MARKER}ping")


async def test_cancellation_soak(mysql_env: MysqlTestEnv, tmp_path: Path) -> None:
    await _soak(mysql_env, tmp_path, runs=40, seed=6)


@pytest.mark.long
async def test_cancellation_soak_long(mysql_env: MysqlTestEnv, tmp_path: Path) -> None:
    await _soak(mysql_env, tmp_path, runs=200, seed=secrets.randbits(32))
