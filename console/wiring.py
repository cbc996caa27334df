"""Wires one run together: settings, scenario, model, evidence boundary and the audit sink.

This is the only place (with the console) that imports `audit`, so the engine stays testable
without a file. The audit is a required sink: if it cannot be written, the run does not pretend.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from agent.evidence import build_boundary
from agent.models import build_model
from agent.scenarios import Scenario, ScenarioError
from agent.secrets import build_redactor
from agent.settings import ConfigError, Settings
from agent.use_case import DiagnosisUseCase
from audit import AuditSink, AuditStoreError
from audit.backend import AuditBackend, open_audit_store
from audit.location import AuditLocation, local_files
from console.errors import SetupError
from console.run_config import resolve_run_config
from tools.boundary import ToolBoundary
from tools.redaction import Redactor
from tools.run_events import EventSink

if TYPE_CHECKING:
    from haystack.hooks import Hook, HookPoint


@dataclass
class RunEnvironment:
    settings: Settings
    scenario: Scenario | None
    boundary: ToolBoundary
    audit: AuditBackend
    redactor: Redactor
    audit_location: AuditLocation | None = None

    @property
    def audit_files(self) -> tuple[Path, ...]:
        """The audit's files on this machine, which no export, events file or report may replace."""
        return local_files(self.audit_location) if self.audit_location is not None else ()

    @property
    def model_label(self) -> str:
        return build_model(self.settings.model, self.scenario).label

    def use_case(
        self,
        sinks: list[EventSink] | None = None,
        session_id: str | None = None,
        extra_hooks: dict[HookPoint, list[Hook]] | None = None,
        run_id_factory: Callable[[], str] | None = None,
    ) -> DiagnosisUseCase:
        """A fresh use case per run: a scripted model replays its script from the first round."""
        try:
            model = build_model(self.settings.model, self.scenario)
        except (ConfigError, ScenarioError) as exc:
            raise SetupError(str(exc)) from None
        return DiagnosisUseCase(
            self.settings,
            model.generator,
            self.boundary,
            model_label=model.label,
            session_id=session_id,
            sinks=sinks,
            required_sinks=[AuditSink(self.audit)],
            extra_hooks=extra_hooks,
            redactor=self.redactor,
            **({"run_id_factory": run_id_factory} if run_id_factory else {}),
        )

    async def aclose(self) -> None:
        await self.boundary.aclose()
        self.audit.close()


def open_run_environment(
    config: Path | None = None, scenario: str | None = None, audit_db: str | Path | None = None
) -> RunEnvironment:
    """Settings, scenario, evidence boundary and the open audit; `SetupError` for anything unusable.
    `audit_db` is `--audit-db`: a file path or a URL (console.audit_target)."""
    run = resolve_run_config(config, scenario, audit_db)
    settings, chosen = run.settings, run.scenario
    try:
        build_model(settings.model, chosen)  # fail early on a bad model configuration
        redactor = build_redactor(settings)
        boundary = build_boundary(settings, redactor)
    except (ConfigError, ScenarioError) as exc:
        raise SetupError(str(exc)) from None
    try:
        store = open_audit_store(
            run.audit, heartbeat_s=settings.audit.heartbeat_s, lease_s=settings.audit.lease_s
        )
    except AuditStoreError as exc:
        raise SetupError(f"audit unavailable: {exc}") from None
    return RunEnvironment(settings, chosen, boundary, store, redactor, run.audit)
