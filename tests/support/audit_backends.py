"""The two audit stores for tests that prove behaviour both must have: the SQLite file and MariaDB.

`AuditTarget.open()` opens a store on the test's own audit: a file in the test's temporary folder,
or a freshly created MariaDB database with a unique name (`dc_audit_<hex>`), dropped at teardown, so
tests running at the same time on the shared server never see each other's rows.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from audit.factory import open_audit_store
from audit.location import AuditLocation, MysqlLocation, SqliteLocation
from audit.port import AuditStore
from audit.sqlite.store import SqliteAuditStore
from tests.support.mysql import MYSQL_HOST, MYSQL_PORT, ROOT_USER, root_connection


@dataclass(frozen=True)
class AuditTarget:
    backend: str  # "sqlite" or "mariadb"
    location: AuditLocation

    @property
    def url(self) -> str:
        if isinstance(self.location, MysqlLocation):
            return self.location.describe()
        return f"sqlite:///{self.location.path}"

    def open(self, **options: Any) -> AuditStore:
        """A new store on this audit, opened through the factory as a run opens it; `options` (retry
        deadline, timeouts, lease timings) tune the server store, which then opens directly."""
        if options:
            from audit.mysql.store import MysqlAuditStore

            assert isinstance(self.location, MysqlLocation), "only the server store takes options"
            return MysqlAuditStore(self.location, **options)
        return open_audit_store(self.location)


def open_sqlite_audit(path: Path) -> SqliteAuditStore:
    """The audit file at `path`, opened through the factory as a run opens it; typed as the SQLite
    store, for what only it answers (`query`, `has_fts`, `recover` on a file)."""
    store = open_audit_store(SqliteLocation(path))
    assert isinstance(store, SqliteAuditStore)
    return store


def sqlite_target(folder: Path) -> AuditTarget:
    return AuditTarget("sqlite", SqliteLocation(folder / "audit.db"))


@contextmanager
def mariadb_target() -> Iterator[AuditTarget]:
    """A fresh, empty audit database for the root account; dropped afterwards."""
    name = f"dc_audit_{secrets.token_hex(6)}"
    with root_connection() as conn, conn.cursor() as cursor:
        cursor.execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
    try:
        yield AuditTarget("mariadb", MysqlLocation(MYSQL_HOST, MYSQL_PORT, ROOT_USER, name))
    finally:
        with root_connection() as conn, conn.cursor() as cursor:
            cursor.execute(f"DROP DATABASE IF EXISTS `{name}`")


# What docs/audit.md's "Grants" leaves an audit account once the schema is in place and the DDL grants are
# revoked ("a fixed schema"): it writes runs, browses and prunes, but creates and alters nothing.
# EVENT lets the check at open see events in the database (else it says they could not be checked).
FIXED_SCHEMA_GRANTS = "SELECT, INSERT, UPDATE, DELETE, EVENT"


@contextmanager
def audit_account(target: AuditTarget, password: str, grants: str = FIXED_SCHEMA_GRANTS) -> Iterator[str]:
    """A MariaDB account of its own on `target`'s database, with `grants` only; dropped afterwards.
    Its name is unique (derived from the database's), so concurrent tests never share one."""
    assert isinstance(target.location, MysqlLocation)
    database = target.location.database
    user = f"{database[:24]}_a"
    with root_connection() as conn, conn.cursor() as cursor:
        cursor.execute("CREATE USER %s@'%%' IDENTIFIED BY %s", (user, password))
        cursor.execute(f"GRANT {grants} ON `{database}`.* TO %s@'%%'", (user,))
    try:
        yield user
    finally:
        with root_connection() as conn, conn.cursor() as cursor:
            cursor.execute("DROP USER IF EXISTS %s@'%%'", (user,))
