"""Trace and span IDs derived from the run, so a run is the same trace wherever it is sent from.

A live run and the same run sent again from the audit (`diagnose audit export --otlp`) get the same
trace ID and the same span IDs: a backfill repeated, or one that overlaps live export, sends the same
spans again rather than a second copy of the run under a new trace, and an operator who has a run ID
can compute its trace ID (`trace_id_of`). The sampler decides on the trace ID, so a run is sampled the
same way wherever it is sent from.

The SDK asks its `IdGenerator` for a trace ID when a root span starts and for a span ID whenever any
span starts; `planned` hands it the derived pair for exactly one `start_span` call.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator


def _digest(*parts: str) -> bytes:
    return hashlib.sha256("\x00".join(parts).encode("utf-8", errors="surrogatepass")).digest()


def trace_id_of(run_id: str) -> int:
    """The 128-bit trace ID of a run (never 0, which OpenTelemetry reads as "no trace")."""
    return int.from_bytes(_digest("trace", run_id)[:16], "big") or 1


def span_id_of(run_id: str, *key: str) -> int:
    """The 64-bit span ID of one part of a run: ("run",), ("round", "3"), ("call", tool_call_id)."""
    return int.from_bytes(_digest("span", run_id, *key)[:8], "big") or 1


class PlannedIds(IdGenerator):
    """Random IDs (the SDK's own generator) except for a span started inside `planned`."""

    def __init__(self) -> None:
        self._random = RandomIdGenerator()
        self._lock = threading.Lock()
        self._trace_id: int | None = None
        self._span_id: int | None = None

    @contextmanager
    def planned(self, trace_id: int, span_id: int) -> Iterator[None]:
        with self._lock:
            self._trace_id, self._span_id = trace_id, span_id
            try:
                yield
            finally:
                self._trace_id = self._span_id = None

    def generate_trace_id(self) -> int:
        return self._trace_id if self._trace_id is not None else self._random.generate_trace_id()

    def generate_span_id(self) -> int:
        return self._span_id if self._span_id is not None else self._random.generate_span_id()
