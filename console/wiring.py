"""Wires one run together: settings, scenario, model, evidence boundary, the audit sink and, when
traces are on, the trace sink.

This is the only place (with the console) that imports `audit`, so the engine stays testable
without a file. The audit is a required sink: if it cannot be written, the run does not pretend. The
trace sink is an ordinary one: a trace problem never changes a run (docs/contracts.md, "Traces").
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent.blank_text import is_blank
from agent.contracts import ExecutionResult, PreviousTurn
from agent.events.run_events import EventSink
from agent.evidence import build_boundary
from agent.input_files import OversizedInput
from agent.model.factory import build_model
from agent.scenarios import Scenario
from agent.secrets import build_redactor
from agent.settings import Settings
from agent.use_case import DiagnosisUseCase
from audit import AuditSink, AuditStoreError
from audit.factory import open_audit_store
from audit.location import AuditLocation, local_files
from audit.port import AuditStore
from console.errors import SetupError
from console.run_config import resolve_run_config
from tools.adapter import ToolError
from tools.boundary import ToolBoundary
from tools.definitions import ToolName
from tools.redaction import Redactor

if TYPE_CHECKING:
    from haystack.hooks import Hook, HookPoint

    from console.traces.export import TraceExport
    from console.traces.sink import TraceSink

log = logging.getLogger(__name__)


class TracedUseCase(DiagnosisUseCase):
    """A use case whose runs are traced: a run that ends without `run_finished` (the audit failed, or
    the task was torn down) still ends its spans, as INTERRUPTED, before the error goes on."""

    def __init__(self, *args: Any, trace_sink: TraceSink, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.trace_sink = trace_sink

    async def execute(
        self,
        query: str | OversizedInput,
        previous_turn: PreviousTurn | dict[str, Any] | OversizedInput | None = None,
    ) -> ExecutionResult:
        try:
            return await super().execute(query, previous_turn)
        finally:
            self.trace_sink.end_unfinished()


@dataclass
class RunEnvironment:
    settings: Settings
    scenario: Scenario | None
    boundary: ToolBoundary
    audit: AuditStore
    redactor: Redactor
    audit_location: AuditLocation | None = None

    @property
    def audit_files(self) -> tuple[Path, ...]:
        """The audit's files on this machine, which no export, events file or report may replace."""
        return local_files(self.audit_location) if self.audit_location is not None else ()

    traces: TraceExport | None = None
    # Problems the operator should know about that do not stop a run (traces turned off).
    warnings: list[str] = field(default_factory=list)

    @property
    def model_label(self) -> str:
        return build_model(self.settings.model, self.scenario).label

    def replays_a_script_for(self, query: str, previous_turn: Any) -> bool:
        """Whether a run of this query would be answered by a scenario's script that never reads it:
        the scripted model, asked something other than its scenario's query and previous turn (the
        operator's own question, or a follow-up). The operator must be told, or the canned answer
        reads as an answer to their question."""
        scenario = self.scenario
        if self.settings.model.provider != "scripted" or scenario is None or is_blank(query):
            return False  # a blank query is rejected before any model call: nothing is replayed
        scripted_turn = scenario.previous_turn.model_dump(mode="json") if scenario.previous_turn else None
        return query != scenario.query or previous_turn != scripted_turn

    def use_case(
        self,
        sinks: list[EventSink] | None = None,
        session_id: str | None = None,
        extra_hooks: dict[HookPoint, list[Hook]] | None = None,
        run_id_factory: Callable[[], str] | None = None,
    ) -> DiagnosisUseCase:
        """A fresh use case per run: a scripted model replays its script from the first round."""
        model = build_model(self.settings.model, self.scenario)
        arguments: dict[str, Any] = {
            "model_label": model.label,
            "session_id": session_id,
            "sinks": list(sinks or []),
            "required_sinks": [AuditSink(self.audit)],
            "extra_hooks": extra_hooks,
            "redactor": self.redactor,
            **({"run_id_factory": run_id_factory} if run_id_factory else {}),
        }
        if self.traces is None:
            return DiagnosisUseCase(self.settings, model.generator, self.boundary, **arguments)
        trace_sink = self.traces.sink()
        arguments["sinks"].append(trace_sink)
        return TracedUseCase(
            self.settings, model.generator, self.boundary, trace_sink=trace_sink, **arguments
        )

    async def mysql_access(self) -> tuple[str, bool] | None:
        """One line saying which MySQL diagnostic views the configured account can read and which grant
        each missing one needs, and whether all are readable; None when MySQL is not configured. Logged."""
        from tools.mysql.adapter import MysqlAdapter

        adapter = self.boundary.adapter(ToolName.QUERY_MYSQL)
        if not isinstance(adapter, MysqlAdapter):
            return None
        try:
            access = await adapter.diagnostic_access()
        except ToolError as exc:
            line, complete = f"MySQL diagnostics: the server could not be asked ({exc.code})", False
        else:
            line, complete = access.summary(), not access.missing and access.performance_schema_on
        log.log(logging.INFO if complete else logging.WARNING, "%s", line)
        return line, complete

    def close_traces(self) -> None:
        """Send what the runs traced, bounded by `[telemetry.traces] flush_timeout_s` (docs/contracts.md,
        "Traces"); `diagnose run` calls it once its result is printed."""
        if self.traces is not None and not self.traces.close():
            log.warning("some spans did not reach the trace endpoint before the run environment closed")

    async def aclose(self, *, traces: bool = True) -> None:
        await self.boundary.aclose()
        self.audit.close()
        if traces:
            await asyncio.to_thread(self.close_traces)


def open_run_environment(
    config: Path | None = None,
    scenario: str | None = None,
    audit_db: str | Path | None = None,
    trace_endpoint: str | None = None,
) -> RunEnvironment:
    """Settings, scenario, evidence boundary and the open audit; a `DiagnoseError` for anything unusable.
    `audit_db` is `--audit-db`: a file path or a URL (console.audit_target)."""
    run = resolve_run_config(config, scenario, audit_db)
    settings, chosen = run.settings, run.scenario
    build_model(settings.model, chosen)  # fail early on a bad model configuration
    redactor = build_redactor(settings)
    boundary = build_boundary(settings, redactor)
    try:
        store = open_audit_store(
            run.audit, heartbeat_s=settings.audit.heartbeat_s, lease_s=settings.audit.lease_s
        )
    except AuditStoreError as exc:
        raise SetupError(f"audit unavailable: {exc}") from None
    env = RunEnvironment(settings, chosen, boundary, store, redactor, run.audit)
    if trace_endpoint is not None or settings.telemetry.traces.endpoint is not None:
        from console.traces import TracesUnavailable, open_trace_export

        try:
            env.traces = open_trace_export(settings.telemetry.traces, redactor, trace_endpoint)
        except TracesUnavailable as exc:
            env.warnings.append(f"traces are off: {exc}")
            log.warning("traces are off: %s", exc)
    return env
