"""Runs as OpenTelemetry traces (docs/contracts.md, "Traces").

Nothing of OpenTelemetry is imported unless traces are on: `[telemetry.traces] endpoint`, `diagnose
run --trace-endpoint` or `diagnose audit export --otlp`. The SDK is an optional extra (`traces`), and
a console without traces neither installs nor loads it; this module decides with the standard
library only.

A trace that cannot be set up (the extra not installed, the header variable unset) turns traces off
with a warning: the diagnosis matters more than its trace. A configuration that is wrong is refused
when it is read, like any other (agent.settings).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agent.errors import DiagnoseError
from agent.secrets import parse_headers

if TYPE_CHECKING:
    from agent.settings import TraceSettings
    from console.traces.export import TraceExport
    from tools.redaction import Redactor

EXTRA_HINT = "pip install 'diagnosis-console[traces]'"


class TracesUnavailable(DiagnoseError):
    """Traces were asked for and cannot be sent; the message says why, without a secret."""


@dataclass(frozen=True)
class TraceTarget:
    """Where traces go and the headers they carry (the auth, read from the environment)."""

    endpoint: str
    headers: dict[str, str]


def trace_target(settings: TraceSettings, endpoint: str | None = None) -> TraceTarget:
    """The endpoint (`endpoint` overrides the configured one) and headers, or `TracesUnavailable`."""
    where = endpoint or settings.endpoint
    if where is None:
        raise TracesUnavailable("no trace endpoint is configured")
    headers: dict[str, str] = {}
    if settings.headers_env:
        raw = os.environ.get(settings.headers_env)
        if not raw or not raw.strip():
            raise TracesUnavailable(
                f"the variable {settings.headers_env} that [telemetry.traces] headers_env names is not set"
            )
        headers = parse_headers(raw)
        if not headers:
            raise TracesUnavailable(
                f"the variable {settings.headers_env} holds no header of the form name=value[,name=value]"
            )
    return TraceTarget(where, headers)


def require_sdk() -> None:
    """`TracesUnavailable` unless the optional `traces` extra is installed."""
    try:
        import opentelemetry.exporter.otlp.proto.common.trace_encoder
        import opentelemetry.sdk.trace  # noqa: F401
    except ImportError:
        raise TracesUnavailable(f"the OpenTelemetry packages are not installed ({EXTRA_HINT})") from None


def open_trace_export(
    settings: TraceSettings, redactor: Redactor, endpoint: str | None = None
) -> TraceExport:
    """The live export of a run environment, or `TracesUnavailable` saying why there is none."""
    target = trace_target(settings, endpoint)
    require_sdk()
    from console.traces.export import TraceExport

    return TraceExport(settings, target.endpoint, target.headers, redactor)
