"""query_logs over a large NDJSON file: memory and time per call, this version beside an earlier one.

    python -m tests.benchmarks.bench_logs_file [--sizes-mib 10 100 1024] [--baseline REV] [--folder DIR]
        [--boundary-from-mib 500]

For each size, writes one log file (time-sorted, five services, a week of lines, ~260 bytes a line
like the demo incident's) in a temporary folder, deleted afterwards. Then, for each implementation
and size, a fresh Python process (so one run's memory never counts against another) builds a
`LogFileAdapter` on that file and makes three calls:

- cold: payment-service ERROR lines in a two-hour window, the file never read before;
- again: the same call, the file unchanged;
- other: api-gateway lines containing "status=504" in another two-hour window.

It reports each call's time and the process's RSS growth: the peak (`VmHWM`) and the RSS after the
calls, each minus the RSS just before the first call. The baseline is `tools/logs_file.py` as of
`--baseline` (default: the commit before the streaming scan), taken from git into the temporary
folder for the run only. Both implementations must return the same answers; the run exits 1 if not.

Sizes whose cold call may pass the tool's time limit (`--boundary-from-mib`, default 500) get a second
fresh process per side that makes the cold call the way a run does, through `ToolBoundary` and its
default limit (`DEFAULT_TOOL_TIMEOUT_S`), repeating it while it answers TIMEOUT (at most three calls),
and reports the CPU seconds the process spent in the five seconds after the first TIMEOUT: a scan that
keeps running after its call has ended shows there.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from tests.benchmarks.git_baseline import baseline_file
from tests.benchmarks.machine import hardware

REPO = Path(__file__).resolve().parents[2]
BASELINE = "3c48680"  # tools/logs_file.py before the streaming scan: every line parsed and kept
MIB = 1024 * 1024
START = datetime(2026, 11, 23, tzinfo=UTC)
SPAN = timedelta(days=7)
SERVICES = ("payment-service", "order-service", "api-gateway", "account-service", "inventory-service")
QUERIES = {
    "cold": {
        "service": "payment-service",
        "level": "ERROR",
        "start": "2026-11-26T02:00:00Z",
        "end": "2026-11-26T04:00:00Z",
        "limit": 50,
    },
    "again": {
        "service": "payment-service",
        "level": "ERROR",
        "start": "2026-11-26T02:00:00Z",
        "end": "2026-11-26T04:00:00Z",
        "limit": 50,
    },
    "other": {
        "service": "api-gateway",
        "contains": "status=504",
        "start": "2026-11-28T10:00:00Z",
        "end": "2026-11-28T12:00:00Z",
        "limit": 50,
    },
}

CHILD = r"""
import asyncio, hashlib, importlib.util, json, sys, time
from pathlib import Path

module_file, log_file = sys.argv[1], Path(sys.argv[2])
queries = json.loads(sys.argv[3])
spec = importlib.util.spec_from_file_location("bench_logs_impl", module_file)
impl = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = impl  # dataclasses look their module up there
spec.loader.exec_module(impl)
from tools.adapter import ToolRequest
from tools.input_models import QueryLogsInput


def status(key):
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(key)


def request(name, fields):
    return ToolRequest("run", "session", "call-" + name, "query_logs", QueryLogsInput(**fields))


async def through_boundary():
    from tools.boundary import ToolBoundary

    boundary = ToolBoundary({"query_logs": impl.LogFileAdapter(log_file)})
    calls, cpu_after_timeout = [], None
    for attempt in range(3):
        started = time.perf_counter()
        outcome = await boundary.invoke(request("cold", queries["cold"]))
        seconds = time.perf_counter() - started
        calls.append({"status": str(outcome.status), "error": outcome.error_code, "s": seconds})
        if outcome.error_code != "TIMEOUT":
            break
        if cpu_after_timeout is None:
            cpu = time.process_time()
            await asyncio.sleep(5)
            cpu_after_timeout = time.process_time() - cpu
    print(json.dumps({"calls": calls, "cpu_after_timeout": cpu_after_timeout}))


async def main():
    adapter = impl.LogFileAdapter(log_file)
    before = status("VmRSS")
    calls = {}
    for name, fields in queries.items():
        started = time.perf_counter()
        result = await adapter.execute(request(name, fields))
        seconds = time.perf_counter() - started
        digest = hashlib.sha256(json.dumps([result.status, result.data], sort_keys=True).encode()).hexdigest()
        calls[name] = {"s": seconds, "returned": result.data["returned"], "digest": digest}
    print(json.dumps({
        "calls": calls,
        "peak_growth": status("VmHWM") - before,
        "after_growth": status("VmRSS") - before,
        "skipped": adapter.skipped_lines,
    }))


