"""A large, realistic audit file for browse tests and the audit benchmark: about 90 days of runs with
a weighted mix of tools, statuses, error codes, Chinese and English text, built through the shipped
schema."""

from __future__ import annotations

import json
import random
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from audit.common import audit_timestamp
from audit.factory import open_audit_store
from audit.location import SqliteLocation

SPAN = timedelta(days=90)
DEFAULT_END = datetime(2026, 11, 30, tzinfo=UTC)

TOOLS = (("lookup_knowledge", 35), ("query_logs", 45), ("query_mysql", 20))
STATUSES = (("FOUND", 55), ("EMPTY", 25), ("ERROR", 14), ("CANCELLED", 4), ("INTERRUPTED", 2))
ERRORS = {
    "lookup_knowledge": (("INVALID_INPUT", 40), ("TIMEOUT", 30), ("UNAVAILABLE", 20), ("BACKEND_ERROR", 10)),
    "query_logs": (
        ("TIMEOUT", 35),
        ("UNAVAILABLE", 25),
        ("INVALID_INPUT", 20),
        ("RESULT_TOO_LARGE", 15),
        ("BACKEND_ERROR", 5),
    ),
    "query_mysql": (
        ("POLICY_REJECTED", 30),
        ("UNAVAILABLE", 30),
        ("TIMEOUT", 20),
        ("RESULT_TOO_LARGE", 10),
        ("BACKEND_ERROR", 10),
    ),
}
OUTCOMES = (
    (("DRAFT", "COMPLETED"), 60),
    (("DRAFT", "COMPLETED_AFTER_STOP_REQUIRED"), 10),
    (("CONTROLLED_STOP", "INFORMATION_SATURATED"), 10),
    (("BUDGET_EXHAUSTED", "MODEL_CALLS_EXHAUSTED"), 8),
    (("FAILED", "INVALID_DRAFT"), 5),
    (("CANCELLED", "CANCELLED"), 4),
    (("REJECTED", "QUERY_TOO_LARGE"), 3),
)
SERVICES = ("payment-service", "api-gateway", "order-service", "account-service", "inventory-service")
QUERIES = (
    "payment-service 02:10Z 起超时，支付回调大量失败",
    "网关 504 激增，上游疑似 payment-service",
    "订单队列积压超过 20 万条，消费者延迟",
    "企业账号 SSO 登录失败率升高",
    "MySQL 锁等待和慢查询告警",
    "deploy v2.14.0 之后连接池耗尽",
    "inventory-service p99 latency doubled since 03:00Z",
    "checkout error rate spike after config change",
)
KNOWLEDGE = (
    "连接池 耗尽",
    "gateway 504 upstream",
    "锁等待 慢查询",
    "回滚 步骤",
    "SSO callback 失败",
    "队列 积压",
)
MESSAGES = (
    "HikariPool-1 - Connection is not available, request timed out after 30000ms",
    "upstream request timeout 504",
    "Lock wait timeout exceeded; try restarting transaction",
    "payment callback failed: read timeout",
    "consumer lag 215034 messages",
    "SSO assertion rejected: clock skew",
)
TITLES = ("支付超时与连接池耗尽", "网关 502/504 排查", "MySQL 锁等待与慢查询", "发布回滚", "订单队列积压")


def _pick(rng: random.Random, weighted: tuple[tuple[Any, int], ...]) -> Any:
    return rng.choices([value for value, _ in weighted], weights=[w for _, w in weighted])[0]


def _ts(us: int) -> str:
    return audit_timestamp(datetime.fromtimestamp(us / 1_000_000, UTC))


def _input(rng: random.Random, tool: str, at_us: int) -> dict[str, Any]:
    if tool == "lookup_knowledge":
        return {"query": rng.choice(KNOWLEDGE), "top_k": 3}
    if tool == "query_logs":
        return {
            "service": rng.choice(SERVICES),
            "start": _ts(at_us - 3_600_000_000),
            "end": _ts(at_us),
            "level": rng.choice(("ERROR", "WARN", None)),
            "contains": rng.choice(("timeout", "504", "lock", None)),
            "limit": 50,
        }
    return {
        "sql": f"SELECT id, status, updated_at FROM payments WHERE merchant_id = {rng.randint(10000, 10999)}"
        " ORDER BY updated_at DESC LIMIT 20",
        "database": "shop",
    }


def _projection(rng: random.Random, tool: str, at_us: int) -> dict[str, Any]:
    if tool == "lookup_knowledge":
        return {
            "hits": [
                {
                    "title": rng.choice(TITLES),
                    "path": "payment-timeout-connection-pool.md",
                    "snippet": "检查 HikariCP 活跃连接数与等待线程，确认是否发布后出现",
                }
            ]
        }
    if tool == "query_logs":
        lines = [
            {
                "ts": _ts(at_us - rng.randint(0, 3_600_000_000)),
                "level": "ERROR",
                "message": rng.choice(MESSAGES),
            }
            for _ in range(rng.randint(1, 3))
        ]
        return {"lines": lines, "truncated": False}
    return {
        "columns": ["id", "status", "updated_at"],
        "rows": [[rng.randint(1, 10**6), "PENDING", _ts(at_us)]],
        "row_count": 1,
    }


