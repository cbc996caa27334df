"""The audit sink: turns run events into audit rows (docs/architecture.md, "Run events", "Audit").

It reads the typed events of `tools.run_events`, so `audit` never imports `agent`. Each event is written
in its own committed transaction before the emitter moves on, which is what makes a STARTED invocation
durable before the tool runs.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from audit.liveness import own_start_marker
from audit.store import AuditStore, AuditStoreError
from tools.run_events import (
    BudgetChanged,
    InvalidRunEvent,
    ModelRoundFinished,
    ModelRoundStarted,
    ProtocolChanged,
    RunEvent,
    RunEventBase,
    RunFinished,
    RunStarted,
    ToolFinished,
    ToolStarted,
    known_type,
    parse_event,
)
from tools.vocabulary import AUDITED_PROTOCOL_CODES, InvocationStatus, Outcome, ProtocolCode


def _insert(db: Any, table: str, row: Mapping[str, Any]) -> None:
    """Plain SQL on the hot path: sqlite-utils' insert reads the table schema on every call."""
    columns = ", ".join(row)
    db.execute(f"INSERT INTO {table} ({columns}) VALUES ({', '.join('?' * len(row))})", tuple(row.values()))


def _upsert(db: Any, table: str, row: Mapping[str, Any], pk: tuple[str, ...]) -> None:
    columns = ", ".join(row)
    updates = ", ".join(f"{c} = excluded.{c}" for c in row if c not in pk)
    db.execute(
        f"INSERT INTO {table} ({columns}) VALUES ({', '.join('?' * len(row))}) "
        f"ON CONFLICT ({', '.join(pk)}) DO UPDATE SET {updates}",
        tuple(row.values()),
    )


def _json(value: Any) -> str | None:
    """Stable text (sorted keys, readable non-ASCII) so equal inputs compare equal in SQL."""
    return None if value is None else json.dumps(value, ensure_ascii=False, sort_keys=True)


