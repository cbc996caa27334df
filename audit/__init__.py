"""Local SQLite audit of runs, model rounds, tool invocations and protocol events (DESIGN 3.9)."""

from audit.sink import AuditSink
from audit.store import AuditStore, AuditStoreError, default_audit_path

__all__ = ["AuditSink", "AuditStore", "AuditStoreError", "default_audit_path"]
