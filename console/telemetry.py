"""Library telemetry is off unless the operator opts in with `[telemetry] enabled = true`.

An incident console reads production data and holds production credentials: nothing about its use
leaves the machine unless the operator asks for it. Haystack is the one dependency that phones home
(PostHog usage events, and a user id minted in `~/.haystack/config.yaml` on first import). It reads
`HAYSTACK_TELEMETRY_ENABLED` once, when it is first imported, so the switch is set when the `console`
package is imported, before anything can import Haystack, and every `diagnose` entry point (the
`diagnose` script, `python -m console`, the per-browser-session consoles of `diagnose serve`) passes
through it. Checked and found without telemetry of their own: openai, httpx, textual, textual-serve,
aiohttp, aiomysql, sqlglot, sqlite-utils, pydantic; posthog is only reached through Haystack. The
OpenTelemetry SDK (the optional `traces` extra) sends only to the endpoint `[telemetry.traces]` names,
and is not even imported without one (console.traces).

The opt-in is read from the configuration file and `DIAGNOSE_TELEMETRY__ENABLED` with `tomllib`,
not through the settings model, so deciding costs no pydantic import before the console's first frame.
"""

from __future__ import annotations

import os
from pathlib import Path

from agent.input_files import InputFileError, read_input_text

HAYSTACK_SWITCH = "HAYSTACK_TELEMETRY_ENABLED"
OPT_IN_ENV = "DIAGNOSE_TELEMETRY__ENABLED"
_CONFIG_ENV = "DIAGNOSE_CONFIG"
_TRUE = frozenset({"1", "true", "yes", "on"})


def switch_off() -> None:
    """Every library telemetry switch we know of, off."""
    os.environ[HAYSTACK_SWITCH] = "False"


def apply_opt_in(config_file: Path | None) -> bool:
    """Turn Haystack's telemetry back on only if the configuration opts in; returns the choice.

    Must run before Haystack is imported. An unreadable configuration counts as "no": the command that
    reads it properly reports the problem.
    """
    enabled = _opted_in(config_file)
    os.environ[HAYSTACK_SWITCH] = "True" if enabled else "False"
    return enabled


def _opted_in(config_file: Path | None) -> bool:
    env = os.environ.get(OPT_IN_ENV)
    if env is not None:
        return env.strip().lower() in _TRUE
    path = config_file or os.environ.get(_CONFIG_ENV) or None
    if path is None:
        return False
    import tomllib  # only with a configuration file: a bare `diagnose` reads none

    try:
        document = tomllib.loads(read_input_text(path, what="config file", limit=1024 * 1024))
    except (InputFileError, tomllib.TOMLDecodeError, RecursionError):
        return False
    section = document.get("telemetry")
    return isinstance(section, dict) and section.get("enabled") is True
