"""The three frozen evidence tools as Haystack `Tool`s: what the model is offered, never what runs.

Kept apart from the use case so request shaping (which narrows these per round) and the use case both
read them without importing each other. Haystack loads on the first call, not at import.
"""

from __future__ import annotations

import functools
from typing import Any

from tools.definitions import DESCRIPTIONS, TOOL_NAMES
from tools.input_models import envelope_schema
from tools.wire_schema import wire_schema


def _never_runs(**_: Any) -> str:
    """Registered so the schemas reach the model; the before_tool interceptor answers every call."""
    raise RuntimeError("evidence tools execute only through the harness ToolBoundary")


@functools.cache
def frozen_tools() -> tuple[Any, ...]:
    """Built once per process: the definitions are frozen, and Tool() validates each JSON schema (slow)."""
    from haystack.tools.tool import Tool

    return tuple(
        Tool(
            name=name,
            description=DESCRIPTIONS[name],
            parameters=wire_schema(envelope_schema(name)),
            function=_never_runs,
        )
        for name in TOOL_NAMES
    )