def _setup_columns(
    model: str | None, limits: Mapping[str, Any] | None, protocol: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The run's model label and limits as `runs` columns (schema v4); what was not recorded is NULL."""
    limits, protocol = limits or {}, protocol or {}
    return {
        "model": model,
        "max_model_calls": limits.get("max_model_calls"),
        "max_total_tokens": limits.get("max_total_tokens"),
        "deadline_s": limits.get("deadline_s"),
        "max_run_bytes": limits.get("max_run_bytes"),
        "max_consecutive_no_gain": protocol.get("max_consecutive_no_gain"),
        "max_protocol_violations": protocol.get("max_protocol_violations"),
    }


class AuditSink:
    """A required run-event sink: a write failure raises `AuditStoreError` and so stops the run.

    Invocation rows are strict (a finish must match a STARTED row, and a finished row is never
    rewritten), because they prove what was executed. Run and model-round rows are upserted, so a run
    that finishes without ever starting (e.g. rejected input) or a round seen only by its finish is
    still recorded.
    """

    def __init__(self, store: AuditStore) -> None:
        self._store = store

    def __call__(self, event: RunEvent | Mapping[str, Any]) -> None:
        """Record one event: a typed event from the emitter, or an event's JSON object (validated first)."""
        if not isinstance(event, RunEventBase) and known_type(event) is None:
            return  # a type this version does not know (a newer writer's): nothing to keep
        try:
            typed = parse_event(event)
        except InvalidRunEvent as exc:
            raise AuditStoreError(str(exc)) from None
        match typed:
            case RunStarted():
                self._run_started(typed)
            case ModelRoundStarted():
                self._model_round_started(typed)
            case ModelRoundFinished():
                self._model_round_finished(typed)
            case ToolStarted():
                self._tool_started(typed)
            case ToolFinished():
                self._tool_finished(typed)
            case ProtocolChanged():
                self._protocol_changed(typed)
            case RunFinished():
                self._run_finished(typed)
            case BudgetChanged():
                pass  # gauges are operator views; the run row keeps the final usage

    def _run_started(self, event: RunStarted) -> None:
        row = {
            "run_id": event.run_id,
            "session_id": event.session_id,
            "query": event.query,
            "started_at": event.at,
            # Lets recovery tell a crashed run from one still being written, even after pid reuse.
            "pid": os.getpid(),
            "pid_start": own_start_marker(),
            **_setup_columns(event.model, event.limits, event.protocol),
        }
        with self._store.write() as db:
            _insert(db, "runs", row)

    def _model_round_started(self, event: ModelRoundStarted) -> None:
        row = {"run_id": event.run_id, "round": event.round, "started_at": event.at, "seq": event.seq}
        with self._store.write() as db:
            _upsert(db, "model_rounds", row, pk=("run_id", "round"))

    def _model_round_finished(self, event: ModelRoundFinished) -> None:
        params = (
            event.run_id,
            event.round,
            event.at,
            event.prompt_tokens,
            event.completion_tokens,
            json.dumps(list(event.tool_call_ids), ensure_ascii=False),
            event.has_text,
            event.duration_ms,
            bool(event.usage_estimated),
            event.seq,
        )
        # A round seen only by its finish is placed by the finish's seq; otherwise its start's seq stays.
        with self._store.write() as db:
            db.execute(
                "INSERT INTO model_rounds (run_id, round, finished_at, prompt_tokens, completion_tokens,"
                " tool_call_ids, has_text, duration_ms, usage_estimated, seq)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (run_id, round) DO UPDATE SET finished_at = excluded.finished_at,"
                " prompt_tokens = excluded.prompt_tokens, completion_tokens = excluded.completion_tokens,"
                " tool_call_ids = excluded.tool_call_ids, has_text = excluded.has_text,"
                " duration_ms = excluded.duration_ms, usage_estimated = excluded.usage_estimated",
                params,
            )

    def _tool_started(self, event: ToolStarted) -> None:
        row = {
            "run_id": event.run_id,
            "tool_call_id": event.tool_call_id,
            "session_id": event.session_id,
            "tool": event.tool,
            "round": event.round,
            "status": InvocationStatus.STARTED,
            "input_json": _json(event.input),
            "input_key": event.input_key,
            "started_at": event.at,
            "seq": event.seq,
        }
        with self._store.write() as db:
            _insert(db, "invocations", row)

    def _tool_finished(self, event: ToolFinished) -> None:
        params = (
            event.status,
            event.error_code,
            event.reason,
            _json(event.projection),
            event.at,
            event.duration_ms,
            event.run_id,
            event.tool_call_id,
            InvocationStatus.STARTED,
        )
        with self._store.write() as db:
            cursor = db.execute(
                "UPDATE invocations SET status = ?, error_code = ?, reason = ?, projection_json = ?,"
                " finished_at = ?, duration_ms = ?"
                " WHERE run_id = ? AND tool_call_id = ? AND status = ?",
                params,
            )
            if cursor.rowcount != 1:
                raise AuditStoreError(
                    f"tool_finished for {event.tool_call_id!r} of run {event.run_id!r} "
                    "matches no STARTED invocation"
                )

    def _protocol_changed(self, event: ProtocolChanged) -> None:
        detail = event.detail or {}
        if event.code == ProtocolCode.EVALUATION_RECORDED:
            try:
                params = (detail["evaluation"], event.run_id, detail["evaluated_tool_call_id"])
            except KeyError as exc:
                raise AuditStoreError(f"malformed {event.code} event: missing detail {exc}") from None
            with self._store.write() as db:
                db.execute(
                    "UPDATE invocations SET evaluation = ? WHERE run_id = ? AND tool_call_id = ?", params
                )
            return
        if event.code not in AUDITED_PROTOCOL_CODES:
            return  # operator-only codes: no transaction at all
        row = {
            "run_id": event.run_id,
            "tool_call_id": event.tool_call_id,
            "code": event.code,
            "detail_json": _json(detail),
            "at": event.at,
            "seq": event.seq,
        }
        with self._store.write() as db:
            _insert(db, "protocol_events", row)

    def _run_finished(self, event: RunFinished) -> None:
        result: Mapping[str, Any] = event.result or {}
        usage: Mapping[str, Any] = result.get("usage") or {}
        row = {
            "run_id": event.run_id,
            "session_id": event.session_id,
            "outcome": event.outcome,
            "stop_reason": event.stop_reason,
            "finished_at": event.at,
            "model_calls": usage.get("model_calls"),
            "prompt_tokens": usage.get("prompt_tokens"),
            "completion_tokens": usage.get("completion_tokens"),
            "total_tokens": usage.get("total_tokens"),
            "result_json": _json(result) if result else None,
            "failure_json": _json(result.get("failure")),
        }
        rejected = event.rejected_input
        if rejected is not None:  # no run_started carried these: the run was refused before it began
            row["query"] = rejected.get("query")
            setup = _setup_columns(rejected.get("model"), rejected.get("limits"), rejected.get("protocol"))
            row.update(setup)
        # A finished run never leaves an invocation looking as if it were still executing.
        closed = (
            InvocationStatus.CANCELLED if event.outcome == Outcome.CANCELLED else InvocationStatus.INTERRUPTED
        )
        with self._store.write() as db:
            _upsert(db, "runs", row, pk=("run_id",))
            db.execute(
                "UPDATE invocations SET status = ?, finished_at = ? WHERE run_id = ? AND status = ?",
                (closed, event.at, event.run_id, InvocationStatus.STARTED),
            )