def _runs(
    rng: random.Random, invocations: int, end: datetime
) -> Iterator[tuple[tuple[Any, ...], list[tuple[Any, ...]]]]:
    """(run row, invocation rows) in time order, until `invocations` invocation rows were made."""
    counts = (0, 1, 2, 3, 4, 5, 6)
    weights = (5, 15, 25, 25, 15, 10, 5)  # 2.8 invocations per run on average
    end_us = int(end.timestamp() * 1_000_000)
    span_us = int(SPAN.total_seconds() * 1_000_000)
    gap = span_us / max(1.0, invocations / 2.8)
    at = end_us - span_us
    made = 0
    sessions: list[str] = []
    while made < invocations:
        at += int(rng.expovariate(1 / gap)) + 1
        run_id = f"run-{rng.getrandbits(48):012x}"
        if not sessions or rng.random() < 0.6:
            sessions = [*sessions[-19:], f"session-{rng.getrandbits(48):012x}"]
        session = rng.choice(sessions)
        n = min(rng.choices(counts, weights)[0], invocations - made)
        t = at + rng.randint(300_000, 2_000_000)
        rows = []
        for k in range(n):
            tool = _pick(rng, TOOLS)
            status = _pick(rng, STATUSES)
            error = _pick(rng, ERRORS[tool]) if status == "ERROR" else None
            duration = rng.randint(5, 3000)
            projection = _projection(rng, tool, t) if status == "FOUND" else None
            evaluation = rng.choice(("GAINED", "GAINED", "NO_GAIN")) if status == "FOUND" else None
            rows.append((
                run_id, f"call-{k + 1}", session, tool, k + 1, status, error,
                "WRITE_STATEMENT" if error == "POLICY_REJECTED" else None,
                json.dumps(_input(rng, tool, t), ensure_ascii=False, sort_keys=True),
                None if projection is None else json.dumps(projection, ensure_ascii=False, sort_keys=True),
                evaluation, _ts(t), _ts(t + duration * 1000), duration, 2 * k + 3,
            ))  # fmt: skip
            t += duration * 1000 + rng.randint(200_000, 1_500_000)
        made += n
        outcome, stop_reason = _pick(rng, OUTCOMES)
        model_calls = n + 1
        run = (
            run_id,
            session,
            rng.choice(QUERIES),
            outcome,
            stop_reason,
            _ts(at),
            _ts(t + 500_000),
            model_calls,
            900 * model_calls,
            90 * model_calls,
            990 * model_calls,
            None,
            None,
            None,
            0,
        )
        yield run, rows
        at = t


def _marks(n: int) -> str:
    return ", ".join("?" * n)


def populate_audit(path: Path, invocations: int, *, seed: int = 7, end: datetime = DEFAULT_END) -> int:
    """Fill a new audit file with `invocations` rows (and their runs); returns the number of runs.

    Indexes and FTS triggers are dropped for the load and recreated from their own DDL afterwards
    (a sorted index build is far faster than a million random index inserts): the file ends up with
    exactly the shipped schema.
    """
    open_audit_store(SqliteLocation(path)).close()
    rng = random.Random(seed)
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA synchronous=OFF")
        conn.execute("PRAGMA cache_size=-262144")
        ddl = conn.execute(
            "SELECT type, name, sql FROM sqlite_master WHERE type IN ('index', 'trigger')"
            " AND tbl_name IN ('runs', 'invocations') AND sql IS NOT NULL"
        ).fetchall()
        fts = [
            r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE name LIKE '%\\_fts' ESCAPE '\\'")
        ]
        for kind, name, _ in ddl:
            conn.execute(f"DROP {kind} {name}")
        run_count = 0
        batch_runs: list[tuple[Any, ...]] = []
        batch_invocations: list[tuple[Any, ...]] = []

        def flush() -> None:
            conn.execute("BEGIN")
            conn.executemany(
                f"INSERT INTO runs (run_id, session_id, query, outcome, stop_reason, started_at,"
                " finished_at, model_calls, prompt_tokens, completion_tokens, total_tokens,"
                f" result_json, failure_json, pid, interrupted) VALUES ({_marks(15)})",
                batch_runs,
            )
            conn.executemany(
                f"INSERT INTO invocations (run_id, tool_call_id, session_id, tool, round, status,"
                " error_code, reason, input_json, projection_json, evaluation, started_at,"
                f" finished_at, duration_ms, seq) VALUES ({_marks(15)})",
                batch_invocations,
            )
            conn.execute("COMMIT")
            batch_runs.clear()
            batch_invocations.clear()

        for run, rows in _runs(rng, invocations, end):
            run_count += 1
            batch_runs.append(run)
            batch_invocations.extend(rows)
            if len(batch_invocations) >= 50_000:
                flush()
        flush()
        conn.execute("BEGIN")
        for kind, _, sql in ddl:
            if kind == "index":
                conn.execute(sql)
        for name in fts:
            conn.execute(f"INSERT INTO {name} ({name}) VALUES ('rebuild')")
        for kind, _, sql in ddl:
            if kind == "trigger":
                conn.execute(sql)
        conn.execute("COMMIT")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    return run_count
