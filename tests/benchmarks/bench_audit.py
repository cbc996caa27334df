"""Audit browse at scale: AuditBrowser pages against a hand-written indexed SQL floor on the same file.

    python -m tests.benchmarks.bench_audit [--rows 1000000] [--repeats 200] [--keep FILE]

Builds an audit of `--rows` invocations (about 90 days of runs with a realistic mix of tools,
statuses and error codes) in a temporary directory through the shipped schema, then times, side by
side and interleaved, the first page and a filtered page (tool + status + 7-day range) through
`AuditBrowser` and through plain SQL on a raw sqlite3 connection. Reports medians in ms and the
ratio. Targets: ratio <= 2 and browser median < 50 ms.
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from audit.browse import INVOCATION_ORDER, AuditBrowser, InvocationFilter
from audit.store import AuditStore, audit_timestamp

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


def populate_audit(path: Path, invocations: int, *, seed: int = 7, end: datetime = DEFAULT_END) -> int:
    """Fill a new audit file with `invocations` rows (and their runs); returns the number of runs.

    Indexes and FTS triggers are dropped for the load and recreated from their own DDL afterwards
    (a sorted index build is far faster than a million random index inserts): the file ends up with
    exactly the shipped schema.
    """
    AuditStore(path).close()
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


def _marks(n: int) -> str:
    return ", ".join("?" * n)


def _median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def _time_pair(
    browser_call: Callable[[], Any], raw_call: Callable[[], Any], repeats: int
) -> tuple[float, float]:
    """Interleaved, after a warm-up, so both see the same cache state."""
    browser_call(), raw_call()
    browser_times: list[float] = []
    raw_times: list[float] = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        browser_call()
        t1 = time.perf_counter()
        raw_call()
        t2 = time.perf_counter()
        browser_times.append(t1 - t0)
        raw_times.append(t2 - t1)
    return _median_ms(browser_times), _median_ms(raw_times)


def run_benchmark(path: Path, repeats: int, out: Callable[[str], None]) -> bool:
    store = AuditStore(path)
    browser = AuditBrowser(store)
    raw = sqlite3.connect(path)
    end = DEFAULT_END
    since, until = audit_timestamp(end - timedelta(days=30)), audit_timestamp(end - timedelta(days=23))
    flt = InvocationFilter(tool="query_logs", status="ERROR", since=since, until=until)
    second = browser.invocations(limit=50).next_cursor
    assert second is not None
    cursor_row = browser.invocations(limit=50).rows[-1]
    cases: list[tuple[str, Callable[[], Any], Callable[[], Any], bool]] = [
        (
            "first page (50, no filter)",
            lambda: browser.invocations(limit=50),
            lambda: raw.execute(f"SELECT * FROM invocations ORDER BY {INVOCATION_ORDER} LIMIT 51").fetchall(),
            True,
        ),
        (
            "filtered page (tool+status+7 days)",
            lambda: browser.invocations(flt, limit=50),
            lambda: raw.execute(
                "SELECT * FROM invocations WHERE tool = ? AND status = ?"
                f" AND started_at >= ? AND started_at < ? ORDER BY {INVOCATION_ORDER} LIMIT 51",
                ("query_logs", "ERROR", since, until),
            ).fetchall(),
            True,
        ),
        (
            "next page via cursor",
            lambda: browser.invocations(limit=50, cursor=second),
            lambda: raw.execute(
                "SELECT * FROM invocations WHERE started_at <= ?"
                " AND (started_at < ? OR (run_id, tool_call_id) < (?, ?))"
                f" ORDER BY {INVOCATION_ORDER} LIMIT 51",
                (
                    cursor_row["started_at"],
                    cursor_row["started_at"],
                    cursor_row["run_id"],
                    cursor_row["tool_call_id"],
                ),
            ).fetchall(),
            False,
        ),
        (
            "runs first page",
            lambda: browser.runs(limit=50),
            lambda: raw.execute(
                "SELECT * FROM runs ORDER BY COALESCE(started_at, finished_at) DESC, run_id DESC LIMIT 51"
            ).fetchall(),
            False,
        ),
    ]
    ok = True
    out(f"{'query':<38} {'browser ms':>11} {'SQL ms':>8} {'ratio':>6}")
    for name, browser_call, raw_call, target in cases:
        b, r = _time_pair(browser_call, raw_call, repeats)
        ratio = b / r if r else float("inf")
        verdict = ""
        if target:
            met = ratio <= 2.0 and b < 50.0
            ok = ok and met
            verdict = "  target met" if met else "  TARGET MISSED"
        out(f"{name:<38} {b:>11.3f} {r:>8.3f} {ratio:>6.2f}{verdict}")

    out("")
    out("informational (browser only, median ms):")
    info: list[tuple[str, Callable[[], Any]]] = [
        ("text search 'HikariPool' (page)", lambda: browser.invocations(InvocationFilter(text="HikariPool"))),
        ("text search '连接池' (page)", lambda: browser.invocations(InvocationFilter(text="连接池"))),
        ("text search '超时' (2 chars, LIKE)", lambda: browser.invocations(InvocationFilter(text="超时"))),
        (
            "error_code=POLICY_REJECTED (page)",
            lambda: browser.invocations(InvocationFilter(error_code="POLICY_REJECTED")),
        ),
        ("count tool+status+7 days", lambda: browser.count_invocations(flt)),
    ]
    for name, call in info:
        call()
        samples = []
        for _ in range(max(5, repeats // 20)):
            t0 = time.perf_counter()
            call()
            samples.append(time.perf_counter() - t0)
        out(f"{name:<38} {_median_ms(samples):>11.3f}")
    combos, worst_ms, worst_name = _worst_filter_combination(browser, since, until)
    out(f"slowest of all {combos} filter combinations (page): {worst_ms:.3f} ms  [{worst_name}]")
    raw.close()
    store.close()
    return ok


def _worst_filter_combination(browser: AuditBrowser, since: str, until: str) -> tuple[int, float, str]:
    """Every subset of the equality and time filters, with values that exist, one timed page each."""
    sample = browser.invocations(InvocationFilter(status="ERROR", since=since), limit=1).rows[0]
    values: dict[str, Any] = {
        "run_id": sample["run_id"], "session_id": sample["session_id"], "tool": sample["tool"],
        "status": sample["status"], "error_code": sample["error_code"], "since": since, "until": until,
    }  # fmt: skip
    names = list(values)
    worst_ms, worst_name = 0.0, ""
    for mask in range(1 << len(names)):
        chosen = {n: values[n] for i, n in enumerate(names) if mask >> i & 1}
        flt = InvocationFilter(**chosen)
        browser.invocations(flt)
        samples = []
        for _ in range(3):
            t0 = time.perf_counter()
            browser.invocations(flt)
            samples.append(time.perf_counter() - t0)
        ms = _median_ms(samples)
        if ms > worst_ms:
            worst_ms, worst_name = ms, "+".join(chosen) or "none"
    return 1 << len(names), worst_ms, worst_name


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.benchmarks.bench_audit", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--rows", type=int, default=1_000_000, help="invocations to generate")
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument(
        "--keep", type=Path, help="build (or reuse) the audit file here instead of a temp dir"
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="audit-bench-") as tmp:
        path = args.keep or Path(tmp) / "audit.db"
        if not path.exists():
            t0 = time.perf_counter()
            runs = populate_audit(path, args.rows)
            size_mb = path.stat().st_size / 1e6
            print(
                f"built {args.rows:,} invocations / {runs:,} runs in {time.perf_counter() - t0:.1f} s "
                f"({size_mb:,.0f} MB) at {path}"
            )
        print(f"SQLite {sqlite3.sqlite_version}, Python {sys.version.split()[0]}, repeats {args.repeats}")
        ok = run_benchmark(path, args.repeats, print)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
