"""Root fixtures: an isolated environment for every test, the local MariaDB, and the parallel layout.

Isolation: no test sees a developer's configuration, secrets or state, and none writes outside its
temporary folders. `DIAGNOSE_*` variables (except the suite's own `DIAGNOSE_TEST_*` switches) and
`OPENAI_API_KEY` are removed for the whole session; HOME and the XDG directories point into a folder of
the session's own from the start (what collection and session fixtures write lands there), and every
test gets its own inside its temporary directory, so a default audit file or log never reaches the
user's. Library telemetry is off before any test module can import Haystack: importing `console`
switches it off, as every `diagnose` entry point does (Haystack reads its switch once, on first
import, and would otherwise mint a user id in `~/.haystack/`).

Shutdown: pytest-xdist's transport sends a worker SIGINT when the worker has not finished 5 s after
the session ended (its last garbage collections can take that long on a busy machine); landing in
Hypothesis's garbage-collection callback, the KeyboardInterrupt was printed as an unraisable-exception
traceback after a green run. A finished worker ignores SIGINT (the transport still ends one that hangs).

MySQL: the local MariaDB (see tests/support/mysql.py); skipped when unreachable unless
DIAGNOSE_TEST_REQUIRE_MYSQL=1, as in CI.

Parallel runs (pytest-xdist, `--dist loadgroup`): every test that talks to MariaDB runs in one group
on one worker, because some inspect the server's process list and some stop and restart the server.

Hypothesis profiles: `default` (Hypothesis' own) for every run, and `long` for a fuzzing session,
`pytest --hypothesis-profile long`: the properties with a costly budget run the larger one they name
(tests/support/hypothesis_budget.py), the others 1,000 examples instead of 100. Health checks and
deadlines are the default run's job: a long session spends its time on examples.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

import console  # noqa: F401  (switches library telemetry off before any test imports Haystack)
from audit.factory import open_audit_store
from audit.location import SqliteLocation
from audit.sqlite.store import SqliteAuditStore
from tests.support.audit_backends import AuditTarget, mariadb_target, sqlite_target
from tests.support.hypothesis_budget import LONG
from tests.support.mysql import MysqlTestEnv, create_env, drop_env, require_server

_MARIADB_FIXTURES = frozenset({"mysql_server", "mysql_env", "mariadb_audit"})

settings.register_profile(LONG, max_examples=1_000, deadline=None, suppress_health_check=list(HealthCheck))


def _foreign(name: str) -> bool:
    """An environment variable that would change what the product under test does."""
    return (
        name.startswith("DIAGNOSE_") and not name.startswith("DIAGNOSE_TEST_")
    ) or name == "OPENAI_API_KEY"


_HOME_VARIABLES = ("HOME", "XDG_STATE_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME")
_session_home: Path | None = None


def _point_home_at(home: Path, state: Path) -> None:
    os.environ["HOME"] = str(home)
    os.environ["XDG_STATE_HOME"] = str(state)
    os.environ["XDG_CONFIG_HOME"] = str(home / ".config")
    os.environ["XDG_CACHE_HOME"] = str(home / ".cache")
    os.environ["XDG_DATA_HOME"] = str(home / ".local" / "share")


def pytest_configure(config: pytest.Config) -> None:
    # Session-wide, so session-scoped fixtures (recorded runs, MariaDB databases) are isolated too.
    global _session_home
    for name in [name for name in os.environ if _foreign(name)]:
        del os.environ[name]
    _session_home = Path(tempfile.mkdtemp(prefix="diagnose-tests-home-"))
    (_session_home / "home").mkdir()
    _point_home_at(_session_home / "home", _session_home / "state")


def pytest_unconfigure(config: pytest.Config) -> None:
    if _session_home is not None:
        shutil.rmtree(_session_home, ignore_errors=True)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """An xdist worker whose tests are done ignores SIGINT (see the module's docstring)."""
    if hasattr(session.config, "workerinput"):
        signal.signal(signal.SIGINT, signal.SIG_IGN)


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
    for variable in _HOME_VARIABLES:
        monkeypatch.setenv(variable, os.environ[variable])  # restored after the test
    _point_home_at(home, tmp_path / "state")


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
def audit_store(tmp_path: Path) -> Iterator[SqliteAuditStore]:
    """The test's own audit file, `tmp_path / "audit.db"`, opened through the factory as a run opens
    it; closed after the test. Its rows: `tests.support.audit_reader.AuditReader`."""
    store = open_audit_store(SqliteLocation(tmp_path / "audit.db"))
    assert isinstance(store, SqliteAuditStore)
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
