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
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from audit.browse import INVOCATION_ORDER, AuditBrowser, InvocationFilter
from audit.common import audit_timestamp
from audit.sqlite.store import SqliteAuditStore
from tests.support.audit_data import DEFAULT_END, populate_audit


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
    store = SqliteAuditStore(path)
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
