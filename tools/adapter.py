"""What an evidence adapter receives and returns.

An adapter sees only the unwrapped business input plus the identity of the canonical invocation
(run id, exact framework tool call ID). It answers FOUND with a bounded whitelist projection, EMPTY,
or raises `ToolError` with a stable code. Anything else it raises is mapped to BACKEND_ERROR.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol

from pydantic import BaseModel

from tools.vocabulary import ErrorCode, EvidenceStatus


@dataclass(frozen=True)
class ToolRequest:
    run_id: str
    session_id: str
    tool_call_id: str
    tool: str
    input: BaseModel


@dataclass(frozen=True)
class AdapterResult:
    status: Literal[EvidenceStatus.FOUND, EvidenceStatus.EMPTY]
    data: dict[str, Any]


class ToolError(Exception):
    """A failure the model may be told about: a stable code and an optional stable reason, never raw text."""

    def __init__(self, code: ErrorCode | str, reason: str | None = None) -> None:
        """`code` is an `ErrorCode` or its name; any other text is a programming error (ValueError)."""
        self.code = ErrorCode(code)
        self.reason = reason
        super().__init__(self.code if reason is None else f"{self.code}:{reason}")


class EvidenceAdapter(Protocol):
    async def execute(self, request: ToolRequest) -> AdapterResult: ...
