"""Sending runs' spans over OTLP/HTTP without ever slowing or failing a run (docs/contracts.md,
"Traces").

The OpenTelemetry SDK's `BatchSpanProcessor` does the sending on a thread of its own: ending a span
only appends it to a bounded queue (the oldest spans are dropped when it is full), and an export
request, retries included, is bounded by `export_timeout_s` (`console.traces.otlp_http`). So a run
never waits for the endpoint. Only the end of the process or of the console's run environment does,
in `TraceExport.close`, and at most `flush_timeout_s`: not at all while its last connection was
refused (`OtlpHttpExporter.unreachable`), and never before `diagnose run` has printed its result.

`force_flush` and `shutdown` of the processor are not bounded by a timeout in every SDK version (the
flush exports on the caller's thread, a shutdown joins the worker), so `close` runs them on helper
threads it stops waiting for: a request stuck on an endpoint that accepts and never answers is left
to its daemon thread.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable, Mapping

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.sampling import ParentBased, Sampler, TraceIdRatioBased

from agent.settings import TraceSettings
from console.traces.content import ContentCapture
from console.traces.ids import PlannedIds
from console.traces.otlp_http import OtlpHttpExporter
from console.traces.sink import TraceSink
from console.version import DISTRIBUTION, package_version
from tools.redaction import Redactor

# A run has a span per model round and per invocation (tens); the queue holds many runs' worth, so
# only a long-dead endpoint under a busy console ever drops spans.
QUEUE_SIZE = 2048
BATCH_SIZE = 512
SCHEDULE_DELAY_MS = 500
_POLL_S = 0.01


def tracer_provider(service_name: str, ids: PlannedIds, sampler: Sampler) -> TracerProvider:
    """A provider of this console's own: never the process's global one, which a library could
    find and fill with spans of its own."""
    resource = Resource.create({"service.name": service_name, "service.version": package_version()})
    return TracerProvider(resource=resource, sampler=sampler, id_generator=ids, shutdown_on_exit=False)


def _within(seconds: float, work: Callable[[], object], give_up: threading.Event | None = None) -> bool:
    """Run `work` on a daemon thread and wait for it at most `seconds` (less once `give_up` is set);
    True if it finished."""
    done = threading.Event()

    def run() -> None:
        try:
            work()
        finally:
            done.set()

    threading.Thread(target=run, name="trace-flush", daemon=True).start()
    deadline = time.monotonic() + seconds
    while not done.wait(_POLL_S):
        if time.monotonic() >= deadline or (give_up is not None and give_up.is_set()):
            return False
    return True


class TraceExport:
    """The live export of a run environment: one provider, one batch processor, a sink per use case."""

    def __init__(
        self, settings: TraceSettings, endpoint: str, headers: Mapping[str, str], redactor: Redactor
    ) -> None:
        self.endpoint = endpoint
        self._flush_timeout_s = settings.flush_timeout_s
        self.ids = PlannedIds()
        exporter = OtlpHttpExporter(endpoint, headers, settings.export_timeout_s)
        self._unreachable = exporter.unreachable
        self._processor = BatchSpanProcessor(
            exporter,
            max_queue_size=QUEUE_SIZE,
            schedule_delay_millis=SCHEDULE_DELAY_MS,
            max_export_batch_size=BATCH_SIZE,
            export_timeout_millis=settings.export_timeout_s * 1000,
        )
        sampler = ParentBased(TraceIdRatioBased(settings.sample_ratio))
        self._provider = tracer_provider(settings.service_name, self.ids, sampler)
        self._provider.add_span_processor(self._processor)
        self._tracer = self._provider.get_tracer(DISTRIBUTION, package_version())
        self._content = ContentCapture(settings.capture_content, redactor, settings.max_content_bytes)
        self._sinks: weakref.WeakSet[TraceSink] = weakref.WeakSet()
        self._closed = False

    def sink(self) -> TraceSink:
        """A sink for one use case's runs."""
        sink = TraceSink(self._tracer, self.ids, self._content)
        self._sinks.add(sink)
        return sink

    def close(self) -> bool:
        """End the runs that never finished (INTERRUPTED) and send what is queued, waiting at most
        `flush_timeout_s` (not at all for an endpoint that refuses connections); True if all of it was
        handed to the endpoint in time. Safe to call twice."""
        if self._closed:
            return True
        self._closed = True
        for sink in list(self._sinks):
            sink.end_unfinished()
        unreachable = self._unreachable
        flushed = not unreachable.is_set() and _within(
            self._flush_timeout_s, self._provider.force_flush, give_up=unreachable
        )
        # No more exports and no more retries: what is left is dropped and the session closed, on a
        # thread nobody waits for (a shutdown joins an export that may be stuck on a silent endpoint).
        threading.Thread(target=self._processor.shutdown, name="trace-shutdown", daemon=True).start()
        return flushed and not unreachable.is_set()
