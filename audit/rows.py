"""The audit's rows as read: one TypedDict per table, its keys the table's columns in their order.

`AuditBrowser` (`audit.browse`) returns these, so a reader that misspells a column (`row["run_ID"]`,
`row.get("stop_resaon")`) fails the type check instead of reading None. They stay plain dicts at run
time: the JSON output, the export and the screens see exactly the rows the store returned.

Types are the schema's (docs/contracts.md, "Audit"; both stores keep the same columns). A file is
open to whoever can write it, so a stored value may not be what its column promises: readers that
show or replay a value keep checking it (`audit.replay.stored_number`, `console.safe_text`).
Words (outcome, stop reason, status, codes) are `str`: a word a newer version wrote is kept as it is.
"""

from __future__ import annotations

from typing import TypedDict


class RunRow(TypedDict):
    """A row of `runs`: one run, from its start (or, for rejected input, its finish) to its end."""

    run_id: str
    session_id: str
    query: str | None
    outcome: str | None  # an Outcome; NULL while running and for runs closed by recovery
    stop_reason: str | None
    started_at: str | None  # NULL for a run recorded only by its finish
    finished_at: str | None
    model_calls: int | None
    prompt_tokens: int | None
    completion_tokens: int | None
    total_tokens: int | None
    result_json: str | None
    failure_json: str | None
    pid: int | None
    pid_start: str | None  # v2: the writer's process start marker (audit.liveness)
    interrupted: int  # v2: 1 when crash recovery closed the run
    model: str | None  # v4: the run's setup (audit.common.RUN_SETUP_COLUMNS); NULL when not recorded
    max_model_calls: int | None
    max_total_tokens: int | None
    deadline_s: float | None
    max_run_bytes: int | None
    max_consecutive_no_gain: int | None
    max_protocol_violations: int | None
    fts_pending: int | None  # v5: not NULL while the run's rows are not in the text index


class ModelRoundRow(TypedDict):
    """A row of `model_rounds`: one model round of a run."""

    run_id: str
    round: int
    started_at: str | None
    finished_at: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    tool_call_ids: str | None  # a JSON list of the tool call IDs the round asked for
    has_text: int | None
    duration_ms: int | None
    seq: int | None  # v2: the event's seq; NULL for rows written before it was kept
    usage_estimated: int  # v3: 1 when the round's usage was estimated, not reported


class InvocationRow(TypedDict):
    """A row of `invocations`: one tool call that ran (or was started)."""

    run_id: str
    tool_call_id: str
    session_id: str
    tool: str
    round: int | None
    status: str  # an InvocationStatus
    error_code: str | None
    reason: str | None
    input_json: str | None
    projection_json: str | None
    evaluation: str | None
    started_at: str
    finished_at: str | None
    duration_ms: int | None
    seq: int | None  # v2
    input_key: str | None  # v3: the canonical business input (tools.canonical)


class ProtocolEventRow(TypedDict):
    """A row of `protocol_events`: one progress-protocol event the audit keeps."""

    id: int
    run_id: str
    tool_call_id: str | None
    code: str  # a ProtocolCode
    detail_json: str | None
    at: str
    seq: int | None  # v2


# Each table's row type, by table name.
ROW_TYPES: dict[str, type] = {
    "runs": RunRow,
    "model_rounds": ModelRoundRow,
    "invocations": InvocationRow,
    "protocol_events": ProtocolEventRow,
}
