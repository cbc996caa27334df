"""Audited runs sent as traces, so a team can backfill (`diagnose audit export --otlp URL`).

A run's audit rows become the run events it would have produced (`audit.replay`, as the
console's replay screen uses them) and go through the same `TraceSink` as a live run: the spans' times
are the audited timestamps, and their IDs are derived from the run (`console.traces.ids`), so a run
sent twice, or sent live and again from the audit, is the same trace. A run the audit holds as
interrupted (closed by crash recovery) ends INTERRUPTED; a run still going is left for later.

Unlike a live run, nothing waits here but the operator, who wants to know what arrived: spans are
collected in memory and sent a batch at a time on this thread, and every batch's answer counts. No
sampling: an export sends the runs it is asked for.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.sdk.trace.sampling import ALWAYS_ON

from agent.settings import TraceSettings
from audit.browse import AuditBrowser
from audit.replay import timeline_events
from console.traces import TraceTarget
from console.traces.content import ContentCapture
from console.traces.export import BATCH_SIZE, tracer_provider
from console.traces.ids import PlannedIds
from console.traces.otlp_http import OtlpHttpExporter
from console.traces.sink import TraceSink
from console.version import DISTRIBUTION
from tools.redaction import Redactor


class _Collected(SpanProcessor):
    """Ended spans, kept until the caller sends them."""

    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        pass

    def on_end(self, span: ReadableSpan) -> None:
        self.spans.append(span)

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


@dataclass
class BackfillReport:
    sent: list[str] = field(default_factory=list)  # runs the endpoint accepted
    refused: list[str] = field(default_factory=list)  # runs in a batch the endpoint did not accept
    running: list[str] = field(default_factory=list)  # not finished yet: left for a later export
    missing: list[str] = field(default_factory=list)  # asked for, not in the audit
    spans: int = 0


class AuditedRunTraces:
    """Sends audited runs to one OTLP/HTTP endpoint."""

    def __init__(self, settings: TraceSettings, target: TraceTarget, redactor: Redactor) -> None:
        ids = PlannedIds()
        self._collected = _Collected()
        provider = tracer_provider(settings.service_name, ids, ALWAYS_ON)
        provider.add_span_processor(self._collected)
        content = ContentCapture(settings.capture_content, redactor, settings.max_content_bytes)
        self._sink = TraceSink(provider.get_tracer(DISTRIBUTION), ids, content)
        self._exporter = OtlpHttpExporter(target.endpoint, target.headers, settings.export_timeout_s)

    def send(self, browser: AuditBrowser, run_ids: Iterable[str]) -> BackfillReport:
        report = BackfillReport()
        batch: list[str] = []
        for run_id in run_ids:
            timeline = browser.timeline(run_id)
            if timeline is None:
                report.missing.append(run_id)
                continue
            run = timeline.run
            if run["finished_at"] is None and not run["interrupted"]:
                report.running.append(run_id)
                continue
            for event in timeline_events(timeline):
                self._sink(event)
            self._sink.end_unfinished()  # interrupted: no run_finished was ever recorded
            batch.append(run_id)
            if len(self._collected.spans) >= BATCH_SIZE:
                self._send(batch, report)
                batch = []
        if batch:
            self._send(batch, report)
        return report

    def _send(self, runs: list[str], report: BackfillReport) -> None:
        spans, self._collected.spans = self._collected.spans, []
        if self._exporter.export(spans) == SpanExportResult.SUCCESS:
            report.sent.extend(runs)
            report.spans += len(spans)
        else:
            report.refused.extend(runs)

    def close(self) -> None:
        self._exporter.shutdown()
