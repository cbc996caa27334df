"""Console fixtures: an app factory pinned for determinism, and real engine runs recorded once."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from console.app import DiagnoseApp
from tests.support.console import AUDIT_SCENARIOS, make_app


@pytest.fixture
def app_factory(tmp_path: Path) -> Callable[..., DiagnoseApp]:
    def factory(scenario: str | None = None, **overrides: Any) -> DiagnoseApp:
        return make_app(tmp_path, scenario, **overrides)

    return factory


@pytest.fixture(scope="session")
def recorded_runs() -> dict[str, list[dict[str, Any]]]:
    """Real engine event streams of a few scenarios, recorded once per test session (per worker)."""
    from tests.support.recorded import record

    return {name: record(name) for name in AUDIT_SCENARIOS}
