"""Builds the ToolBoundary of a run from configuration: embedded sources unless told otherwise."""

from __future__ import annotations

from agent.settings import Settings
from tools.adapter import EvidenceAdapter
from tools.boundary import ToolBoundary
from tools.definitions import LOOKUP_KNOWLEDGE, QUERY_LOGS
from tools.knowledge import KnowledgeAdapter, bundled_knowledge_path
from tools.logs_file import LogFileAdapter, bundled_logs_path


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
    return adapters


def build_boundary(settings: Settings) -> ToolBoundary:
    return ToolBoundary(build_adapters(settings))
