"""Which audit a command opens: `--audit-db`, else `[audit] url`, else `[audit] path`, else the file in
the user state folder (docs/contracts.md, "Configuration"). `diagnose run`, the console and every
`diagnose audit` command resolve it here, so they always agree.
"""

from __future__ import annotations

from pathlib import Path

from agent.settings import Settings
from audit.location import (
    AuditLocation,
    EvidenceAccount,
    SqliteLocation,
    check_separate_from_evidence,
    default_audit_path,
    parse_audit_argument,
    parse_audit_url,
)


def audit_location(settings: Settings, audit_db: str | Path | None = None) -> AuditLocation:
    """The audit to open; `AuditLocationError` for a URL that is malformed or names the evidence account.

    `--audit-db` is a file path or a URL, taken exactly as `[audit] url` is (the password from
    `[audit] password_env`, a password inside the URL refused without repeating it)."""
    audit = settings.audit
    if audit_db is not None:
        location = parse_audit_argument(str(audit_db), password_env=audit.password_env, what="--audit-db")
    elif audit.url is not None:
        location = parse_audit_url(audit.url, password_env=audit.password_env)
    elif audit.path is not None:
        location = SqliteLocation(Path(audit.path))
    else:
        location = SqliteLocation(default_audit_path())
    mysql = settings.mysql
    evidence = EvidenceAccount(mysql.dsn, mysql.password_env, tuple(mysql.allowed_schemas))
    check_separate_from_evidence(location, evidence)
    return location
