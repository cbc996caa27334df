"""query_logs' first call over a large log file, per format family, beside `grep -ciF` on the same file.

    python -m tests.benchmarks.bench_logs_file [--size-mib 1024] [--families ndjson ecs syslog log4j gzip]
        [--folder DIR]

For each family, writes one time-sorted file of about `--size-mib` (a week of lines, five services)
in a temporary folder, deleted afterwards:

- `ndjson`: our own four keys and labels, ~260 bytes a line;
- `ecs`: JSON with other field names (`@timestamp`, `log.level`, `service.name`), read by the default
  field mapping;
- `syslog`: RFC 3164 lines (`Nov 26 02:00:00 host sshd[123]: ...`), no year, no zone;
- `log4j`: `2026-11-26 02:00:00,123 ERROR [thread] class - message` text where every 40th record is an
  ERROR carrying a 40-line stack trace whose cause line holds the word searched for;
- `gzip`: the `ndjson` file compressed (it cannot be bisected: read from its start).

Then, in the same run, for each family: `grep -ciF WORD FILE` (`gzip -dc FILE | grep -ciF WORD` for
gzip) and two first `query_logs` calls, each in a fresh Python process whose adapter has never seen
the file: *incident* (one service, a one-hour window in the file's middle, `contains` = the word) and
*whole file* (the same with a window over the whole week: nothing to bisect, the worst case). Each
call's time, the process's RSS growth during the call (`VmHWM` minus the RSS before it) and
`matched` are printed; on the whole-file call `matched` must equal grep's count (the word is in one
line of each matching record), or the run exits 1. The file is read once before timing, so both
sides read from the page cache.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from tests.benchmarks.machine import MEMORY_STATUS_SOURCE, hardware

REPO = Path(__file__).resolve().parents[2]
MIB = 1024 * 1024
START = datetime(2026, 11, 23, tzinfo=UTC)
SPAN = timedelta(days=7)
SERVICES = ("payment-service", "order-service", "api-gateway", "account-service", "inventory-service")
WORD = "SocketTimeout"  # in one service's failures only, so the service filter keeps every hit
INCIDENT = {"start": "2026-11-26T14:00:00Z", "end": "2026-11-26T15:00:00Z"}
WHOLE = {"start": "2026-11-22T00:00:00Z", "end": "2026-12-01T00:00:00Z"}
FAMILIES = ("ndjson", "ecs", "syslog", "log4j", "gzip")
STACK = [f"\tat com.example.pay.Gateway{n}.call(Gateway{n}.java:{40 + n})" for n in range(38)]

CHILD = (
    MEMORY_STATUS_SOURCE
    + r"""
import asyncio, json, sys, time
from pathlib import Path
from tools.adapter import ToolRequest
from tools.input_models import QueryLogsInput
from tools.logs.file_source import LogFileAdapter


