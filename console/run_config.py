"""What a run is set up from (its settings, scenario and audit location), resolved without the engine.

`diagnose run` and the console resolve these here, the one way (`console.wiring.open_run_environment`
starts with it), so a bad configuration or an unknown scenario is refused in the same words by both.
Nothing here imports Haystack, so the console refuses such a start before its first frame (exit 3)
rather than painting a console that looks ready and then failing in the background.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from console.errors import SetupError

if TYPE_CHECKING:
    from agent.scenarios import Scenario
    from agent.settings import Settings
    from audit.location import AuditLocation

CONFIG_VARIABLE_PREFIX = "DIAGNOSE_"  # DIAGNOSE_CONFIG and every DIAGNOSE_<SECTION>__<KEY> override


@dataclass(frozen=True)
class RunConfig:
    settings: Settings
    scenario: Scenario | None
    audit: AuditLocation


def resolve_run_config(
    config: Path | None = None, scenario: str | None = None, audit_db: str | Path | None = None
) -> RunConfig:
    """The settings (a scenario's own limits applied), the scenario and the audit's location; a
    `DiagnoseError` saying what is wrong, as `diagnose run` prints it."""
    from agent.model.factory import DEFAULT_SCENARIO, check_model_settings
    from agent.scenarios import resolve_scenario
    from agent.settings import load_settings
    from audit.location import AuditLocationError
    from console.audit_target import audit_location

    base = load_settings(config)
    wanted = scenario or base.model.scenario
    if wanted is None and base.model.provider == "scripted":
        wanted = DEFAULT_SCENARIO
    chosen = resolve_scenario(wanted) if wanted else None
    settings = load_settings(config, overrides=chosen.settings) if chosen and chosen.settings else base
    check_model_settings(settings.model)
    try:
        location = audit_location(settings, audit_db)
    except AuditLocationError as exc:
        raise SetupError(f"audit unavailable: {exc}") from None
    return RunConfig(settings, chosen, location)


def asks_for_more_than_defaults(config: Path | None, scenario: str | None) -> bool:
    """Whether anything but the embedded defaults was asked for. The defaults are valid by
    construction, so a bare `diagnose` checks nothing and its first frame loads no settings model."""
    return (
        config is not None
        or scenario is not None
        or any(name.upper().startswith(CONFIG_VARIABLE_PREFIX) for name in os.environ)
    )
