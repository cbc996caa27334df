"""Local SQLite audit of runs, model rounds, tool invocations and protocol events.

The tables and what they promise: docs/architecture.md, "Audit".
"""

from audit.browse import AuditBrowser, InvocationFilter, Page, RunTimeline, TimelineEntry
from audit.sink import AuditSink
from audit.store import AuditStore, AuditStoreError, PruneReport, default_audit_path

__all__ = [
    "AuditBrowser",
    "AuditSink",
    "AuditStore",
    "AuditStoreError",
    "InvocationFilter",
    "Page",
    "PruneReport",
    "RunTimeline",
    "TimelineEntry",
    "default_audit_path",
]
