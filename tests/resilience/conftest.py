"""Fixtures of the resilience suite: the Loki stub, and MariaDB left running by the tests that stop it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.loki import loki_server_fixture  # noqa: F401 - the `loki` fixture
from tests.support.resilience import mariadb_ready, mariadb_running, start_mariadb


@pytest.fixture(scope="session")
def mariadb_left_running() -> Iterator[None]:
    """Belt and braces around the tests that stop MariaDB: if it ran before the session, it runs after.

    Only those tests ask for it, so only the worker that runs them (the "mariadb" group) restarts it."""
    was_running = mariadb_running() and mariadb_ready()
    yield
    if was_running and not mariadb_ready():
        start_mariadb()
