"""Fixtures of the resilience suite: a clean environment, the Loki stub, and MariaDB always left running."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.loki_server import loki_server_fixture  # noqa: F401 - the `loki` fixture
from tests.resilience.helpers import mariadb_ready, mariadb_running, start_mariadb


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """A developer's DIAGNOSE_* or OPENAI_API_KEY must not change what these tests exercise."""
    for name in list(os.environ):
        if name.startswith("DIAGNOSE_") and name != "DIAGNOSE_TEST_REQUIRE_MYSQL":
            monkeypatch.delenv(name)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


@pytest.fixture(scope="session", autouse=True)
def _mariadb_left_running() -> Iterator[None]:
    """Belt and braces around the tests that stop MariaDB: if it ran before the session, it runs after."""
    was_running = mariadb_running() and mariadb_ready()
    yield
    if was_running and not mariadb_ready():
        start_mariadb()
