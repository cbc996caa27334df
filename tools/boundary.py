"""ToolBoundary: the only way evidence is collected.

It authorizes (only the three frozen tools with a configured adapter), validates the business input,
runs the adapter exactly once under a time limit with the exact framework tool call ID, and maps every
failure to a stable error code. No retry happens here or anywhere: a failed check is reported, not
repeated.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from tools.adapter import EvidenceAdapter, ToolError, ToolRequest
from tools.definitions import TOOL_NAMES
from tools.input_models import BUSINESS_INPUTS
from tools.observation_budget import fit_projection
from tools.redaction import NOOP, Redactor
from tools.unicode_text import encodable_value, holds_unencodable
from tools.vocabulary import ErrorCode, EvidenceStatus

log = logging.getLogger(__name__)

DEFAULT_TOOL_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class InvocationOutcome:
    status: Literal[EvidenceStatus.FOUND, EvidenceStatus.EMPTY, EvidenceStatus.ERROR]
    data: dict[str, Any] | None
    error_code: ErrorCode | None
    reason: str | None
    duration_ms: int


class ToolBoundary:
    def __init__(
        self,
        adapters: Mapping[str, EvidenceAdapter],
        timeout_s: float = DEFAULT_TOOL_TIMEOUT_S,
        redactor: Redactor = NOOP,
        max_observation_bytes: int | None = None,
    ) -> None:
        unknown = set(adapters) - set(TOOL_NAMES)
        if unknown:
            raise ValueError(f"adapters for unknown tools: {sorted(unknown)}")
        self._adapters = dict(adapters)
        self._timeout_s = timeout_s
        self._redactor = redactor
        self._max_observation_bytes = max_observation_bytes

    def adapter(self, tool: str) -> EvidenceAdapter | None:
        """The adapter answering `tool`, for what the operator is told at start (not for runs)."""
        return self._adapters.get(tool)

    async def prepare(self, progress: Callable[[int, int], None] | None = None) -> None:
        """Let an adapter that indexes its source (lookup_knowledge's runbook folder) do it now, before
        the first run asks; `progress(done, total)` hears from a long indexing. A source that cannot be
        read now is left for the run to report (its call answers UNAVAILABLE)."""
        for adapter in self._adapters.values():
            prepare = getattr(adapter, "prepare", None)
            if prepare is not None:
                try:
                    await prepare(progress)
                except ToolError:
                    continue

    @property
    def redactor(self) -> Redactor:
        """The run's redaction step, for the harness's own cuts (an echoed tool name)."""
        return self._redactor

    async def aclose(self) -> None:
        """Release adapter resources (HTTP clients, connection pools)."""
        for adapter in self._adapters.values():
            close = getattr(adapter, "aclose", None)
            if close is not None:
                await close()

    @staticmethod
    def is_registered(tool: str) -> bool:
        return tool in TOOL_NAMES

    @staticmethod
    def validate_input(tool: str, raw: Any) -> BaseModel:
        """Parse the unwrapped business input; a bad one is INVALID_INPUT, naming no internals."""
        try:
            return BUSINESS_INPUTS[tool].model_validate(raw)
        except ValidationError:
            raise ToolError(ErrorCode.INVALID_INPUT) from None

    async def invoke(self, request: ToolRequest) -> InvocationOutcome:
        """Run one authorized invocation. Cancellation propagates (the caller records CANCELLED)."""
        started = time.perf_counter()

        def done(
            status: Literal[EvidenceStatus.FOUND, EvidenceStatus.EMPTY, EvidenceStatus.ERROR],
            data: dict[str, Any] | None = None,
            code: ErrorCode | None = None,
            reason: str | None = None,
        ) -> InvocationOutcome:
            return InvocationOutcome(status, data, code, reason, int((time.perf_counter() - started) * 1000))

        adapter = self._adapters.get(request.tool)
        if adapter is None:
            return done(EvidenceStatus.ERROR, code=ErrorCode.UNAVAILABLE)
        try:
            async with asyncio.timeout(self._timeout_s):
                result = await adapter.execute(request)
        except ToolError as exc:
            return done(EvidenceStatus.ERROR, code=exc.code, reason=exc.reason)
        except TimeoutError:
            return done(EvidenceStatus.ERROR, code=ErrorCode.TIMEOUT)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("adapter %s failed on %s", request.tool, request.tool_call_id)
            return done(EvidenceStatus.ERROR, code=ErrorCode.BACKEND_ERROR)
        # Every projection string passes the redaction step before the model, an event or the audit sees it.
        data = self._redactor.value(result.data)
        if holds_unencodable(data):
            # A source's JSON escape may decode to a lone surrogate (a log line's `\ud800`): not text
            # anyone can be sent or shown, so it is shown as U+FFFD, the evidence's other text intact.
            data = encodable_value(data)
        if self._max_observation_bytes is not None and result.status == EvidenceStatus.FOUND:
            try:
                data = fit_projection(request.tool, data, self._max_observation_bytes)
            except ToolError as exc:
                return done(EvidenceStatus.ERROR, code=exc.code, reason=exc.reason)
        if result.status == EvidenceStatus.FOUND:
            return done(EvidenceStatus.FOUND, data=data)
        return done(EvidenceStatus.EMPTY, data=data)
