"""Where the audit lives: an `[audit] url` parsed into the embedded SQLite file or a MariaDB/MySQL server.

`sqlite:///relative/path` and `sqlite:////absolute/path` (three slashes, then the path) name a file;
`mysql://user@host:port/database` (or `mariadb://`) names a server database, whose password is only
ever read from the environment variable named by `[audit] password_env`. A password written into the
URL is refused: configuration files are shared and logged, environment variables are not. Messages
never repeat the URL. Standard library (and platformdirs) only, so resolving where the audit lives stays
cheap.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

import platformdirs

from agent.errors import DiagnoseError

SQLITE_PREFIX = "sqlite:///"
MYSQL_SCHEMES = ("mysql", "mariadb")
DEFAULT_MYSQL_PORT = 3306
# A database name reaches SQL inside backticks and GET_LOCK names: plain identifiers only.
_DATABASE_NAME = re.compile(r"[A-Za-z0-9_$]{1,64}")
_MYSQL_SHAPE = "must look like mysql://user@host:3306/database"


def default_audit_path() -> Path:
    """Where the audit lives when neither `[audit] path` nor `--audit-db` says otherwise."""
    return platformdirs.user_state_path("diagnosis-console") / "audit.db"


class AuditLocationError(DiagnoseError, ValueError):
    """An `[audit] url` that names no usable audit; the message says why without repeating the URL."""


@dataclass(frozen=True)
class SqliteLocation:
    """The embedded audit: one SQLite file."""

    path: Path

    def describe(self) -> str:
        return str(self.path)


@dataclass(frozen=True)
class MysqlLocation:
    """A team audit on a MariaDB/MySQL server: its own account and database, never the evidence one."""

    host: str
    port: int
    user: str
    database: str
    password_env: str | None = None

    def describe(self) -> str:
        """What the operator sees (status line, messages): the URL without any secret."""
        return f"mysql://{self.user}@{self.host}:{self.port}/{self.database}"

    def same_account(self, host: str, port: int, user: str) -> bool:
        return (self.host.lower(), self.port, self.user) == (host.lower(), port, user)


AuditLocation = SqliteLocation | MysqlLocation

# The files SQLite keeps beside the audit file while it is open.
SIDE_FILE_SUFFIXES = ("-wal", "-shm", "-journal")


def local_files(location: AuditLocation) -> tuple[Path, ...]:
    """The files on this machine that hold the audit: what no export or report may ever replace."""
    if isinstance(location, MysqlLocation):
        return ()
    path = location.path
    return (path, *(Path(f"{path}{suffix}") for suffix in SIDE_FILE_SUFFIXES))


def parse_audit_url(
    url: str,
    *,
    password_env: str | None = None,
    what: str = "[audit] url",
    password_hint: str = "password_env",  # noqa: S107 - names the setting, holds no password
) -> AuditLocation:
    """`sqlite:///path` or `mysql://user@host:port/database`; anything else is an `AuditLocationError`.

    `what` names where the URL came from in messages (`--audit-db`, `--from`), `password_hint` where its
    password belongs instead."""
    text = url.strip()
    if text.startswith(SQLITE_PREFIX):
        path = text[len(SQLITE_PREFIX) :]
        if not path or path.endswith("/"):
            raise AuditLocationError(f"{what} sqlite:///PATH must name a file")
        return SqliteLocation(Path(path))
    return _parse_mysql(text, password_env, what, password_hint)


def _parse_mysql(text: str, password_env: str | None, what: str, password_hint: str) -> MysqlLocation:
    try:
        parts = urlsplit(text)
        port = parts.port or DEFAULT_MYSQL_PORT
    except ValueError:
        raise AuditLocationError(f"{what} {_MYSQL_SHAPE}") from None
    if parts.scheme not in MYSQL_SCHEMES:
        raise AuditLocationError(f"{what} must start with sqlite:/// or mysql://")
    if not parts.hostname or not parts.username:
        raise AuditLocationError(f"{what} {_MYSQL_SHAPE}")
    if parts.password is not None:
        raise AuditLocationError(f"{what} must not carry a password (name its variable in {password_hint})")
    if parts.query or parts.fragment:
        raise AuditLocationError(f"{what} must not carry query parameters or a fragment")
    database = unquote(parts.path.lstrip("/"))
    if not _DATABASE_NAME.fullmatch(database):
        raise AuditLocationError(f"{what} must name its database as a plain identifier")
    return MysqlLocation(parts.hostname, port, unquote(parts.username), database, password_env)


# What an operator writes when they mean a URL: a scheme and a colon (`mysql://`, `sqlite:/`, a one-slash
# typo, or `mysql:` alone). As a file path it would create `./mysql:/...`, and put the URL's password
# into messages that name the path.
_URL_SHAPED = re.compile(r"(?:[A-Za-z][A-Za-z0-9+.-]*:/|(?:sqlite|mysql|mariadb):)", re.IGNORECASE)


def parse_audit_argument(
    value: str,
    *,
    password_env: str | None = None,
    what: str,
    password_hint: str = "[audit] password_env",  # noqa: S107 - names the setting, holds no password
) -> AuditLocation:
    """An audit named on the command line (`--audit-db`, `audit copy --from/--to`): a file path, or a
    URL accepted exactly as `[audit] url` is (same parsing, same refusals, never repeated)."""
    if _URL_SHAPED.match(value.strip()):
        return parse_audit_url(value, password_env=password_env, what=what, password_hint=password_hint)
    return SqliteLocation(Path(value))


@dataclass(frozen=True)
class EvidenceAccount:
    """The read-only evidence source (`[mysql]`), which the audit must never share."""

    dsn: str | None = None
    password_env: str | None = None
    schemas: tuple[str, ...] = ()


def check_separate_from_evidence(location: AuditLocation, evidence: EvidenceAccount) -> None:
    """Refuse an audit on the evidence account, its password variable or one of its databases.

    The evidence account is read-only by design (its grants are the guard's last line); an audit
    written through it would need write grants there, and audit rows would land among the data the
    agent may read back as evidence.
    """
    if not isinstance(location, MysqlLocation):
        return
    if location.password_env and location.password_env == evidence.password_env:
        raise AuditLocationError(
            "[audit] password_env names the evidence account's variable ([mysql] password_env):"
            " the audit needs its own account"
        )
    if location.database in evidence.schemas:
        raise AuditLocationError(
            "[audit] url names a database the evidence tool may read ([mysql] allowed_schemas)"
        )
    if not evidence.dsn:
        return
    try:
        parts = urlsplit(evidence.dsn)
        host, port, user = parts.hostname, parts.port or DEFAULT_MYSQL_PORT, parts.username
    except ValueError:
        return  # an unusable evidence DSN is reported by the evidence tool's own setup
    if host is None or user is None:
        return
    if location.same_account(host, port, unquote(user)):
        raise AuditLocationError(
            "[audit] url names the evidence account ([mysql] dsn): the audit needs its own account"
        )
    same_server = (location.host.lower(), location.port) == (host.lower(), port)
    if same_server and location.database == unquote(parts.path.lstrip("/")):
        raise AuditLocationError("[audit] url names the evidence database ([mysql] dsn)")
