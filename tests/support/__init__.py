"""Shared test helpers: one package, so no test module imports another.

- `engine`: a real DiagnosisUseCase around the real Haystack Agent, driven by a scripted model
  (re-exported here: most engine tests need only `harness`);
- `audit_events`: run events written by hand for audit tests;
- `audit_data`: a large, realistic audit file (browse tests and the audit benchmark);
- `console`: the console pinned for determinism, and what it shows as text;
- `recorded`: real engine runs with pinned identity and clock (audit and snapshot fixtures);
- `expected`: what every built-in scenario ends in;
- `mysql`, `loki`, `openai_server`: the local MariaDB and local stand-ins for Loki and an
  OpenAI-compatible server;
- `resilience`: scenario and configuration files, CLI runs and MariaDB control for the resilience suite;
- `sql_corpus`: hostile and legitimate SQL for the read-only guard.
"""

from tests.support.engine import (
    Harnessed,
    RecordingAdapter,
    failing,
    harness,
    scenario_from,
    tool_messages_seen_by_model,
)

__all__ = [
    "Harnessed",
    "RecordingAdapter",
    "failing",
    "harness",
    "scenario_from",
    "tool_messages_seen_by_model",
]
