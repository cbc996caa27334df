"""Builds the ToolBoundary of a run from configuration: embedded sources unless told otherwise."""

from __future__ import annotations

from agent.settings import ConfigError, Settings
from tools.adapter import EvidenceAdapter
from tools.boundary import ToolBoundary
from tools.definitions import LOOKUP_KNOWLEDGE, QUERY_LOGS
from tools.knowledge import KnowledgeAdapter, bundled_knowledge_path
from tools.logs_file import LogFileAdapter, bundled_logs_path
from tools.redaction import NOOP, Redactor


def build_adapters(settings: Settings) -> dict[str, EvidenceAdapter]:
    """query_mysql has no adapter until MySQL is configured, so the boundary answers UNAVAILABLE."""
    adapters: dict[str, EvidenceAdapter] = {
        LOOKUP_KNOWLEDGE: KnowledgeAdapter(settings.knowledge.path or bundled_knowledge_path()),
    }
    if settings.logs.source == "file":
        adapters[QUERY_LOGS] = LogFileAdapter(
            settings.logs.path or bundled_logs_path(),
            max_window_minutes=settings.logs.max_window_minutes,
            max_lines=settings.logs.max_lines,
        )
    else:
        adapters[QUERY_LOGS] = _loki(settings)
    return adapters


def _loki(settings: Settings) -> EvidenceAdapter:
    from tools.logs_loki import LokiLogAdapter

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
        )
    except ValueError as exc:
        raise ConfigError(f"[logs] {exc}") from None


def build_boundary(settings: Settings, redactor: Redactor = NOOP) -> ToolBoundary:
    return ToolBoundary(build_adapters(settings), redactor=redactor)
