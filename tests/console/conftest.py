"""Console test fixtures: an app pinned for determinism (ids, clock, timings, cursor) on a private audit.

Nothing here touches the user's audit or config: every test gets its own audit file, and the config
env vars that could leak a developer's settings are removed.
"""

from __future__ import annotations

import asyncio
import io
import itertools
import os
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import pytest
from rich.console import Console
from textual.pilot import Pilot

from console.app import DiagnoseApp

SIZE = (120, 40)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "browser: drives `diagnose serve` in headless Chromium (/usr/bin/chromium)"
    )


FIXED_NOW = datetime(2026, 11, 30, 3, 0, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in list(os.environ):
        if name.startswith("DIAGNOSE_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    yield


def pinned_ids(prefix: str = "run") -> Callable[[], str]:
    counter = itertools.count(1)
    return lambda: f"{prefix}-{next(counter):04d}"


def make_app(tmp_path: Path, scenario: str | None = None, **overrides: Any) -> DiagnoseApp:
    """The console as snapshots and pilots need it: every source of variation pinned."""
    options: dict[str, Any] = {
        "audit_db": tmp_path / "audit.db",
        "session_id": "session-test",
        "run_id_factory": pinned_ids(),
        "clock": lambda: FIXED_NOW,
        "show_timings": False,
        "cursor_blink": False,
        "export_dir": tmp_path,
    }
    options.update(overrides)
    return DiagnoseApp(scenario=scenario, **options)


@pytest.fixture
def app_factory(tmp_path: Path) -> Callable[..., DiagnoseApp]:
    def factory(scenario: str | None = None, **overrides: Any) -> DiagnoseApp:
        return make_app(tmp_path, scenario, **overrides)

    return factory


async def engine_ready(pilot: Pilot[Any]) -> None:
    """Wait until the environment is open (the engine loads in a worker after the first frame)."""
    await settled(pilot)
    status = cast(DiagnoseApp, pilot.app).engine_status
    assert status.state == "ready", status


async def settled(pilot: Pilot[Any], timeout_s: float = 30.0) -> None:
    """Wait for the engine (re)load to end, whatever its result (it starts after the first refresh)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    await pilot.pause()
    while cast(DiagnoseApp, pilot.app).engine_status.state == "loading" and loop.time() < deadline:
        await pilot.pause(0.02)
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


async def run_to_end(pilot: Pilot[Any], *keys: str) -> None:
    """Press ctrl+r (after optional keys) and wait until the run's worker and its last batch are done."""
    await engine_ready(pilot)
    for key in keys:
        await pilot.press(key)
    await pilot.press("ctrl+r")
    await pilot.pause()
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


def plain(renderable: Any, width: int = 110) -> str:
    """What a renderable shows, as plain text (for asserting on widget content)."""
    console = Console(width=width, file=io.StringIO(), record=True, color_system=None)
    console.print(renderable)
    return console.export_text()


def timeline_labels(app: DiagnoseApp) -> list[str]:
    """Every timeline row's text, depth-first, as the operator reads it."""
    tree = app.investigate.run_view.timeline
    labels: list[str] = []

    def walk(node: Any) -> None:
        for child in node.children:
            labels.append(" ".join(str(child.label.plain).split()))
            walk(child)

    walk(tree.root)
    return labels


def has_row(labels: list[str], *parts: str) -> bool:
    return any(all(part in label for part in parts) for label in labels)


AUDIT_SCENARIOS = (
    "evidence-backed-diagnosis",
    "model-call-budget-exhausted",
    "oversized-query-rejected",
    "stop-required-ignored",
    "tool-error-no-retry",
)


@pytest.fixture(scope="session")
def recorded_runs() -> dict[str, list[dict[str, Any]]]:
    """Real engine event streams of a few scenarios, recorded once per test session."""
    from tests.console.recorded import record

    return {name: record(name) for name in AUDIT_SCENARIOS}
