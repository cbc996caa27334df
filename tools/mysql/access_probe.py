"""Which parts of the diagnostic surface the configured account can read, found out once at start.

A missing grant does not fail loudly where it matters: without PROCESS, information_schema.PROCESSLIST
quietly shows only the account's own sessions and INNODB_TRX refuses; with performance_schema off its
tables exist and are empty. During an incident that reads as "nothing is wrong". So the console asks
the server once, with one cheap statement per family (mostly `LIMIT 0`: privileges are checked, no
row is read), and says which families it can read and which grant each missing one needs
(docs/query-mysql.md, "The monitoring account").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pymysql.err import MySQLError

from tools.mysql.diagnostic_surface import Flavor
from tools.mysql.guard import BINARY_LOG_STATUS, REPLICA_STATUS, spelled_for


@dataclass(frozen=True)
class _Family:
    name: str
    statement: str
    needs: dict[Flavor, str]


_FAMILIES = (
    _Family(
        "other sessions and InnoDB transactions and locks",
        "SELECT COUNT(*) FROM information_schema.INNODB_TRX",  # LIMIT 0 skips the privilege check
        {Flavor.MARIADB: "PROCESS", Flavor.MYSQL: "PROCESS"},
    ),
    _Family(
        "performance_schema",
        "SELECT 1 FROM performance_schema.threads LIMIT 0",
        {flavor: "SELECT on performance_schema.*" for flavor in Flavor},
    ),
    _Family(
        "sys",
        "SELECT 1 FROM sys.innodb_lock_waits LIMIT 0",
        {flavor: "SELECT, EXECUTE on sys.* (with PROCESS)" for flavor in Flavor},
    ),
    _Family(
        "replication status",
        REPLICA_STATUS,
        {Flavor.MARIADB: "SLAVE MONITOR", Flavor.MYSQL: "REPLICATION CLIENT"},
    ),
    _Family(
        "binary log status",
        BINARY_LOG_STATUS,
        {Flavor.MARIADB: "BINLOG MONITOR", Flavor.MYSQL: "REPLICATION CLIENT"},
    ),
    _Family(
        "the slow query log",
        "SELECT 1 FROM mysql.slow_log LIMIT 0",
        {flavor: "SELECT on mysql.slow_log" for flavor in Flavor},
    ),
)


@dataclass(frozen=True)
class DiagnosticAccess:
    readable: tuple[str, ...]
    missing: tuple[tuple[str, str], ...]  # (family, the grant it needs)
    performance_schema_on: bool

    def summary(self) -> str:
        """One line for the operator, e.g. `MySQL diagnostics: can read ...; cannot read ... (needs ...)`."""
        parts = []
        if self.readable:
            parts.append("can read " + ", ".join(self.readable))
        if self.missing:
            parts.append(
                "cannot read " + ", ".join(f"{name} (needs {needs})" for name, needs in self.missing)
            )
        if "performance_schema" in self.readable and not self.performance_schema_on:
            parts.append("performance_schema is off on the server (its tables are empty)")
        return "MySQL diagnostics: " + "; ".join(parts)


async def probe_access(cursor: Any, server_version: str) -> DiagnosticAccess:
    """Run one statement per family on `cursor`; a denied privilege is a missing family, any other
    server error (a table this server lacks) too, named by the grant that usually opens it."""
    flavor = Flavor.of(server_version)
    readable: list[str] = []
    missing: list[tuple[str, str]] = []
    for family in _FAMILIES:
        try:
            await cursor.execute(spelled_for(family.statement, server_version))
            await cursor.fetchall()
        except MySQLError as exc:
            errno = exc.args[0] if exc.args and isinstance(exc.args[0], int) else None
            if errno is None or errno >= 2000:  # the connection itself failed: not a privilege
                raise
            missing.append((family.name, family.needs[flavor]))
            continue
        readable.append(family.name)
    await cursor.execute("SHOW GLOBAL VARIABLES LIKE 'performance_schema'")
    row = await cursor.fetchone()
    enabled = bool(row) and str(row[1]).upper() == "ON"
    return DiagnosticAccess(tuple(readable), tuple(missing), enabled)
