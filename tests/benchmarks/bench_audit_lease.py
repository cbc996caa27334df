"""What the team audit's lease check costs per tool round, measured side by side on MariaDB.

    python -m tests.benchmarks.bench_audit_lease [--runs 30] [--tools 8]

Every commit that writes a leased run's rows renews the run's lease first (`audit.leases`, KEEP_SQL):
one more UPDATE by primary key in the transaction of each tool's start and of the run's finish.
Runs of `--tools` tool rounds (start, finish, a round's rows) are recorded through `AuditSink` into a
fresh database on the local server (dropped at the end), alternating two sinks on the same store:

- shipped: the lease renewed in every such commit;
- without the check: the same sink with the renewal skipped (what the store did before).

The median run is reported per tool round, and their ratio. Informational: exit status 0 unless a run
fails.
"""

from __future__ import annotations

import argparse
import secrets
import statistics
import time

from audit.location import MysqlLocation
from audit.mysql_store import MysqlAuditStore
from audit.sink import AuditSink
from tests.benchmarks.machine import hardware
from tests.support.audit_events import LOGS_INPUT, Events
from tests.support.mysql import MYSQL_HOST, MYSQL_PORT, ROOT_USER, root_connection


class _WithoutLeaseCheck(AuditSink):
    def _keep_lease(self, run_id: str) -> None:
        return None


def _record(sink: AuditSink, run_id: str, tools: int) -> float:
    ev = Events(run_id)
    started = time.perf_counter()
    sink(ev.run_started("支付回调超时"))
    for n in range(1, tools + 1):
        sink(ev.round_started(n))
        sink(ev.round_finished(n, [f"call-{n}"]))
        sink(ev.tool_started(f"call-{n}", "query_logs", LOGS_INPUT, round_=n))
        sink(ev.tool_finished(f"call-{n}", "query_logs", "EMPTY", round_=n))
    sink(ev.run_finished("DRAFT", "COMPLETED"))
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.benchmarks.bench_audit_lease")
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--tools", type=int, default=8)
    args = parser.parse_args()
    database = f"dc_bench_{secrets.token_hex(6)}"
    with root_connection() as conn, conn.cursor() as cursor:
        cursor.execute(f"CREATE DATABASE `{database}` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
    try:
        with root_connection() as conn, conn.cursor() as cursor:
            cursor.execute("SELECT VERSION()")
            row = cursor.fetchone()
            assert row is not None
            (version,) = row
        with MysqlAuditStore(MysqlLocation(MYSQL_HOST, MYSQL_PORT, ROOT_USER, database)) as store:
            variants = {"shipped": AuditSink(store), "without the check": _WithoutLeaseCheck(store)}
            seconds: dict[str, list[float]] = {name: [] for name in variants}
            for n in range(args.runs):
                for name, sink in variants.items():  # alternating: drift hits both alike
                    seconds[name].append(_record(sink, f"{name[:4]}-{n}", args.tools))
        per_round = {name: statistics.median(values) / args.tools * 1000 for name, values in seconds.items()}
        print(f"{hardware()}, MariaDB {version}; {args.runs} runs of {args.tools} tool rounds per variant")
        for name, ms in per_round.items():
            print(f"  {name:<18} {ms:6.2f} ms per tool round (median run)")
        print(f"  ratio shipped / without: {per_round['shipped'] / per_round['without the check']:.2f}")
    finally:
        with root_connection() as conn, conn.cursor() as cursor:
            cursor.execute(f"DROP DATABASE IF EXISTS `{database}`")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
