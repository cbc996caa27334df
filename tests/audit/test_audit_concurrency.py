"""Several processes share one audit file: no 'database is locked', no lost rows.
(docs/contracts.md, "Audit")

Eight processes each run the real engine (scripted `evidence-backed-diagnosis`, real Haystack Agent,
real audit sink) 25 times against one fresh file: the first opens race on creating the schema too.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import sqlite3
import threading
import time
from pathlib import Path

from audit.sqlite.store import SqliteAuditStore
from tests.support.audit_reader import AuditReader

PROCESSES = 8
RUNS_PER_PROCESS = 25
CALLS_PER_RUN = 3  # evidence-backed-diagnosis: call-1, call-2, call-3


def run_scenario_repeatedly(audit_db: str, runs: int) -> list[tuple[str, str, str | None]]:
    """Worker (runs in a spawned process): one environment, a fresh use case per run."""

    async def main() -> list[tuple[str, str, str | None]]:
        from console.wiring import open_run_environment

        env = open_run_environment(scenario="evidence-backed-diagnosis", audit_db=Path(audit_db))
        assert env.scenario is not None
        results: list[tuple[str, str, str | None]] = []
        try:
            for _ in range(runs):
                result = await env.use_case().execute(env.scenario.query)
                results.append((result.run_id, result.outcome, result.stop_reason))
        finally:
            await env.aclose()
        return results

    return asyncio.run(main())


def test_parallel_processes_lose_no_rows(tmp_path: Path) -> None:
    audit_db = tmp_path / "shared" / "audit.db"
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(PROCESSES) as pool:
        pending = pool.starmap_async(run_scenario_repeatedly, [(str(audit_db), RUNS_PER_PROCESS)] * PROCESSES)
        per_process = pending.get(
            timeout=240
        )  # a worker's exception (e.g. 'database is locked') re-raises here
    results = [result for batch in per_process for result in batch]
    assert len(results) == PROCESSES * RUNS_PER_PROCESS
    assert {(outcome, stop) for _, outcome, stop in results} == {("DRAFT", "COMPLETED")}

    on_file = AuditReader(audit_db)
    runs = on_file.query("SELECT run_id, outcome, finished_at, interrupted FROM runs")
    invocations = on_file.query("SELECT run_id, tool_call_id, status, finished_at FROM invocations")
    rounds = on_file.query("SELECT count(*) AS n FROM model_rounds WHERE finished_at IS NULL")
    assert {r["run_id"] for r in runs} == {run_id for run_id, _, _ in results}
    assert all(r["outcome"] == "DRAFT" and r["finished_at"] and not r["interrupted"] for r in runs)
    assert len(invocations) == PROCESSES * RUNS_PER_PROCESS * CALLS_PER_RUN
    assert all(i["status"] == "FOUND" and i["finished_at"] for i in invocations)
    assert rounds[0]["n"] == 0


def test_a_busy_file_delays_a_write_instead_of_failing_it(
    audit_store: SqliteAuditStore, tmp_path: Path
) -> None:
    """Even with SQLite's own busy handler off, BEGIN IMMEDIATE is retried until the lock frees."""
    path = tmp_path / "audit.db"  # where the fixture opened it
    audit_store.db.execute("PRAGMA busy_timeout = 0")
    other = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    released = threading.Event()

    def release_later() -> None:
        time.sleep(0.4)
        other.execute("COMMIT")
        released.set()

    releaser = threading.Thread(target=release_later)
    attempts: list[str] = []
    audit_store.db.conn.set_trace_callback(attempts.append)
    releaser.start()
    with audit_store.write() as db:
        db.table("runs").insert({"run_id": "r", "session_id": "s"})
    audit_store.db.conn.set_trace_callback(None)
    releaser.join()
    assert released.is_set()
    # It waited for the lock (busy timeout 0: each try fails at once and is retried), never gave up.
    assert attempts.count("BEGIN IMMEDIATE") > 1
    other.close()
    assert AuditReader(audit_store).run("r") is not None
