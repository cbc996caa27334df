"""Audit browse at scale on MariaDB, beside the SQLite file with the same rows.

    python -m tests.benchmarks.bench_audit_mysql [--rows 100000] [--repeats 100]
        [--keep-file FILE] [--keep-database NAME]

Builds one audit file of `--rows` invocations (tests.support.audit_data, the mix bench_audit uses),
bulk-loads the same rows into a fresh MariaDB database on the local server (dropped at the end),
then times, interleaved with hand-written SQL on a raw connection to the same store, the first page,
a filtered page (tool + status + 7-day range), the next page and the runs' first page, on both
stores; then text searches (browser only). Medians in ms and the browser / SQL ratio (target <= 2).

A 1,000,000-invocation load takes tens of minutes: `--keep-file` and `--keep-database` keep the file
and the database after the run and reuse them on the next one (when both already hold data, nothing
is rebuilt), so a change to the read path can be measured again on the same rows.

"""

from __future__ import annotations

import argparse
import secrets
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from audit.browse import INVOCATION_ORDER, AuditBrowser, InvocationFilter
from audit.common import AuditStoreError, audit_timestamp
from audit.copy import COPIED_COLUMNS
from audit.location import MysqlLocation
from audit.mysql_store import MysqlAuditStore
from audit.mysql_text_search import backfill
from audit.port import AuditBackend
from audit.sqlite_store import AuditStore
from tests.benchmarks.bench_audit import _median_ms, _time_pair
from tests.support.audit_data import DEFAULT_END, populate_audit
from tests.support.mysql import MYSQL_HOST, MYSQL_PORT, ROOT_USER, root_connection

_BATCH = 2000


def bulk_load(path: Path, location: MysqlLocation) -> None:
    """The file's rows into the server's (empty, migrated) tables, in large multi-row inserts."""
    MysqlAuditStore(location).close()
    source = sqlite3.connect(path)
    with root_connection(location.database) as conn, conn.cursor() as cursor:
        for table, columns in COPIED_COLUMNS.items():
            names = ", ".join(columns)
            insert = f"INSERT INTO {table} ({names}) VALUES ({', '.join(['%s'] * len(columns))})"
            rows = source.execute(f"SELECT {names} FROM {table}")
            while batch := rows.fetchmany(_BATCH):
                cursor.executemany(insert, batch)
        # The rows arrive as finished runs already marked indexed: index them as the migration would.
        backfill(cursor.execute)
        cursor.execute("ANALYZE TABLE runs, invocations")
        cursor.fetchall()
    source.close()


def _cases(
    browser: AuditBrowser, run: Callable[[str, tuple[Any, ...]], Any], mark: str
) -> list[tuple[str, Callable[[], Any], Callable[[], Any]]]:
    end = DEFAULT_END
    since, until = audit_timestamp(end - timedelta(days=30)), audit_timestamp(end - timedelta(days=23))
    flt = InvocationFilter(tool="query_logs", status="ERROR", since=since, until=until)
    first = browser.invocations(limit=50)
    second, last = first.next_cursor, first.rows[-1]
    assert second is not None
    listed = "COALESCE(started_at, finished_at)" if mark == "?" else "listed_at"
    m = mark
    return [
        (
            "first page (50, no filter)",
            lambda: browser.invocations(limit=50),
            lambda: run(f"SELECT * FROM invocations ORDER BY {INVOCATION_ORDER} LIMIT 51", ()),
        ),
        (
            "filtered page (tool+status+7 days)",
            lambda: browser.invocations(flt, limit=50),
            lambda: run(
                f"SELECT * FROM invocations WHERE tool = {m} AND status = {m} AND started_at >= {m}"
                f" AND started_at < {m} ORDER BY {INVOCATION_ORDER} LIMIT 51",
                ("query_logs", "ERROR", since, until),
            ),
        ),
        (
            "next page via cursor",
            lambda: browser.invocations(limit=50, cursor=second),
            lambda: run(
                f"SELECT * FROM invocations WHERE started_at <= {m}"
                f" AND (started_at < {m} OR (run_id, tool_call_id) < ({m}, {m}))"
                f" ORDER BY {INVOCATION_ORDER} LIMIT 51",
                (last["started_at"], last["started_at"], last["run_id"], last["tool_call_id"]),
            ),
        ),
        (
            "runs first page",
            lambda: browser.runs(limit=50),
            lambda: run(f"SELECT * FROM runs ORDER BY {listed} DESC, run_id DESC LIMIT 51", ()),
        ),
    ]


SEARCHES = [
    "HikariPool",
    "连接池",
    "超时",
    "payment-service",
    "merchant_id = 10043",
    "无此",
    "10043",  # rare
    "zzz-nothing",  # absent
    "不存在的词",  # absent, Chinese
]