log_file, fields = Path(sys.argv[1]), json.loads(sys.argv[2])
adapter = LogFileAdapter(log_file, max_window_minutes=20 * 24 * 60)
request = ToolRequest("run", "session", "call", "query_logs", QueryLogsInput(**fields))
before = status("VmRSS")
started = time.perf_counter()
result = asyncio.run(adapter.execute(request))
seconds = time.perf_counter() - started
print(json.dumps({"s": seconds, "peak_growth": status("VmHWM") - before, "matched": result.data["matched"]}))
"""
)


def stamp(n: int, lines: int) -> datetime:
    return START + SPAN * n / lines


def line_of(family: str, n: int, lines: int) -> str:
    """Record `n` of `lines` in a family's format (a log4j failure spans the stack trace's lines)."""
    moment = stamp(n, lines)
    service = SERVICES[n % len(SERVICES)]
    failure = service == "payment-service" and n % 40 == 0
    level = "ERROR" if failure else ("WARN" if n % 17 == 0 else "INFO")
    message = (
        f"charge failed for order o-{n % 100_000:05d}: gateway {WORD}Exception after 30000ms"
        if failure
        else f"request handled order=o-{n % 100_000:05d} in {n % 700} ms by worker {n % 64}"
    )
    if family in ("ndjson", "gzip"):
        record = {
            "ts": moment.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "service": service,
            "level": level,
            "message": message,
            "trace_id": f"{n * 2654435761 % 2**64:016x}",
            "instance": f"{service}-7f9c{n % 7}-x{n % 5}",
        }
        return json.dumps(record, separators=(",", ":"))
    if family == "ecs":
        record = {
            "@timestamp": moment.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "log.level": level.lower(),
            "message": message,
            "service.name": service,
            "ecs.version": "1.6.0",
            "trace.id": f"{n * 2654435761 % 2**64:016x}",
        }
        return json.dumps(record, separators=(",", ":"))
    if family == "syslog":
        pid = 1000 + n % 90
        return f"{moment:%b} {moment.day:2d} {moment:%H:%M:%S} host-{n % 5} {service}[{pid}]: {message}"
    millis = moment.microsecond // 1000
    head = f"{moment:%Y-%m-%d %H:%M:%S},{millis:03d} {level:<5} [worker-{n % 64}] {service} - "
    if not failure:
        return head + message
    cause = f"Caused by: java.net.{WORD}Exception: Read timed out after 30000ms"
    first = head + f"charge failed for order o-{n % 100_000:05d}"
    return "\n".join([first, "com.example.pay.ChargeError: gateway", *STACK, cause])


def write_family(family: str, folder: Path, size_bytes: int) -> Path:
    """A time-sorted file of about `size_bytes` (before compression)."""
    source = "ndjson" if family == "gzip" else family
    (folder / family).mkdir()
    # A text log's service is its file's name: the log4j file is the payment service's.
    path = folder / family / f"{SERVICES[0]}.{'log' if source in ('syslog', 'log4j') else 'ndjson'}"
    probe = sum(len(line_of(source, n, 1_000_000)) + 1 for n in range(2000)) / 2000
    lines = max(1, int(size_bytes / probe))
    with path.open("w", encoding="utf-8") as handle:
        for first in range(0, lines, 20_000):
            handle.write(
                "\n".join(line_of(source, n, lines) for n in range(first, min(first + 20_000, lines)))
            )
            handle.write("\n")
    end = (START + SPAN).timestamp()
    os.utime(path, (end, end))  # the year of syslog's year-less stamps
    if family != "gzip":
        return path
    compressed = folder / family / "app.ndjson.gz"
    with path.open("rb") as plain, gzip.open(compressed, "wb", compresslevel=6) as packed:
        shutil.copyfileobj(plain, packed, 4 * MIB)
    path.unlink()
    return compressed


def grep_count(path: Path) -> tuple[float, int]:
    command = (
        f"gzip -dc '{path}' | grep -ciF '{WORD}'" if path.suffix == ".gz" else f"grep -ciF '{WORD}' '{path}'"
    )
    started = time.perf_counter()
    run = subprocess.run(["sh", "-c", command], capture_output=True, text=True, check=False)
    return time.perf_counter() - started, int(run.stdout.strip() or 0)


def first_call(path: Path, window: dict[str, str], service: str) -> dict[str, Any]:
    fields = {"service": service, "contains": WORD, "limit": 50, **window}
    run = subprocess.run(
        [sys.executable, "-c", CHILD, str(path), json.dumps(fields)],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        check=False,
    )
    if run.returncode != 0:
        raise SystemExit(f"child failed: {run.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(run.stdout)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size-mib", type=int, default=1024)
    parser.add_argument("--families", nargs="+", choices=FAMILIES, default=list(FAMILIES))
    parser.add_argument("--folder", type=Path, default=None, help="where to write the files (a temp dir)")
    args = parser.parse_args()

    print(f"machine: {hardware()}; {os.getloadavg()[0]:.1f} load average at start")
    print(
        f"{'family':>7} {'MiB':>6} {'grep s':>7} {'grep n':>7} {'incident s':>10} {'x grep':>6}"
        f" {'whole s':>8} {'x grep':>6} {'matched':>8} {'peak +MiB':>9}"
    )
    agree = True
    with tempfile.TemporaryDirectory(dir=args.folder, prefix="bench-logs-") as tmp:
        folder = Path(tmp)
        for family in args.families:
            path = write_family(family, folder, args.size_mib * MIB)
            grep_count(path)  # the page cache holds the file for both sides
            grep_s, grep_n = grep_count(path)
            incident = first_call(path, INCIDENT, "payment-service")
            whole = first_call(path, WHOLE, "payment-service")
            peak = max(incident["peak_growth"], whole["peak_growth"]) / MIB
            agree = agree and whole["matched"] == grep_n
            print(
                f"{family:>7} {path.stat().st_size / MIB:>6.0f} {grep_s:>7.2f} {grep_n:>7,}"
                f" {incident['s']:>10.2f} {incident['s'] / grep_s:>6.2f}"
                f" {whole['s']:>8.2f} {whole['s'] / grep_s:>6.2f} {whole['matched']:>8,} {peak:>9.1f}",
                flush=True,
            )
            path.unlink()
    print(
        "matched equals grep's count on every whole-file call"
        if agree
        else "matched DIFFERS from grep's count"
    )
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())
