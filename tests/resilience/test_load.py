"""Load: 8 headless `diagnose run` processes in loops against one audit file and the local MariaDB.

Every run started must be accounted for (a result on stdout and an audit row with that outcome), no
process may report a lock error or a traceback, and the peak RSS of a run process must not grow over the
test. Default: 8 workers x 15 s; `long`: 8 workers x 2 minutes.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import statistics
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from tests.support.audit_reader import AuditReader
from tests.support.expected import EXPECTED
from tests.support.mysql import MysqlTestEnv, root_connection
from tests.support.resilience import REPO, assert_audit_consistent
from tools.mysql.adapter import load_demo_fixture

pytestmark = pytest.mark.mysql

WORKERS = 8
SCENARIOS = [
    "evidence-backed-diagnosis",
    "mysql-stuck-enterprise-orders",
    "stop-required-ignored",
    "tool-finds-no-evidence",
    "no-gain-saturation-final-draft",
    "fenced-json-fails-closed",
    "model-call-budget-exhausted",
    "unknown-tool",
]
# With the demo database loaded the MySQL scenario finds its rows and its conclusion stands.
EXPECTED_EXIT = {name: EXPECTED[name][2] for name in SCENARIOS} | {"mysql-stuck-enterprise-orders": 0}
ERROR_WORDS = ("traceback", "locked", "busy", "error")


@pytest.fixture
def demo_database(mysql_env: MysqlTestEnv) -> Any:
    """A database loaded through the shipped `load_demo_fixture`, dropped afterwards."""
    name = f"dc_load_{secrets.token_hex(4)}"
    dsn = f"mysql://root@127.0.0.1:3306/{name}"
    asyncio.run(load_demo_fixture(dsn, None, name))
    try:
        yield dsn
    finally:
        with root_connection() as conn, conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{name}`")


def _load(tmp_path: Path, dsn: str, seconds: float) -> None:
    audit = tmp_path / "audit.db"
    workers = []
    for w in range(WORKERS):
        out = tmp_path / f"worker-{w}.json"
        argv = [
            sys.executable, "-m", "tests.resilience.load_worker", "--audit-db", str(audit),
            "--seconds", str(seconds), "--scenarios", ",".join(SCENARIOS), "--offset", str(w),
            "--mysql-dsn", dsn, "--out", str(out),
        ]  # fmt: skip
        workers.append((out, subprocess.Popen(argv, cwd=REPO)))
    for _, proc in workers:
        assert proc.wait(timeout=seconds + 120) == 0
    summaries = [json.loads(out.read_text(encoding="utf-8")) for out, _ in workers]
    records = [record for summary in summaries for record in summary["runs"]]

    problems = [r for r in records if r["run_id"] is None or r["exit"] != EXPECTED_EXIT[r["scenario"]]]
    assert problems == [], problems
    noisy = [r for r in records if any(word in r["stderr"].lower() for word in ERROR_WORDS)]
    assert noisy == [], [r["stderr"] for r in noisy]

    run_ids = [r["run_id"] for r in records]
    assert len(set(run_ids)) == len(run_ids)
    rows = assert_audit_consistent(audit, run_ids)
    assert {rid: row["outcome"] for rid, row in rows.items()} == {r["run_id"]: r["outcome"] for r in records}
    on_file = AuditReader(audit)
    audited = len(on_file.query("SELECT run_id FROM runs WHERE outcome IS NOT NULL"))
    unfinished = len(on_file.query("SELECT run_id FROM runs WHERE outcome IS NULL"))
    assert (audited, unfinished) == (len(records), 0), "every run started is in the audit with an outcome"

    _report_memory(summaries, records, seconds)


def _report_memory(summaries: list[dict[str, Any]], records: list[dict[str, Any]], seconds: float) -> None:
    """Peak RSS per run process, by scenario; the later runs must not need more than the first ones."""
    by_scenario: dict[str, list[int]] = defaultdict(list)
    for summary in summaries:
        for record in summary["runs"]:
            by_scenario[record["scenario"]].append(record["peak_rss_kb"])
    peaks = [r["peak_rss_kb"] for r in records]
    walls = [r["seconds"] for r in records]
    lines = [
        f"{len(records)} runs by {WORKERS} workers in {seconds:.0f} s; run wall time median "
        f"{statistics.median(walls):.2f} s, max {max(walls):.2f} s",
        f"peak RSS per run process: min {min(peaks) / 1024:.0f} MiB, "
        f"median {statistics.median(peaks) / 1024:.0f} MiB, max {max(peaks) / 1024:.0f} MiB; "
        f"worker wrappers max {max(s['worker_peak_rss_kb'] for s in summaries) / 1024:.0f} MiB",
    ]
    for scenario, values in sorted(by_scenario.items()):
        lines.append(
            f"  {scenario:<32} runs {len(values):3d}  "
            f"peak RSS {min(values) / 1024:.0f}-{max(values) / 1024:.0f} MiB"
        )
        half = len(values) // 2
        if half:
            early, late = statistics.median(values[:half]), statistics.median(values[half:])
            assert late <= early * 1.2, f"{scenario}: peak RSS grew from {early} kB to {late} kB"
    assert max(peaks) < 512 * 1024, "a single headless run should stay well under 512 MiB"
    print("\n" + "\n".join(lines))


def test_eight_concurrent_headless_runners(demo_database: str, tmp_path: Path) -> None:
    """Eight runners for a few runs each; the two-minute variant below is the soak."""
    _load(tmp_path, demo_database, seconds=8)


@pytest.mark.long
def test_eight_concurrent_headless_runners_two_minutes(demo_database: str, tmp_path: Path) -> None:
    _load(tmp_path, demo_database, seconds=120)
