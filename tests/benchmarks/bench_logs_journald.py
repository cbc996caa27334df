"""query_logs over a journal (`[logs] source = "journald"`) beside `journalctl -o json | grep -ciF`.

    python -m tests.benchmarks.bench_logs_journald [--entries 300000] [--folder DIR]

Writes a journal of `--entries` entries over one day (five services, as units and identifiers;
every 40th entry of one service an error whose message holds the word searched for) with
systemd's `systemd-journal-remote`, in a temporary folder deleted afterwards. Then, in the same run:

- *floor*: `journalctl` with the adapter's own arguments (window, the service's matches, JSON of the
  same fields, newest first) piped into `grep -ciF WORD`: reading the entries the adapter reads,
  and counting the word, with no Python at all;
- *call*: one `query_logs` call (the service, `contains` = the word) in a fresh Python process,
  for an incident hour and for the whole day: its time, the process's RSS growth during the call
  (`VmHWM` minus the RSS before it) and `matched`, which must equal the floor's count (or, where the
  call stopped at its 64 MiB output cap and says `truncated`, be below it) or the run exits 1.

The journal is read once before timing, so every side reads from the page cache. Each row is the
median of `--repeat` rounds, the two sides alternating, so both see the same load.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from tests.benchmarks.machine import MEMORY_STATUS_SOURCE, hardware
from tests.support.journald import journal_remote, journalctl
from tools.logs.journald_source import OUTPUT_FIELDS, service_matches

REPO = Path(__file__).resolve().parents[2]
DAY_US = 86_400 * 1_000_000
START_US = 1_795_996_800_000_000  # 2026-11-30T00:00:00Z
SERVICES = ("payment-service", "order-service", "api-gateway", "account-service", "inventory-service")
WORD = "SocketTimeout"
INCIDENT = {"start": "2026-11-30T14:00:00Z", "end": "2026-11-30T15:00:00Z"}
WHOLE = {"start": "2026-11-30T00:00:00Z", "end": "2026-11-30T23:59:59Z"}

CHILD = (
    MEMORY_STATUS_SOURCE
    + r"""
import asyncio, json, sys, time
from pathlib import Path
from tools.adapter import ToolRequest
from tools.input_models import QueryLogsInput
from tools.logs.journald_source import JournaldLogAdapter


journalctl, folder, fields = sys.argv[1], Path(sys.argv[2]), json.loads(sys.argv[3])
adapter = JournaldLogAdapter(journalctl, folder, max_window_minutes=2 * 24 * 60)
request = ToolRequest("run", "session", "call", "query_logs", QueryLogsInput(**fields))
before = status("VmRSS")
started = time.perf_counter()
result = asyncio.run(adapter.execute(request))
seconds = time.perf_counter() - started
print(json.dumps({"s": seconds, "peak_growth": status("VmHWM") - before, "matched": result.data["matched"],
                  "truncated": result.data["truncated"]}))
"""
)


def export_entry(n: int, entries: int) -> str:
    service = SERVICES[n % len(SERVICES)]
    failure = service == "payment-service" and n % 40 == 0
    message = (
        f"charge failed for order o-{n % 100_000:05d}: gateway {WORD}Exception after 30000ms"
        if failure
        else f"request handled order=o-{n % 100_000:05d} in {n % 700} ms by worker {n % 64}"
    )
    return (
        f"__REALTIME_TIMESTAMP={START_US + DAY_US * n // entries}\n"
        f"_BOOT_ID=6c7c6013a26343b29e964691ff25d04c\n"
        f"PRIORITY={3 if failure else 6}\n"
        f"_SYSTEMD_UNIT={service}.service\n"
        f"SYSLOG_IDENTIFIER={service}\n"
        f"_PID={1000 + n % 5}\n"
        f"_HOSTNAME=host-{n % 3}\n"
        f"MESSAGE={message}\n\n"
    )


def write_journal(folder: Path, entries: int) -> Path:
    export = folder / "entries.export"
    with export.open("w", encoding="utf-8") as handle:
        for first in range(0, entries, 10_000):
            handle.write(
                "".join(export_entry(n, entries) for n in range(first, min(first + 10_000, entries)))
            )
    journal = folder / "journal"
    journal.mkdir()
    subprocess.run(
        [journal_remote(), f"--output={journal / 'remote.journal'}", str(export)],
        check=True,
        capture_output=True,
    )
    export.unlink()
    return journal


def floor(journal: Path, window: dict[str, str]) -> tuple[float, int]:
    since, until = (f"@{_epoch(window[key])}" for key in ("start", "end"))
    arguments = [
        journalctl(), "--output=json", "--all", "--reverse", "--no-pager",
        f"--output-fields={OUTPUT_FIELDS}", f"--since={since}", f"--until={until}",
        f"--directory={journal}", "--", *service_matches(SERVICES[0]),
    ]  # fmt: skip
    started = time.perf_counter()
    reader = subprocess.Popen(arguments, stdout=subprocess.PIPE)
    counted = subprocess.run(
        ["grep", "-ciF", WORD], stdin=reader.stdout, capture_output=True, text=True, check=False
    )
    reader.wait()
    return time.perf_counter() - started, int(counted.stdout.strip() or 0)


def call(journal: Path, window: dict[str, str]) -> dict[str, Any]:
    fields = {"service": SERVICES[0], "contains": WORD, "limit": 50, **window}
    run = subprocess.run(
        [sys.executable, "-c", CHILD, journalctl(), str(journal), json.dumps(fields)],
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


def _epoch(text: str) -> int:
    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp())


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--entries", type=int, default=300_000)
    parser.add_argument("--folder", type=Path, default=None, help="where to write the journal (a temp dir)")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    print(f"machine: {hardware()}; {os.getloadavg()[0]:.1f} load average at start")
    with tempfile.TemporaryDirectory(dir=args.folder, prefix="bench-journald-") as tmp:
        started = time.perf_counter()
        journal = write_journal(Path(tmp), args.entries)
        size = sum(path.stat().st_size for path in journal.iterdir())
        written_s = time.perf_counter() - started
        print(f"{args.entries} entries, journal {size / 2**20:.0f} MiB, written in {written_s:.1f} s")
        print(
            f"{'window':>8} {'floor s':>8} {'floor n':>8} {'call s':>7} {'x floor':>7}"
            f" {'matched':>8} {'peak +MiB':>9}"
        )
        agree = True
        for name, window in (("incident", INCIDENT), ("whole", WHOLE)):
            floor(journal, window)  # the page cache holds the journal for both sides
            floors, calls = [], []
            for _ in range(args.repeat):
                floors.append(floor(journal, window))
                calls.append(call(journal, window))
            floor_s, floor_n = statistics.median(s for s, _ in floors), floors[0][1]
            call_s = statistics.median(result["s"] for result in calls)
            result = max(calls, key=lambda result: result["peak_growth"])
            capped = result["truncated"] and result["matched"] < floor_n
            agree &= all(result["matched"] == floor_n or capped for result in calls)
            note = "  (stopped at the output cap: truncated)" if capped else ""
            print(
                f"{name:>8} {floor_s:8.2f} {floor_n:8d} {call_s:7.2f} {call_s / floor_s:7.2f}"
                f" {result['matched']:8d} {result['peak_growth'] / 2**20:9.1f}{note}"
            )
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())
