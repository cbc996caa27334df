"""Recorded runs for audit tests and snapshots: real engine events with pinned IDs and times.

The events come from the real use case (so they are exactly what the engine emits); only run/session IDs,
timestamps and measured durations are rewritten, so an audit filled from them is the same every time.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from agent.scenarios import resolve_scenario
from audit import AuditSink
from audit.factory import open_audit_store
from audit.location import SqliteLocation
from tests.support.engine import harness

T0 = datetime(2026, 11, 30, 2, 30, 0, tzinfo=UTC)


def record(scenario: str) -> list[dict[str, Any]]:
    h = harness(resolve_scenario(scenario))
    asyncio.run(h.run())
    return h.events


def pinned(
    events: list[dict[str, Any]], run_id: str, session_id: str, start: datetime
) -> list[dict[str, Any]]:
    """The same events with a fixed identity, a fixed clock (10 ms per event) and zero durations."""
    out = []
    for event in events:
        copy = {**event, "run_id": run_id, "session_id": session_id}
        copy["at"] = (start + timedelta(milliseconds=10 * event["seq"])).isoformat().replace("+00:00", "Z")
        if "duration_ms" in copy:
            copy["duration_ms"] = 0
        if copy["type"] == "budget_changed":
            copy["deadline"] = {**copy["deadline"], "elapsed_s": 0.0}
        if copy["type"] == "run_finished":
            copy["result"] = {**copy["result"], "run_id": run_id, "session_id": session_id}
        out.append(copy)
    return out


def fill_audit(path: Path, recorded: dict[str, list[dict[str, Any]]], runs: int) -> list[str]:
    """Write `runs` runs (cycling through the recorded scenarios, one minute apart); returns run IDs."""
    names = sorted(recorded)
    run_ids = []
    with open_audit_store(SqliteLocation(path)) as store:
        sink = AuditSink(store)
        for i in range(runs):
            run_id = f"run-{i + 1:04d}"
            for event in pinned(
                recorded[names[i % len(names)]], run_id, "session-audit", T0 + timedelta(minutes=i)
            ):
                sink(event)
            run_ids.append(run_id)
    return run_ids
