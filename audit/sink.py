"""The audit sink: turns run events into audit rows (docs/contracts.md, "Run events", "Audit").

It reads the typed events of `agent.events.run_events` (light: no Haystack, no pydantic). A STARTED invocation
is committed before the emitter moves on (so it is durable before the tool runs), and so is the end of
a run; the other rows ride in the next such commit (see `AuditSink`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from agent.events.run_events import (
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
from agent.vocabulary import AUDITED_PROTOCOL_CODES, InvocationStatus, Outcome, ProtocolCode
from audit.common import RUN_SETUP_COLUMNS, AuditStoreError
from audit.liveness import own_start_marker
from audit.port import AuditStore

# Plain SQL, spelled once: the connection's statement cache then prepares each statement once per
# connection (sqlite-utils' insert/upsert read the table schema on every call).
# The run's setup columns (schema v4): its model label and limits; what was not recorded is NULL.
_SETUP_COLUMNS = tuple(RUN_SETUP_COLUMNS)
# A run starts pending for the text index (`AuditStore.text_search`): its finish indexes its rows
# in one batch.
_INSERT_RUN = (
    "INSERT INTO runs (run_id, session_id, query, started_at, pid, pid_start, fts_pending, "
    + ", ".join(_SETUP_COLUMNS)
    + ") VALUES (?, ?, ?, ?, ?, ?, 1"
    + ", ?" * len(_SETUP_COLUMNS)
    + ")"
)
# A rejected run had no run_started: its finish also records the (redacted, bounded) query and setup.
_REJECTED_RUN_SETUP = (
    "UPDATE runs SET query = ?, " + ", ".join(f"{c} = ?" for c in _SETUP_COLUMNS) + " WHERE run_id = ?"
)
_ROUND_STARTED = (
    "INSERT INTO model_rounds (run_id, round, started_at, seq) VALUES (?, ?, ?, ?)"
    " ON CONFLICT (run_id, round) DO UPDATE SET started_at = excluded.started_at, seq = excluded.seq"
)
# A round seen only by its finish is placed by the finish's seq; otherwise its start's seq stays.
_ROUND_FINISHED = (
    "INSERT INTO model_rounds (run_id, round, finished_at, prompt_tokens, completion_tokens,"
    " tool_call_ids, has_text, duration_ms, usage_estimated, seq)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
    " ON CONFLICT (run_id, round) DO UPDATE SET finished_at = excluded.finished_at,"
    " prompt_tokens = excluded.prompt_tokens, completion_tokens = excluded.completion_tokens,"
    " tool_call_ids = excluded.tool_call_ids, has_text = excluded.has_text,"
    " duration_ms = excluded.duration_ms, usage_estimated = excluded.usage_estimated"
)
_TOOL_STARTED = (
    "INSERT INTO invocations (run_id, tool_call_id, session_id, tool, round, status, input_json,"
    " input_key, started_at, seq) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_TOOL_FINISHED = (
    "UPDATE invocations SET status = ?, error_code = ?, reason = ?, projection_json = ?,"
    " finished_at = ?, duration_ms = ?"
    " WHERE run_id = ? AND tool_call_id = ? AND status = ?"
)
_EVALUATION = "UPDATE invocations SET evaluation = ? WHERE run_id = ? AND tool_call_id = ?"
_PROTOCOL_EVENT = (
    "INSERT INTO protocol_events (run_id, tool_call_id, code, detail_json, at, seq) VALUES (?, ?, ?, ?, ?, ?)"
)
# A run seen first at its finish (rejected input) is inserted pending too, and indexed in the same commit.
_RUN_FINISHED = (
    "INSERT INTO runs (run_id, session_id, outcome, stop_reason, finished_at, model_calls, prompt_tokens,"
    " completion_tokens, total_tokens, result_json, failure_json, fts_pending)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1)"
    " ON CONFLICT (run_id) DO UPDATE SET session_id = excluded.session_id, outcome = excluded.outcome,"
    " stop_reason = excluded.stop_reason, finished_at = excluded.finished_at,"
    " model_calls = excluded.model_calls, prompt_tokens = excluded.prompt_tokens,"
    " completion_tokens = excluded.completion_tokens, total_tokens = excluded.total_tokens,"
    " result_json = excluded.result_json, failure_json = excluded.failure_json"
)
# A finished run never leaves an invocation looking as if it were still executing.
_CLOSE_STARTED = "UPDATE invocations SET status = ?, finished_at = ? WHERE run_id = ? AND status = ?"


def _json(value: Any) -> str | None:
    """Stable text (sorted keys, readable non-ASCII) so equal inputs compare equal in SQL."""
    return None if value is None else json.dumps(value, ensure_ascii=False, sort_keys=True)


def _setup_values(
    model: str | None, limits: Mapping[str, Any] | None, protocol: Mapping[str, Any] | None
) -> tuple[Any, ...]:
    """The run's model label and limits in `_SETUP_COLUMNS` order; what was not recorded is NULL."""
    given = {"model": model, **(limits or {}), **(protocol or {})}
    return tuple(given.get(column) for column in _SETUP_COLUMNS)


