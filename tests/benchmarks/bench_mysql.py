"""query_mysql overhead: guard + hardened execution + projection + redaction against raw aiomysql.

    python -m tests.benchmarks.bench_mysql [--rows 1000] [--repeats 100] [--dsn mysql://root@127.0.0.1:3306]

Creates a throwaway database `dc_bench_<hex>` with a `--rows`-row table on the local MariaDB (dropped at
the end), then times the same SELECT of every row, interleaved, in one event loop:

- guarded: `ToolBoundary.validate_input` + `ToolBoundary.invoke` -> the real `MysqlAdapter.execute` (sqlglot
  guard, pooled connection, session time limit, read-only session and transaction, LIMIT clamped to
  max_rows + 1, per-cell projection, result-size check) and the boundary's redaction of the projection;
  max_rows = rows and a large max_result_bytes, so both sides fetch every row;
- raw: the statement on one reused aiomysql connection opened with the same settings
  (`tools.mysql.adapter.open_connection`), `execute` + `fetchall`.

Reports medians, the ratio (target: within 1.2x) and where the guarded side's extra time goes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

from tests.benchmarks.machine import hardware
from tools.adapter import ToolRequest
from tools.boundary import ToolBoundary
from tools.definitions import ToolName
from tools.mysql.adapter import MysqlAdapter, _Rows, open_connection, parse_dsn
from tools.mysql.guard import GuardedStatement, guard_sql
from tools.redaction import Redactor

TARGET_RATIO = 1.2
# The floor: work no guarded path can skip, however it is written: the statement must be parsed and
# checked, every value must pass the redactor (secrets never reach the model) and the result's size
# must be known to enforce max_result_bytes (one JSON serialisation). No wire cap, no conversion.
GUARD = "sqlglot guard (parse, check, clamp, render)"
REDACTION = "redaction of the projection"
FLOOR_SIZE_CHECK = "one JSON serialisation of the projection (the size check alone)"
DEFAULT_DSN = "mysql://root@127.0.0.1:3306"
SQL = "SELECT id, order_no, enterprise_id, status, amount, created_at, note FROM bench_orders ORDER BY id"
STATUSES = ("PAID", "PAYING", "FAILED", "REFUNDED")


async def create_database(dsn: str, database: str, rows: int) -> None:
    conn = await open_connection(parse_dsn(dsn), None, 10.0)
    try:
        async with conn.cursor() as cur:
            await cur.execute(f"CREATE DATABASE `{database}` CHARACTER SET utf8mb4")
            await conn.select_db(database)
            await cur.execute(
                "CREATE TABLE bench_orders (id INT PRIMARY KEY, order_no VARCHAR(32) NOT NULL,"
                " enterprise_id VARCHAR(16) NOT NULL, status VARCHAR(16) NOT NULL,"
                " amount DECIMAL(12,2) NOT NULL,"
                " created_at DATETIME NOT NULL, note VARCHAR(200) NULL)"
            )
            values = [
                (
                    i,
                    f"ORD-20261130-{i:06d}",
                    f"ent-{20900 + i % 50}",
                    STATUSES[i % len(STATUSES)],
                    f"{(i * 37) % 100000 / 100:.2f}",
                    f"2026-11-30 {i // 3600 % 24:02d}:{i // 60 % 60:02d}:{i % 60:02d}",
                    None if i % 3 else f"callback timeout after 30000 ms (attempt {i % 5})",
                )
                for i in range(1, rows + 1)
            ]
            await cur.executemany("INSERT INTO bench_orders VALUES (%s, %s, %s, %s, %s, %s, %s)", values)
    finally:
        conn.close()


async def drop_database(dsn: str, database: str) -> None:
    conn = await open_connection(parse_dsn(dsn), None, 10.0)
    try:
        async with conn.cursor() as cur:
            await cur.execute(f"DROP DATABASE IF EXISTS `{database}`")
    finally:
        conn.close()


async def _median_pairs(
    sides: dict[str, Callable[[], Awaitable[Any]]], repeats: int, warmup: int
) -> dict[str, list[float]]:
    for _ in range(warmup):
        for call in sides.values():
            await call()
    samples: dict[str, list[float]] = {name: [] for name in sides}
    for _ in range(repeats):  # ABAB...: server caches and CPU frequency drift hit both sides alike
        for name, call in sides.items():
            t0 = time.perf_counter()
            await call()
            samples[name].append(time.perf_counter() - t0)
    return samples


async def measure(dsn: str, rows: int, repeats: int, warmup: int) -> dict[str, Any]:
    database = f"dc_bench_{secrets.token_hex(4)}"
    await create_database(dsn, database, rows)
    adapter = MysqlAdapter(
        f"{dsn}/{database}",
        password=None,
        allowed_schemas=[database],
        statement_timeout_ms=30_000,
        max_rows=rows,
        max_result_bytes=1_000_000_000,
        pool_size=1,
    )
    boundary = ToolBoundary({ToolName.QUERY_MYSQL: adapter}, redactor=Redactor(["bench-secret-value-123"]))
    raw = await open_connection(parse_dsn(dsn), None, 10.0)
    await raw.select_db(database)
    guarded_statement = guard_sql(SQL, database=database, allowed_schemas=[database], max_rows=rows)
    try:

        async def guarded() -> int:
            business = boundary.validate_input(ToolName.QUERY_MYSQL, {"sql": SQL, "database": None})
            outcome = await boundary.invoke(
                ToolRequest("run-bench", "s-bench", "call-1", ToolName.QUERY_MYSQL, business)
            )
            if outcome.status != "FOUND" or outcome.data is None:
                raise SystemExit(
                    f"guarded side failed: {outcome.status} {outcome.error_code} {outcome.reason}"
                )
            return int(outcome.data["row_count"])

        async def raw_select() -> int:
            async with raw.cursor() as cur:
                await cur.execute(SQL)
                return len(await cur.fetchall())

        got = (await guarded(), await raw_select())
        if got != (rows, rows):
            raise SystemExit(f"both sides must fetch {rows} rows, got {got}")
        samples = await _median_pairs({"guarded": guarded, "raw": raw_select}, repeats, warmup)
        parts = await attribute(adapter, raw, database, guarded_statement, repeats)
    finally:
        raw.close()
        await boundary.aclose()
        await drop_database(dsn, database)
    return {"samples": samples, "parts": parts}


async def attribute(
    adapter: MysqlAdapter, raw: Any, database: str, guarded: GuardedStatement, repeats: int
) -> dict[str, float]:
    """Median cost of each step the guarded side adds, timed in isolation (ms)."""
    redactor = Redactor(["bench-secret-value-123"])
    async with raw.cursor() as cur:
        await cur.execute(SQL)
        columns = [str(c[0]) for c in cur.description]
        fetched = list(await cur.fetchall())
    projection = adapter._project(_Rows(columns, fetched), guarded).data

    def timed_sync(action: Callable[[], Any]) -> float:
        values = []
        for _ in range(max(20, repeats // 2)):
            t0 = time.perf_counter()
            action()
            values.append(time.perf_counter() - t0)
        return statistics.median(values) * 1000

    async def session_statements() -> None:
        async with raw.cursor() as cur:
            await cur.execute("SET SESSION max_statement_time = 30.000")
            await cur.execute("SET SESSION TRANSACTION READ ONLY")
            await raw.select_db(database)
            await cur.execute("START TRANSACTION READ ONLY")
            await cur.execute("ROLLBACK")
            await cur.execute("SET SESSION TRANSACTION READ WRITE")  # undo for the raw side's next query

    session = []
    for _ in range(max(20, repeats // 2)):
        t0 = time.perf_counter()
        await session_statements()
        session.append(time.perf_counter() - t0)
    return {
        GUARD: timed_sync(
            lambda: guard_sql(SQL, database=database, allowed_schemas=[database], max_rows=len(fetched))
        ),
        "session round trips (time limit, read-only, BEGIN, ROLLBACK; 1 extra undo here)": statistics.median(
            session
        )
        * 1000,
        "projection (per-cell conversion + JSON size check)": timed_sync(
            lambda: adapter._project(_Rows(columns, fetched), guarded)
        ),
        REDACTION: timed_sync(lambda: redactor.value(projection)),
        FLOOR_SIZE_CHECK: timed_sync(lambda: json.dumps(projection, ensure_ascii=False)),
        "projection JSON size (bytes)": float(len(json.dumps(projection, ensure_ascii=False).encode())),
    }


async def server_version(dsn: str) -> str:
    conn = await open_connection(parse_dsn(dsn), None, 10.0)
    try:
        return str(conn.get_server_info())
    finally:
        conn.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.benchmarks.bench_mysql", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=100, help="measured queries per side")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--dsn", default=DEFAULT_DSN, help="server only (no database): a temp one is created")
    args = parser.parse_args(argv)
    print(hardware())
    print(
        f"server {asyncio.run(server_version(args.dsn))}, {args.rows} rows x 7 columns, "
        f"{args.repeats} interleaved queries per side"
    )
    figures = asyncio.run(measure(args.dsn, args.rows, args.repeats, args.warmup))
    samples: dict[str, list[float]] = figures["samples"]
    guarded, raw = (statistics.median(samples[k]) * 1000 for k in ("guarded", "raw"))
    ratio = guarded / raw
    met = ratio <= TARGET_RATIO
    for name, label in (
        ("guarded", "query_mysql path (boundary + adapter)"),
        ("raw", "raw aiomysql execute+fetchall"),
    ):
        values = samples[name]
        p90 = statistics.quantiles(values, n=10)[-1] * 1000
        print(f"  {label:<40} median {statistics.median(values) * 1000:8.2f} ms   p90 {p90:8.2f} ms")
    print(
        f"ratio {ratio:.2f}x (target <= {TARGET_RATIO}x: {'met' if met else 'MISSED'}); "
        f"overhead {guarded - raw:.2f} ms per query"
    )
    print("where the extra time goes (medians of each step alone):")
    parts: dict[str, float] = figures["parts"]
    for name, value in parts.items():
        unit = "" if "bytes" in name else " ms"
        print(f"  {name:<82} {value:10.2f}{unit}")
    floor = raw + parts[GUARD] + parts[REDACTION] + parts[FLOOR_SIZE_CHECK]
    print(
        f"floor: raw + guard + redaction + size check = {floor:.2f} ms, {floor / raw:.2f}x raw "
        f"(the least any guarded path can cost against this baseline)"
    )
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
