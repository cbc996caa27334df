"""Opening the audit store a location names: the embedded SQLite file or a team database on a server.

Each store is imported only when it is opened, so a console on the file never loads the server driver.
"""

from __future__ import annotations

from audit.location import AuditLocation, MysqlLocation
from audit.port import AuditStore


def open_audit_store(
    location: AuditLocation, *, heartbeat_s: float = 5.0, lease_s: float = 30.0
) -> AuditStore:
    """Open (creating or migrating the schema) the audit `location` names; `AuditStoreError` if unusable."""
    if isinstance(location, MysqlLocation):
        from audit.mysql.store import MysqlAuditStore

        return MysqlAuditStore(location, heartbeat_s=heartbeat_s, lease_s=lease_s)
    from audit.sqlite.store import SqliteAuditStore

    return SqliteAuditStore(location.path)
