"""The audit of runs, model rounds, tool invocations and protocol events: one store interface
(`audit.port.AuditStore`) and two stores behind it, a SQLite file (`audit.sqlite`) and a MariaDB/MySQL
database (`audit.mysql`), opened by `audit.factory`.

The tables and what they promise: docs/contracts.md, "Audit".

The public names load on first use: `audit.files` (owner-only files, used by every `diagnose` start for
its log) must not pull in sqlite-utils and the browse queries before the console's first frame.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from audit.browse import AuditBrowser, InvocationFilter, Page, RunTimeline, TimelineEntry
    from audit.common import AuditStoreError, PruneReport
    from audit.location import default_audit_path
    from audit.port import AuditStore
    from audit.sink import AuditSink
    from audit.sqlite.store import SqliteAuditStore

_HOMES = {
    "AuditBrowser": "audit.browse",
    "InvocationFilter": "audit.browse",
    "Page": "audit.browse",
    "RunTimeline": "audit.browse",
    "TimelineEntry": "audit.browse",
    "AuditSink": "audit.sink",
    "AuditStore": "audit.port",
    "SqliteAuditStore": "audit.sqlite.store",
    "AuditStoreError": "audit.common",
    "PruneReport": "audit.common",
    "default_audit_path": "audit.location",
}

__all__ = [
    "AuditBrowser",
    "AuditSink",
    "AuditStore",
    "AuditStoreError",
    "InvocationFilter",
    "Page",
    "PruneReport",
    "RunTimeline",
    "SqliteAuditStore",
    "TimelineEntry",
    "default_audit_path",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'audit' has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)
