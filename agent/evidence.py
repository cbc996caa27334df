"""Builds the ToolBoundary of a run from configuration: embedded sources unless told otherwise."""

from __future__ import annotations

import os
import shutil

from agent.secrets import log_server_authorization
from agent.settings import ConfigError, Settings
from tools.adapter import EvidenceAdapter
from tools.boundary import ToolBoundary
from tools.definitions import ToolName
from tools.knowledge import KnowledgeAdapter, bundled_knowledge_path
from tools.logs.custom_format import RegexFormat
from tools.logs.file_source import LogFileAdapter, bundled_logs_path
from tools.redaction import NOOP, Redactor


def build_adapters(settings: Settings, redactor: Redactor = NOOP) -> dict[str, EvidenceAdapter]:
    """Embedded sources by default; query_mysql has no adapter (UNAVAILABLE) until `[mysql] dsn` is set.

    Each adapter gets the run's redactor: what it cuts to a display size it redacts first."""
    adapters: dict[str, EvidenceAdapter] = {
        ToolName.LOOKUP_KNOWLEDGE: KnowledgeAdapter(
            settings.knowledge.path or bundled_knowledge_path(),
            max_file_bytes=settings.knowledge.max_file_bytes,
            max_observation_bytes=settings.budget.max_observation_bytes,
            redactor=redactor,
        ),
    }
    source = settings.logs.source
    if source == "file":
        adapters[ToolName.QUERY_LOGS] = _log_files(settings, redactor)
    elif source == "loki":
        adapters[ToolName.QUERY_LOGS] = _loki(settings, redactor)
    elif source == "elasticsearch":
        adapters[ToolName.QUERY_LOGS] = _elasticsearch(settings, redactor)
    else:
        adapters[ToolName.QUERY_LOGS] = _journald(settings, redactor)
    if settings.mysql.dsn:
        adapters[ToolName.QUERY_MYSQL] = _mysql(settings, redactor)
    return adapters


def mysql_password(settings: Settings) -> str | None:
    name = settings.mysql.password_env
    return os.environ.get(name) if name else None


def _mysql(settings: Settings, redactor: Redactor) -> EvidenceAdapter:
    from tools.mysql.adapter import MysqlAdapter

    mysql = settings.mysql
    assert mysql.dsn is not None  # noqa: S101 - invariant for the type checker
    try:
        return MysqlAdapter(
            mysql.dsn,
            password=mysql_password(settings),
            allowed_schemas=mysql.allowed_schemas,
            statement_timeout_ms=mysql.statement_timeout_ms,
            max_rows=mysql.max_rows,
            redactor=redactor,
        )
    except ValueError:
        # The message could echo the DSN; name the key instead.
        raise ConfigError("[mysql] dsn is not a valid mysql://user@host:port/database URL") from None


def _log_files(settings: Settings, redactor: Redactor) -> EvidenceAdapter:
    logs = settings.logs
    custom = [
        RegexFormat(name, custom.pattern, custom.time_format, multiline=custom.multiline)
        for name, custom in logs.formats.items()
    ]
    return LogFileAdapter(
        logs.path or bundled_logs_path(),
        max_window_minutes=logs.max_window_minutes,
        max_lines=logs.max_lines,
        log_format=logs.format,
        timezone=logs.timezone,
        fields=logs.fields,
        file_services=logs.file_services,
        custom_formats=custom,
        redactor=redactor,
    )


def _loki(settings: Settings, redactor: Redactor) -> EvidenceAdapter:
    from tools.logs.loki_source import LokiLogAdapter

    logs = settings.logs
    if not logs.url or not logs.services:
        raise ConfigError('[logs] source = "loki" needs url and a services table (service = stream selector)')
    try:
        return LokiLogAdapter(
            logs.url,
            logs.services,
            tenant=logs.tenant,
            max_window_minutes=logs.max_window_minutes,
            max_lines=logs.max_lines,
            level_label=logs.level_label,
            headers=_authorization(settings),
            redactor=redactor,
        )
    except ValueError as exc:
        raise ConfigError(f"[logs] {exc}") from None


def _elasticsearch(settings: Settings, redactor: Redactor) -> EvidenceAdapter:
    from tools.logs.elasticsearch_source import ElasticsearchLogAdapter

    logs = settings.logs
    if not logs.url:
        raise ConfigError('[logs] source = "elasticsearch" needs url (the cluster\'s address)')
    try:
        return ElasticsearchLogAdapter(
            logs.url,
            index=logs.index,
            fields=logs.fields,
            headers=_authorization(settings),
            max_window_minutes=logs.max_window_minutes,
            max_lines=logs.max_lines,
            redactor=redactor,
        )
    except ValueError as exc:
        raise ConfigError(f"[logs] {exc}") from None


def _authorization(settings: Settings) -> dict[str, str]:
    value = log_server_authorization(settings.logs)
    return {} if value is None else {"Authorization": value}


def _journald(settings: Settings, redactor: Redactor) -> EvidenceAdapter:
    from tools.logs.journald_source import JournaldLogAdapter

    journalctl = shutil.which("journalctl")
    if journalctl is None:
        raise ConfigError('[logs] source = "journald" needs journalctl (systemd), and none is on PATH')
    logs = settings.logs
    return JournaldLogAdapter(
        journalctl,
        logs.path,
        max_window_minutes=logs.max_window_minutes,
        max_lines=logs.max_lines,
        redactor=redactor,
    )


def build_boundary(settings: Settings, redactor: Redactor = NOOP) -> ToolBoundary:
    return ToolBoundary(
        build_adapters(settings, redactor),
        redactor=redactor,
        max_observation_bytes=settings.budget.max_observation_bytes,
    )
