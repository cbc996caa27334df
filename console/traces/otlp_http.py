"""The span exporter: OTLP/HTTP protobuf, gzip-compressed, sent through the bounded outbound client
(docs/RELIABILITY.md, "Outbound HTTP").

The OpenTelemetry SDK's own OTLP exporter sends with `requests`, whose timeout bounds each socket read
and whose answers are read whole and inflated without a cap: a collector that drips a byte a second
kept an export (and `diagnose audit export --otlp`) forever, and 254 KiB of gzip cost +776 MiB. This
one encodes spans with the SDK's own protobuf encoder and sends them with `tools.outbound_http`: one
origin, no redirect, the collector's answer capped, and the whole export, retries included, within
`export_timeout_s`.

An export runs on the caller's thread (the batch processor's worker, or the backfill's) in an event
loop of its own, so nothing here touches the console's loop.
"""

from __future__ import annotations

import asyncio
import gzip
import logging
import random
import threading
from collections.abc import Mapping, Sequence
from urllib.parse import urlsplit

import httpx
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from tools.outbound_http import HttpBounds, OutboundRefused, bounded_client

log = logging.getLogger(__name__)

# A collector answers an export with a small ExportTraceServiceResponse (a partial-success count and
# message at most); nothing it may say needs more.
MAX_COLLECTOR_ANSWER_BYTES = 64 * 1024
# What OTLP/HTTP says may succeed on a later try (the specification's retryable statuses).
_RETRYABLE = frozenset({429, 502, 503, 504})
_FIRST_BACKOFF_S = 0.25


class OtlpHttpExporter(SpanExporter):
    """Sends span batches to one OTLP/HTTP endpoint. `unreachable` is set while the endpoint refuses
    (or cannot be reached for) connections, so the end of a run does not wait for retries that cannot
    succeed."""

    def __init__(self, endpoint: str, headers: Mapping[str, str], timeout_s: float) -> None:
        parts = urlsplit(endpoint)
        self._origin = f"{parts.scheme}://{parts.netloc}"
        self._path = endpoint[len(self._origin) :] or "/"
        self._headers = {
            **headers,
            "Content-Type": "application/x-protobuf",
            "Content-Encoding": "gzip",
        }
        self._bounds = HttpBounds(MAX_COLLECTOR_ANSWER_BYTES, timeout_s, connect_timeout_s=timeout_s)
        self._timeout_s = timeout_s
        self.unreachable = threading.Event()
        self._shutdown = threading.Event()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self._shutdown.is_set():
            return SpanExportResult.FAILURE
        body = gzip.compress(encode_spans(spans).SerializePartialToString())
        try:
            sent = asyncio.run(self._send(body))
        except TimeoutError:
            sent = False
            log.warning("trace export: no answer from the collector within %.1f s", self._timeout_s)
        return SpanExportResult.SUCCESS if sent else SpanExportResult.FAILURE

    async def _send(self, body: bytes) -> bool:
        """POST the batch, again after a growing pause while a later try may succeed (no connection,
        a connection lost, a retryable status), all within `timeout_s`."""
        backoff = _FIRST_BACKOFF_S
        async with asyncio.timeout(self._timeout_s), bounded_client(self._origin, self._bounds) as client:
            while True:
                try:
                    response = await client.post(self._path, content=body, headers=self._headers)
                except httpx.ConnectError:
                    self.unreachable.set()
                except (httpx.TimeoutException, OutboundRefused) as exc:
                    log.warning("trace export failed: %s", getattr(exc, "reason", type(exc).__name__))
                    return False
                except httpx.TransportError:
                    pass  # the connection broke mid-request: a retry may succeed
                else:
                    self.unreachable.clear()
                    if 200 <= response.status_code < 300:
                        return True
                    if response.status_code not in _RETRYABLE:
                        log.warning("trace export: the collector answered HTTP %d", response.status_code)
                        return False
                if self._shutdown.is_set():
                    return False
                await asyncio.sleep(backoff * random.uniform(0.8, 1.2))  # noqa: S311 - retry jitter, not a secret
                backoff *= 2

    def shutdown(self) -> None:
        self._shutdown.set()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True  # nothing is buffered here
