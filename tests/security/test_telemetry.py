"""Hole 8: no library phones home unless the operator opts in.

Haystack's telemetry mints a user id in `~/.haystack/config.yaml` on first import and sends usage events
to PostHog; `diagnose` switches it off before Haystack is imported, in the `console` package every entry
point passes through. `[telemetry] enabled = true` (or `DIAGNOSE_TELEMETRY__ENABLED=true`) opts in.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.resilience import REPO

# Runs a scenario through the real entry point, then reports whether Haystack built its telemetry
# client and whether PostHog was ever asked to send anything.
PROBE = """
import sys
import posthog
captured = []
posthog.capture = lambda *a, **k: captured.append(a)
from console.commands.main import main
code = main(sys.argv[1:])
import haystack.telemetry._telemetry as telemetry
print("TELEMETRY", telemetry.telemetry is not None, len(captured), code)
"""


def clean_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DIAGNOSE_", "HAYSTACK_"))}
    env.update(HOME=str(home), XDG_STATE_HOME=str(home / "state"), PYTHONPATH=str(REPO))
    return env


def test_a_run_never_reaches_the_telemetry_code_nor_writes_a_user_id(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            PROBE,
            "run",
            "--scenario",
            "evidence-backed-diagnosis",
            "--json",
            "--audit-db",
            str(tmp_path / "audit.db"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env=clean_env(tmp_path),
    )
    assert done.returncode == 0, done.stderr
    assert "TELEMETRY False 0 0" in done.stdout
    assert not (tmp_path / ".haystack").exists()


def test_the_console_entry_point_switches_it_off_before_haystack_loads() -> None:
    done = subprocess.run(
        [sys.executable, "-c", "import console, os; print(os.environ['HAYSTACK_TELEMETRY_ENABLED'])"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        env={**clean_env(Path("/nonexistent")), "HAYSTACK_TELEMETRY_ENABLED": "True"},
    )
    assert done.stdout.strip() == "False"


@pytest.mark.parametrize(
    ("config", "env", "enabled"),
    [
        ("", {}, False),
        ("[telemetry]\nenabled = true\n", {}, True),
        ("[telemetry]\nenabled = false\n", {}, False),
        ("", {"DIAGNOSE_TELEMETRY__ENABLED": "true"}, True),
        ("[telemetry]\nenabled = true\n", {"DIAGNOSE_TELEMETRY__ENABLED": "false"}, False),
    ],
)
def test_the_operator_can_opt_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, config: str, env: dict[str, str], enabled: bool
) -> None:
    from agent.settings import load_settings
    from console.telemetry import HAYSTACK_SWITCH, apply_opt_in

    path = tmp_path / "diagnose.toml"
    path.write_text(config)
    monkeypatch.delenv("DIAGNOSE_TELEMETRY__ENABLED", raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv(HAYSTACK_SWITCH, "unset")
    assert apply_opt_in(path) is enabled
    assert os.environ[HAYSTACK_SWITCH] == ("True" if enabled else "False")
    assert load_settings(path).telemetry.enabled is enabled  # the documented key, validated as usual


def test_the_test_suite_itself_never_starts_library_telemetry() -> None:
    """Test modules import the engine without `diagnose`'s entry points; the suite switches telemetry
    off before any of them imports Haystack (tests/conftest.py), so no run of the tests mints a user id
    in the runner's home folder."""
    import haystack.telemetry._telemetry as telemetry

    assert telemetry.telemetry is None
    assert not (Path.home() / ".haystack").exists()