def measure(name: str, store: AuditBackend, run: Callable[..., Any], mark: str, repeats: int) -> None:
    browser = AuditBrowser(store)
    print(f"\n{name}")
    print(f"{'query':<38} {'browser ms':>11} {'SQL ms':>8} {'ratio':>6}")
    for label, browser_call, raw_call in _cases(browser, run, mark):
        b, r = _time_pair(browser_call, raw_call, repeats)
        print(f"{label:<38} {b:>11.3f} {r:>8.3f} {b / r if r else float('inf'):>6.2f}")
    for term in SEARCHES:

        def call(term: str = term) -> object:
            return browser.invocations(InvocationFilter(text=term))

        t0 = time.perf_counter()
        try:
            call()
        except AuditStoreError as exc:  # e.g. the read timeout: report it and go on
            print(f"text search {term!r:<26} failed after {time.perf_counter() - t0:.1f} s: {exc}")
            continue
        samples = []
        for _ in range(3):
            t0 = time.perf_counter()
            call()
            samples.append(time.perf_counter() - t0)
        print(f"text search {term!r:<26} {_median_ms(samples):>11.3f}", flush=True)


def _loaded_count(database: str) -> int:
    """Invocations already in the kept database (creating it when absent), to skip a 1M reload."""
    with root_connection() as admin, admin.cursor() as cursor:
        cursor.execute("SELECT 1 FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = %s", (database,))
        if cursor.fetchone() is None:
            cursor.execute(f"CREATE DATABASE `{database}`")
            return 0
        cursor.execute(
            "SELECT 1 FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s AND TABLE_NAME = 'invocations'",
            (database,),
        )
        if cursor.fetchone() is None:
            return 0
        cursor.execute(f"SELECT COUNT(*) FROM `{database}`.invocations")
        row = cursor.fetchone()
        assert row is not None
        return int(row[0])


def _file_count(path: Path) -> int:
    if not path.exists():
        return 0
    with sqlite3.connect(path) as conn:
        return int(conn.execute("SELECT COUNT(*) FROM invocations").fetchone()[0])


def _time_stores(path: Path, location: MysqlLocation, repeats: int) -> None:
    with AuditStore(path) as file_store:
        raw = sqlite3.connect(path)
        measure("SQLite file", file_store, lambda s, p: raw.execute(s, p).fetchall(), "?", repeats)
        raw.close()
    with MysqlAuditStore(location) as server_store, root_connection(location.database) as conn:

        def server_sql(sql: str, params: tuple[Any, ...]) -> Any:
            with conn.cursor() as cursor:
                cursor.execute(sql, params)
                return cursor.fetchall()

        with conn.cursor() as cursor:
            cursor.execute("SELECT VERSION()")
            row = cursor.fetchone()
            assert row is not None
            version = row[0]
        measure(f"MariaDB {version}", server_store, server_sql, "%s", repeats)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.benchmarks.bench_audit_mysql")
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=100)
    parser.add_argument("--keep-file", type=Path, help="keep (and reuse) the audit file here")
    parser.add_argument("--keep-database", help="keep (and reuse) this database on the local server")
    args = parser.parse_args(argv)
    database = args.keep_database or f"dc_bench_{secrets.token_hex(4)}"
    try:
        with tempfile.TemporaryDirectory(prefix="audit-bench-") as tmp:
            path = args.keep_file or Path(tmp) / "audit.db"
            location = MysqlLocation(MYSQL_HOST, MYSQL_PORT, ROOT_USER, database)
            in_file = _file_count(path)
            if in_file and _loaded_count(database) == in_file:
                print(f"reusing {path} and database {database} ({in_file:,} invocations)")
            else:
                # A partial earlier load (an interrupted run) is rebuilt from scratch.
                path.unlink(missing_ok=True)
                with root_connection() as admin, admin.cursor() as cursor:
                    cursor.execute(f"DROP DATABASE IF EXISTS `{database}`")
                    cursor.execute(f"CREATE DATABASE `{database}`")
                t0 = time.perf_counter()
                runs = populate_audit(path, args.rows)
                t1 = time.perf_counter()
                print(f"{args.rows:,} invocations / {runs:,} runs: file {t1 - t0:.1f} s", flush=True)
                bulk_load(path, location)
                print(f"MariaDB load {time.perf_counter() - t1:.1f} s", flush=True)
            _time_stores(path, location, args.repeats)
    finally:
        if not args.keep_database:
            with root_connection() as admin, admin.cursor() as cursor:
                cursor.execute(f"DROP DATABASE IF EXISTS `{database}`")
    return 0


if __name__ == "__main__":
    sys.exit(main())
