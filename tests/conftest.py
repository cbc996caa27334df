"""Shared fixtures. MySQL: the local MariaDB (see tests/mysql_support.py); skipped when unreachable
unless DIAGNOSE_TEST_REQUIRE_MYSQL=1, as in CI."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.mysql_support import MysqlTestEnv, create_env, drop_env, require_server


@pytest.fixture(scope="session")
def mysql_server() -> str:
    """The server version; skips (or fails, when required) once for the whole session."""
    return require_server()


@pytest.fixture(scope="module")
def mysql_env(mysql_server: str) -> Iterator[MysqlTestEnv]:
    """Two throwaway databases per module (`<prefix>_shop` with the demo data, `<prefix>_ops`)."""
    env = create_env()
    try:
        yield env
    finally:
        drop_env(env)
