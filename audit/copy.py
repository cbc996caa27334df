"""Moving audit rows between stores: a machine's file into the team database, or back.

A run is the unit: its row, model rounds, invocations and protocol events are written in one target
transaction, so a run is either wholly in the target or not at all. A run the target already holds
is skipped, which makes a copy idempotent and an interrupted copy resumable: run it again and it
continues where it stopped. A run still going in the source (no `finished_at`) is left for a later
copy, so nothing half-written is frozen into the target. Runs are read in keyset pages by run_id,
so memory stays at one page whatever the audit's size.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from audit.common import RUN_SETUP_COLUMNS
from audit.port import AuditBackend
from audit.rows import RunRow

COPY_PAGE_SIZE = 200

# The columns both stores hold (docs/contracts.md, "Audit"; `audit.rows`): all but the store's own,
# the text index's `runs.fts_pending` and protocol_events' `id`.
COPIED_COLUMNS: dict[str, tuple[str, ...]] = {
    "runs": (
        "run_id",
        "session_id",
        "query",
        "outcome",
        "stop_reason",
        "started_at",
        "finished_at",
        "model_calls",
        "prompt_tokens",
        "completion_tokens",
        "total_tokens",
        "result_json",
        "failure_json",
        "pid",
        "pid_start",
        "interrupted",
        *RUN_SETUP_COLUMNS,
    ),
    "model_rounds": (
        "run_id",
        "round",
        "started_at",
        "finished_at",
        "prompt_tokens",
        "completion_tokens",
        "tool_call_ids",
        "has_text",
        "duration_ms",
        "seq",
        "usage_estimated",
    ),
    "invocations": (
        "run_id",
        "tool_call_id",
        "session_id",
        "tool",
        "round",
        "status",
        "error_code",
        "reason",
        "input_json",
        "projection_json",
        "evaluation",
        "started_at",
        "finished_at",
        "duration_ms",
        "seq",
        "input_key",
    ),
    "protocol_events": ("run_id", "tool_call_id", "code", "detail_json", "at", "seq"),
}
_CHILD_ORDER = {"model_rounds": "round", "invocations": "tool_call_id", "protocol_events": "id"}


@dataclass
class CopyReport:
    copied: int = 0  # runs written to the target
    present: int = 0  # runs the target already held
    unfinished: int = 0  # runs still going in the source, left for a later copy

    @property
    def seen(self) -> int:
        return self.copied + self.present + self.unfinished


Progress = Callable[[CopyReport, int], None]


def _insert(table: str) -> str:
    columns = COPIED_COLUMNS[table]
    values = ", ".join("?" for _ in columns)
    if table == "runs":  # pending in the target's text index until the run's rows are all in
        return f"INSERT INTO runs ({', '.join(columns)}, fts_pending) VALUES ({values}, 1)"
    return f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({values})"


def count_runs(source: AuditBackend) -> int:
    return int(source.query("SELECT count(*) AS n FROM runs")[0]["n"])


def copy_audit(source: AuditBackend, target: AuditBackend, progress: Progress | None = None) -> CopyReport:
    """Copies every finished run of `source` that `target` lacks; `progress(report, total)` after each."""
    report = CopyReport()
    total = count_runs(source)
    after = ""
    while True:
        page = cast(
            list[RunRow],
            source.query(
                "SELECT * FROM runs WHERE run_id > ? ORDER BY run_id LIMIT ?", (after, COPY_PAGE_SIZE)
            ),
        )
        if not page:
            return report
        after = str(page[-1]["run_id"])
        held = _present(target, [str(run["run_id"]) for run in page])
        for run in page:
            if run["finished_at"] is None:
                report.unfinished += 1
            elif run["run_id"] in held:
                report.present += 1
            else:
                _copy_run(source, target, run)
                report.copied += 1
            if progress is not None:
                progress(report, total)


def _present(target: AuditBackend, run_ids: list[str]) -> set[str]:
    marks = ", ".join("?" for _ in run_ids)
    rows = target.query(f"SELECT run_id FROM runs WHERE run_id IN ({marks})", run_ids)
    return {str(row["run_id"]) for row in rows}


def _copy_run(source: AuditBackend, target: AuditBackend, run: RunRow) -> None:
    run_id = run["run_id"]
    with source.read():
        children = {
            table: source.query(f"SELECT * FROM {table} WHERE run_id = ? ORDER BY {order}", (run_id,))
            for table, order in _CHILD_ORDER.items()
        }
    tables: list[tuple[str, list[dict[str, Any]]]] = [("runs", [dict(run)]), *children.items()]
    with target.write() as scope:
        for table, rows in tables:
            statement = _insert(table)
            for row in rows:
                scope.conn.execute(statement, tuple(row.get(column) for column in COPIED_COLUMNS[table]))
        # A copied run is finished: its rows enter the target's text index with it, as a finish would.
        target.text_search.index_runs(scope.conn, [run_id])
