"""Root fixtures: an isolated environment for every test, the local MariaDB, and the parallel layout.

Isolation: no test sees a developer's configuration, secrets or state. `DIAGNOSE_*` variables (except
the suite's own `DIAGNOSE_TEST_*` switches) and `OPENAI_API_KEY` are removed for the whole session,
and every test gets its own HOME and XDG directories, so a default audit file or log lands in the
test's temporary directory and never in the user's.

MySQL: the local MariaDB (see tests/support/mysql.py); skipped when unreachable unless
DIAGNOSE_TEST_REQUIRE_MYSQL=1, as in CI.

Parallel runs (pytest-xdist, `--dist loadgroup`): every test that talks to MariaDB runs in one group
on one worker, because some inspect the server's process list and some stop and restart the server.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from audit.factory import open_audit_store
from audit.location import SqliteLocation
from audit.sqlite_store import AuditStore
from tests.support.audit_backends import AuditTarget, mariadb_target, sqlite_target
from tests.support.mysql import MysqlTestEnv, create_env, drop_env, require_server

_MARIADB_FIXTURES = frozenset({"mysql_server", "mysql_env", "mariadb_audit"})


def _foreign(name: str) -> bool:
    """An environment variable that would change what the product under test does."""
    return (
        name.startswith("DIAGNOSE_") and not name.startswith("DIAGNOSE_TEST_")
    ) or name == "OPENAI_API_KEY"


def pytest_configure(config: pytest.Config) -> None:
    # Session-wide, so session-scoped fixtures (recorded runs, MariaDB databases) are isolated too.
    for name in [name for name in os.environ if _foreign(name)]:
        del os.environ[name]


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which turns the group marks into node IDs
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test that touches MariaDB runs on one worker: some of them stop and restart the server."""
    for item in items:
        if item.get_closest_marker("mysql") or _MARIADB_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.xdist_group("mariadb"))


@pytest.fixture(autouse=True)
def isolated_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """HOME and the XDG directories inside the test's own temporary directory."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for variable, folder in (
        ("XDG_STATE_HOME", tmp_path / "state"),
        ("XDG_CONFIG_HOME", home / ".config"),
        ("XDG_CACHE_HOME", home / ".cache"),
        ("XDG_DATA_HOME", home / ".local" / "share"),
    ):
        monkeypatch.setenv(variable, str(folder))


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


@pytest.fixture
def audit_store(tmp_path: Path) -> Iterator[AuditStore]:
    """The test's own audit file, `tmp_path / "audit.db"`, opened through the factory as a run opens
    it; closed after the test. Its rows: `tests.support.audit_reader.AuditReader`."""
    store = open_audit_store(SqliteLocation(tmp_path / "audit.db"))
    assert isinstance(store, AuditStore)
    try:
        yield store
    finally:
        store.close()


@pytest.fixture(params=["sqlite", pytest.param("mariadb", marks=pytest.mark.mysql)])
def audit_target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[AuditTarget]:
    """The test's own audit on each store: a file, then a fresh MariaDB database (see
    tests/support/audit_backends.py). The MariaDB side skips without a server, unless required."""
    if request.param == "sqlite":
        yield sqlite_target(tmp_path)
        return
    require_server()
    with mariadb_target() as target:
        yield target


@pytest.fixture
def mariadb_audit(mysql_server: str) -> Iterator[AuditTarget]:
    """A fresh MariaDB audit database, for tests of what only the server store does."""
    with mariadb_target() as target:
        yield target
