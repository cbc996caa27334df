"""What both audit stores share: the error a broken audit raises, the stored timestamp format, the
columns and SQL every store spells alike, and what a prune reports.

Both stores, the sink, the browser and the copy import these from here, so neither store imports the
other (docs/contracts.md, "Audit"). Standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from agent.errors import DiagnoseError

# A run recorded only by its finish (e.g. rejected input) has no started_at: it is listed by its finish.
# Queries must spell this exactly as the index does for SQLite to use the index.
RUN_LISTED_AT = "COALESCE(started_at, finished_at)"

# The run's model label and limits (v4), in the order the columns are added.
RUN_SETUP_COLUMNS: dict[str, str] = {
    "model": "TEXT",
    "max_model_calls": "INTEGER",
    "max_total_tokens": "INTEGER",
    "deadline_s": "REAL",
    "max_run_bytes": "INTEGER",
    "max_consecutive_no_gain": "INTEGER",
    "max_protocol_violations": "INTEGER",
}

# The runs whose rows are not in the text index yet (partial index idx_runs_fts_pending: as small as
# they are). Each store's text search indexes them when they finish; until then search reads them
# with LIKE.
PENDING_RUNS = "SELECT run_id FROM runs WHERE fts_pending IS NOT NULL"
# Clears a run's pending mark once its rows are indexed (or there is no index to fill).
MARK_INDEXED = "UPDATE runs SET fts_pending = NULL WHERE run_id = ? AND fts_pending IS NOT NULL"


class AuditStoreError(DiagnoseError):
    """The audit database cannot be opened or written; a run must not continue without its audit."""


def audit_timestamp(moment: datetime) -> str:
    """The one stored timestamp format (as agent.events.emitter writes it), so text order is time order."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


@dataclass(frozen=True)
class PruneReport:
    """What `prune` removed: runs finished before `cutoff`, and every row of theirs."""

    cutoff: str
    runs: int
    model_rounds: int
    invocations: int
    protocol_events: int
