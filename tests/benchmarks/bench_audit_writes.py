"""What each audit write choice costs per tool round, measured side by side on the same event stream.

    python -m tests.benchmarks.bench_audit_writes [--rounds 16] [--repeats 40]

The events of one scripted 16-round investigation (`bench_harness`'s script, recorded once from the
real emitter) are replayed into `AuditSink` on a fresh audit file per variant, each replay under a new
run ID; variants alternate, and the median replay is reported per tool round:

- shipped: one commit per tool call (STARTED durable before the tool runs) and per run end; every
  other row queued until the next commit; plain SQL; WAL with synchronous=NORMAL;
- commit per event: the same, but every event committed on its own (the previous strategy);
- synchronous=FULL: shipped, but every commit waits for an fsync of the WAL;
- rollback journal: shipped, but journal_mode=DELETE instead of WAL (synchronous=NORMAL);
- FTS triggers (schema v4): shipped, but with the insert and update triggers that kept the text index
  in sync on every write until schema v5 (which indexes a run in one batch at its finish instead).

Informational: the exit status is 0 unless a replay fails.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent.events.run_events import RunEvent
from audit import AuditSink, SqliteAuditStore
from audit.sqlite.store import _fts_statements
from audit.sqlite.text_search import FTS_COLUMNS
from tests.benchmarks.bench_harness import HarnessSide
from tests.benchmarks.machine import hardware


def record_events(tool_rounds: int, folder: Path) -> list[RunEvent]:
    """The typed events of one harness run, exactly as the emitter hands them to the audit."""
    side = HarnessSide(tool_rounds, folder / "record.db")
    events: list[RunEvent] = []
    original = AuditSink.__call__

    def recording(self: AuditSink, event: Any) -> None:
        events.append(event)
        original(self, event)

    AuditSink.__call__ = recording  # type: ignore[method-assign]
    try:
        asyncio.run(side.run_once())
    finally:
        AuditSink.__call__ = original  # type: ignore[method-assign]
        side.close()
    return events


def per_event_commits(store: SqliteAuditStore) -> Callable[[RunEvent], None]:
    sink = AuditSink(store)

    def write(event: RunEvent) -> None:
        sink(event)
        store.flush()

    return write


def open_store(
    path: Path, *, synchronous: str = "NORMAL", journal: str = "WAL", fts_triggers: bool = False
) -> SqliteAuditStore:
    store = SqliteAuditStore(path)
    if fts_triggers and store.has_fts:
        for table, columns in FTS_COLUMNS.items():
            _, insert, _, update, _ = _fts_statements(table, columns)  # v4's insert and update triggers
            store.db.execute(insert)
            store.db.execute(update)
    if journal != "WAL":
        store.db.execute(f"PRAGMA journal_mode={journal}")
    store.db.execute(f"PRAGMA synchronous={synchronous}")
    return store


VARIANTS: dict[str, tuple[dict[str, Any], bool]] = {
    "shipped (commit per tool call, WAL, NORMAL)": ({}, False),
    "commit per event": ({}, True),
    "synchronous=FULL": ({"synchronous": "FULL"}, False),
    "rollback journal (DELETE)": ({"journal": "DELETE"}, False),
    "FTS triggers on every write (schema v4)": ({"fts_triggers": True}, False),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.benchmarks.bench_audit_writes", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--rounds", type=int, default=16, help="tool rounds of the recorded run")
    parser.add_argument("--repeats", type=int, default=40, help="replays per variant")
    args = parser.parse_args(argv)
    print(hardware())
    with tempfile.TemporaryDirectory(prefix="bench-audit-writes-") as tmp:
        folder = Path(tmp)
        events = record_events(args.rounds, folder)
        print(f"{len(events)} events per run ({args.rounds} tool rounds), {args.repeats} replays per variant")
        stores = {
            name: open_store(folder / f"variant-{index}.db", **options)
            for index, (name, (options, _)) in enumerate(VARIANTS.items())
        }
        sinks = {
            name: per_event_commits(stores[name]) if each else AuditSink(stores[name])
            for name, (_, each) in VARIANTS.items()
        }
        samples: dict[str, list[float]] = {name: [] for name in VARIANTS}
        for repeat in range(args.repeats + 3):
            for name, sink in sinks.items():
                run_id = f"run-{repeat}"
                replay = [dataclasses.replace(event, run_id=run_id) for event in events]
                started = time.perf_counter()
                for event in replay:
                    sink(event)
                if repeat >= 3:  # the first replays warm the caches and the file
                    samples[name].append(time.perf_counter() - started)
        for store in stores.values():
            store.close()
    shipped = statistics.median(samples[next(iter(VARIANTS))])
    width = max(len(name) for name in VARIANTS)
    for name, values in samples.items():
        median = statistics.median(values)
        print(
            f"  {name:<{width}}  {median * 1000:7.2f} ms per run  {median * 1e6 / args.rounds:6.0f} us per "
            f"tool round  ({median / shipped:.2f}x shipped)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