class AuditSink:
    """A required run-event sink: a write failure raises `AuditStoreError` and so stops the run.

    Invocation rows are strict (a finish must match a STARTED row, and a finished row is never
    rewritten), because they prove what was executed. Run and model-round rows are upserted, so a run
    that finishes without ever starting (e.g. rejected input) or a round seen only by its finish is
    still recorded.

    Transactions: `run_started`, every `tool_started` and `run_finished` commit at once (a STARTED row
    is on disk before its tool runs; a finished run is durable, and its rows enter the text index in
    that same commit). Everything else is queued with `SqliteAuditStore.defer` and rides in the next of
    those commits, so a tool round costs one commit, not one per event. A crash loses at most the
    queued rows, which recovery reads as an interrupted run.
    """

    def __init__(self, store: AuditStore) -> None:
        self._store = store
        # Invocations this sink committed as STARTED and has not seen finish: their finish can be queued,
        # because the row it must match is known to exist. Any other finish is checked at once.
        self._open: set[tuple[str, str]] = set()
        # Runs whose start (and lease) this sink committed and whose finish it has not: every commit
        # that writes their rows renews the lease first, so a run recovery closed meanwhile stops.
        self._leased: set[str] = set()

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
                self._store.defer(
                    _ROUND_STARTED, (typed.run_id, typed.round, typed.at, typed.seq), run_id=typed.run_id
                )
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
        # pid and its start marker let recovery tell a crashed run from one still being written.
        setup = _setup_values(event.model, event.limits, event.protocol)
        run = (event.run_id, event.session_id, event.query, event.at)
        params = (*run, os.getpid(), own_start_marker(), *setup)
        with self._store.write() as db:
            db.conn.execute(_INSERT_RUN, params)
            self._store.hold_lease(event.run_id)
        self._leased.add(event.run_id)

    def _keep_lease(self, run_id: str) -> None:
        """Inside a commit that writes this run's rows: refuse it if the run's lease was lost."""
        if run_id in self._leased:
            self._store.keep_lease(run_id)

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
        self._store.defer(_ROUND_FINISHED, params, run_id=event.run_id)

    def _tool_started(self, event: ToolStarted) -> None:
        params = (
            event.run_id,
            event.tool_call_id,
            event.session_id,
            event.tool,
            event.round,
            InvocationStatus.STARTED,
            _json(event.input),
            event.input_key,
            event.at,
            event.seq,
        )
        with self._store.write() as db:  # the durable commit: the queued rows ride in it
            self._keep_lease(event.run_id)  # before the tool runs: a closed run runs nothing more
            db.conn.execute(_TOOL_STARTED, params)
        self._open.add((event.run_id, event.tool_call_id))

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
        unmatched = (
            f"tool_finished for {event.tool_call_id!r} of run {event.run_id!r} matches no STARTED invocation"
        )
        key = (event.run_id, event.tool_call_id)
        if key in self._open:
            self._open.discard(key)
            self._store.defer(_TOOL_FINISHED, params, must_match_one=unmatched, run_id=event.run_id)
            return
        with self._store.write() as db:
            self._keep_lease(event.run_id)
            if db.conn.execute(_TOOL_FINISHED, params).rowcount != 1:
                raise AuditStoreError(unmatched)

    def _protocol_changed(self, event: ProtocolChanged) -> None:
        detail = event.detail or {}
        if event.code == ProtocolCode.EVALUATION_RECORDED:
            try:
                params = (detail["evaluation"], event.run_id, detail["evaluated_tool_call_id"])
            except KeyError as exc:
                raise AuditStoreError(f"malformed {event.code} event: missing detail {exc}") from None
            self._store.defer(_EVALUATION, params, run_id=event.run_id)
            return
        if event.code not in AUDITED_PROTOCOL_CODES:
            return  # operator-only codes: nothing to write
        self._store.defer(
            _PROTOCOL_EVENT,
            (event.run_id, event.tool_call_id, event.code, _json(detail), event.at, event.seq),
            run_id=event.run_id,
        )

    def _run_finished(self, event: RunFinished) -> None:
        result: Mapping[str, Any] = event.result or {}
        usage: Mapping[str, Any] = result.get("usage") or {}
        params = (
            event.run_id,
            event.session_id,
            event.outcome,
            event.stop_reason,
            event.at,
            usage.get("model_calls"),
            usage.get("prompt_tokens"),
            usage.get("completion_tokens"),
            usage.get("total_tokens"),
            _json(result) if result else None,
            _json(result.get("failure")),
        )
        closed = (
            InvocationStatus.CANCELLED if event.outcome == Outcome.CANCELLED else InvocationStatus.INTERRUPTED
        )
        self._open = {key for key in self._open if key[0] != event.run_id}
        with self._store.write() as db:  # durable, with every row still queued for the run
            # A run recovery closed stays as recovery left it (interrupted, indexed): the finish is
            # refused, and the run ends with the audit error rather than a result the audit contradicts.
            self._keep_lease(event.run_id)
            db.conn.execute(_RUN_FINISHED, params)
            rejected = event.rejected_input
            if rejected is not None:  # no run_started carried these: the run was refused before it began
                setup = _setup_values(rejected.get("model"), rejected.get("limits"), rejected.get("protocol"))
                db.conn.execute(_REJECTED_RUN_SETUP, (rejected.get("query"), *setup, event.run_id))
            db.conn.execute(_CLOSE_STARTED, (closed, event.at, event.run_id, InvocationStatus.STARTED))
            # Last: the run's text can no longer change, so its rows enter the search index in one batch.
            self._store.text_search.index_runs(db.conn, [event.run_id])
            self._store.release_lease(event.run_id)
        self._leased.discard(event.run_id)