asyncio.run(through_boundary() if sys.argv[4] == "boundary" else main())
"""


def write_log(path: Path, size_bytes: int) -> int:
    """A time-sorted log of about `size_bytes`; returns its line count."""
    line_bytes = 262
    lines = max(1, size_bytes // line_bytes)
    step = SPAN / lines
    levels = ["INFO"] * 40 + ["WARN"] * 6 + ["ERROR"] * 3 + ["DEBUG"]
    with path.open("w", encoding="utf-8") as handle:
        for n in range(lines):
            service = SERVICES[n % len(SERVICES)]
            level = levels[(n // len(SERVICES) * 7) % len(levels)]
            ts = (START + step * n).isoformat(timespec="milliseconds").replace("+00:00", "Z")
            if service == "api-gateway":
                message = f"POST /api/v1/payments status={504 if n % 11 == 0 else 200} {n % 900}ms"
            elif level == "ERROR":
                message = "HikariPool-1 - Connection is not available, request timed out after 30000ms"
            else:
                message = f"request handled order=o-{n % 100_000:05d} in {n % 700} ms"
            record = {
                "ts": ts,
                "service": service,
                "level": level,
                "message": message,
                "trace_id": f"{n * 2654435761 % 2**64:016x}",
                "instance": f"{service}-7f9c{n % 7}-x{n % 5}",
            }
            handle.write(json.dumps(record, separators=(",", ":")) + "\n")
    return lines


def measure(module: Path, log: Path, mode: str = "direct") -> dict[str, Any]:
    run = subprocess.run(
        [sys.executable, "-c", CHILD, str(module), str(log), json.dumps(QUERIES), mode],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    if run.returncode != 0:
        raise SystemExit(f"child failed: {run.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(run.stdout)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes-mib", type=int, nargs="+", default=[10, 100, 1024])
    parser.add_argument("--baseline", default=BASELINE, help="git revision of the earlier tools/logs_file.py")
    parser.add_argument("--folder", type=Path, default=None, help="where to write the log files (a temp dir)")
    parser.add_argument("--boundary-from-mib", type=int, default=500, help="also call through ToolBoundary")
    args = parser.parse_args()

    print(f"machine: {hardware()}")
    print(f"baseline: tools/logs_file.py at {args.baseline}; new: {REPO / 'tools' / 'logs_file.py'}")
    same = True
    with tempfile.TemporaryDirectory(dir=args.folder, prefix="bench-logs-") as tmp:
        folder = Path(tmp)
        sides = {
            "baseline": baseline_file(args.baseline, "tools/logs_file.py", folder),
            "new": REPO / "tools" / "logs_file.py",
        }
        print(
            f"{'size':>8} {'side':>8} {'lines':>10} {'cold s':>8} {'again s':>8} {'other s':>8}"
            f" {'peak RSS +MiB':>14} {'RSS after +MiB':>15} {'returned':>9}"
        )
        for size in args.sizes_mib:
            log = folder / f"app-{size}mib.ndjson"
            lines = write_log(log, size * MIB)
            digests: dict[str, dict[str, str]] = {}
            for side, module in sides.items():
                result = measure(module, log)
                calls = result["calls"]
                digests[side] = {name: call["digest"] for name, call in calls.items()}
                print(
                    f"{size:>5}MiB {side:>8} {lines:>10,} {calls['cold']['s']:>8.2f}"
                    f" {calls['again']['s']:>8.2f} {calls['other']['s']:>8.2f}"
                    f" {result['peak_growth'] / MIB:>14.1f} {result['after_growth'] / MIB:>15.1f}"
                    f" {calls['cold']['returned']:>4}/{calls['other']['returned']:<4}",
                    flush=True,
                )
            if digests["baseline"] != digests["new"]:
                same = False
                print(f"  answers differ at {size} MiB: {digests}")
            if size >= args.boundary_from_mib:
                for side, module in sides.items():
                    bounded = measure(module, log, "boundary")
                    calls = ", ".join(
                        f"{call['error'] or call['status']} after {call['s']:.1f} s"
                        for call in bounded["calls"]
                    )
                    cpu = bounded["cpu_after_timeout"]
                    after = "" if cpu is None else f"; CPU in the 5 s after the first TIMEOUT: {cpu:.1f} s"
                    print(f"{size:>5}MiB {side:>8} through ToolBoundary: {calls}{after}", flush=True)
            log.unlink()
    print("answers: identical" if same else "answers: DIFFERENT")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
