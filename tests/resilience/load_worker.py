"""One worker of the load test: `python -m console run --scenario S --json --audit-db F` in a loop.

    python -m tests.resilience.load_worker --audit-db F --seconds 15 --scenarios a,b --out W.json

Starts no new run after `--seconds`, waits for the one in flight, and writes one record per run: the
scenario, exit code, run id and outcome from the result JSON, stderr, wall time and the run process's peak
RSS (from `wait4`, which reports the rusage of exactly that child; Linux keeps the larger of the forked
worker image and the run itself, and the run is the larger by far).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


def run_once(scenario: str, audit_db: str, env: dict[str, str]) -> dict[str, Any]:
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.monotonic()
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "console",
                "run",
                "--scenario",
                scenario,
                "--json",
                "--audit-db",
                audit_db,
            ],
            stdout=out,
            stderr=err,
            cwd=REPO,
            env=env,
        )
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait again
        seconds = time.monotonic() - started
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode("utf-8", "replace"), err.read().decode("utf-8", "replace")
    record: dict[str, Any] = {
        "scenario": scenario,
        "exit": proc.returncode,
        "seconds": round(seconds, 3),
        "peak_rss_kb": usage.ru_maxrss,
        "stderr": stderr,
        "run_id": None,
        "outcome": None,
    }
    try:
        result = json.loads(stdout)
        record["run_id"], record["outcome"] = result["run_id"], result["outcome"]
    except (ValueError, KeyError, TypeError):
        record["stdout"] = stdout[-2000:]
    return record


def own_peak_rss_kb() -> int:
    """VmHWM, not getrusage: Linux carries ru_maxrss across exec, so a worker forked from pytest would
    report pytest's size."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.resilience.load_worker")
    parser.add_argument("--audit-db", required=True)
    parser.add_argument("--seconds", type=float, required=True)
    parser.add_argument("--scenarios", required=True, help="comma-separated; run in turn")
    parser.add_argument("--offset", type=int, default=0, help="which scenario comes first")
    parser.add_argument("--mysql-dsn", help="DIAGNOSE_MYSQL__DSN for the mysql-* scenarios")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    scenarios = args.scenarios.split(",")
    deadline = time.monotonic() + args.seconds
    records: list[dict[str, Any]] = []
    index = args.offset
    while time.monotonic() < deadline:
        scenario = scenarios[index % len(scenarios)]
        index += 1
        env = {k: v for k, v in os.environ.items() if not k.startswith("DIAGNOSE_")}
        if scenario.startswith("mysql-") and args.mysql_dsn:
            env["DIAGNOSE_MYSQL__DSN"] = args.mysql_dsn
        records.append(run_once(scenario, args.audit_db, env))
    summary = {
        "pid": os.getpid(),
        "worker_peak_rss_kb": own_peak_rss_kb(),
        "runs": records,
    }
    Path(args.out).write_text(json.dumps(summary, ensure_ascii=False), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
