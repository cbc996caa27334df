"""query_logs over Grafana Loki's `query_range` HTTP API (`[logs] source = "loki"`).

Same input as every source and the shared projection (`tools.logs.projection`), so the model cannot
tell which source answered. Loki cannot count matches beyond the page it returns: a full page says
`truncated`, and `matched` is then a lower bound.
Everything the backend can do wrong is bounded by `tools.logs.http_exchange` on the one outbound
client (`tools.outbound_http`): an overall deadline, no redirect (one could carry the tenant and auth
headers elsewhere), a cap on the decoded body, failures reduced to stable codes. Backend text never reaches a
ToolError: Loki error bodies echo the query and internal addresses. A hosted Loki's credentials (a
bearer token, or basic auth) arrive as a ready `Authorization` header built from the variables the
configuration names.

Severity: the configured level label, or without one the `level` label an appender wrote, else
Loki 3's `detected_level` (derived at ingestion from the line's text or OpenTelemetry severity; the
entry then says `level_inferred`, and `unknown` is no severity).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from itertools import islice
from typing import Any

import httpx

from tools.adapter import AdapterResult, ToolError, ToolRequest
from tools.input_models import QueryLogsInput
from tools.logs.http_exchange import (
    DEFAULT_CONNECT_TIMEOUT_S,
    DEFAULT_DEADLINE_S,
    DEFAULT_MAX_BODY_BYTES,
    exchange,
    json_document,
    log_server_client,
)
from tools.logs.logql import (
    DETECTED_LEVEL_LABEL,
    WRITTEN_LEVEL_LABEL,
    build_logql,
    build_unleveled_count,
    validate_config,
)
from tools.logs.projection import MAX_LABELS, LogProjection, NewestRecords, Window
from tools.logs.record import LogRecord
from tools.logs.severity import Severity, severity_of_field
from tools.redaction import NOOP, Redactor
from tools.vocabulary import ErrorCode

logger = logging.getLogger(__name__)

QUERY_RANGE_PATH = "/loki/api/v1/query_range"
INSTANT_QUERY_PATH = "/loki/api/v1/query"
DEFAULT_LABEL_WHITELIST = (
    "service",
    "level",
    "namespace",
    "pod",
    "container",
    "instance",
    "version",
    "enterprise_id",
    "trace_id",
)
_NS_PER_S = 1_000_000_000
_MAX_NS = 2**63 - 1  # Loki timestamps are int64 nanoseconds


class LokiLogAdapter:
    """Answers query_logs with one bounded `query_range` request per invocation."""

    def __init__(
        self,
        base_url: str,
        service_matchers: Mapping[str, str],
        *,
        tenant: str | None = None,
        max_window_minutes: int = 360,
        max_lines: int = 200,
        message_chars: int = 500,
        label_whitelist: Sequence[str] = DEFAULT_LABEL_WHITELIST,
        connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
        deadline_s: float = DEFAULT_DEADLINE_S,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        level_label: str | None = None,
        headers: Mapping[str, str] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        redactor: Redactor = NOOP,
    ) -> None:
        validate_config(service_matchers, level_label)
        self._redactor = redactor  # values are redacted before they are cut (`Redactor.prefix`)
        self._service_matchers = dict(service_matchers)
        self._max_window_ns = max_window_minutes * 60 * _NS_PER_S
        self._max_lines = max_lines
        self._projection = LogProjection(message_chars, redactor=redactor)
        self._label_whitelist = tuple(label_whitelist)
        self._deadline_s = deadline_s
        self._level_label = level_label
        sent = dict(headers or {})
        if tenant:
            sent["X-Scope-OrgID"] = tenant
        self._client = log_server_client(
            base_url,
            sent,
            max_body_bytes=max_body_bytes,
            deadline_s=deadline_s,
            connect_timeout_s=connect_timeout_s,
            transport=transport,
        )

    async def aclose(self) -> None:
        await self._client.aclose()

    async def execute(self, request: ToolRequest) -> AdapterResult:
        """Cancellation propagates untouched: leaving the stream context closes the connection."""
        params = request.input
        assert isinstance(params, QueryLogsInput)  # noqa: S101 - invariant for the type checker
        query = build_logql(
            self._service_matchers, params.service, params.level, params.contains, self._level_label
        )
        # The clamp every log source shares; Loki's own end is exclusive, so the window's `through`
        # (a whole-second end covering its second) is not used here.
        asked = Window.asked(params.start, params.end, self._max_window_ns)
        start_ns, end_ns = asked.start_ns, asked.end_ns
        limit = min(params.limit, self._max_lines)
        body = await exchange(
            self._client,
            "GET",
            QUERY_RANGE_PATH,
            check_status=_raise_for_status,
            params={
                "query": query,
                "start": str(start_ns),
                "end": str(end_ns + 1),  # Loki's end is exclusive; the tool's window includes `end`
                "limit": str(limit),
                "direction": "backward",
            },
            deadline_s=self._deadline_s,
        )
        newest = NewestRecords(limit)
        # Loki returns each stream newest first: among equal instants, the earlier in the answer is newer.
        for position, (ns, stream, text) in enumerate(_parse_streams(body)):
            newest.offer((ns, -position), self._record(params.service, ns, stream, text))
        records = newest.newest_first()
        without_level = None
        if params.level is not None:
            without_level = await self._unleveled(params, start_ns, end_ns)
        return self._projection.observation(
            records,
            matched=newest.matched,
            window=Window(start_ns, end_ns),
            level=None if params.level is None else Severity[params.level],
            without_level=without_level,
            # Loki cannot say whether more lines matched: a full page may hide older ones.
            more_may_match=len(records) >= limit,
        )

    async def _unleveled(self, params: QueryLogsInput, start_ns: int, end_ns: int) -> int | None:
        """How many lines of the window the level filter could not judge, from one instant metric
        query; None (and a warning for the operator) when Loki would not say: the evidence found
        stands either way."""
        query = build_unleveled_count(
            self._service_matchers,
            params.service,
            params.contains,
            self._level_label,
            -(-(end_ns - start_ns) // 1_000_000) + 1,  # (start - 1 ms, end]: the window, to the ms
        )
        try:
            body = await exchange(
                self._client,
                "GET",
                INSTANT_QUERY_PATH,
                check_status=_raise_for_status,
                params={"query": query, "time": str(end_ns)},
                # A quarter of the deadline: both requests together stay within the tool's 30 s
                # limit, so a slow count never costs the evidence already found.
                deadline_s=self._deadline_s / 4,
            )
            return _parse_count(body)
        except ToolError as exc:
            logger.warning("Loki did not count the lines without a level (%s)", exc.code)
            return None

    def _record(self, service: str, ns: int, stream: dict[str, str], text: str) -> LogRecord:
        present = (key for key in self._label_whitelist if key in stream)
        severity, inferred = self._severity(stream)
        return LogRecord(
            instant_ns=ns,
            service=service,
            severity=severity,
            message=text,
            labels=tuple((key, stream[key]) for key in islice(present, MAX_LABELS)),
            severity_inferred=inferred,
        )

    def _severity(self, stream: Mapping[str, str]) -> tuple[Severity | None, bool]:
        """(severity, whether Loki derived it): the configured label, else `level`, else `detected_level`."""
        if self._level_label is not None:
            return severity_of_field(stream.get(self._level_label)), self._level_label == DETECTED_LEVEL_LABEL
        written = severity_of_field(stream.get(WRITTEN_LEVEL_LABEL))
        if written is not None:
            return written, False
        detected = severity_of_field(stream.get(DETECTED_LEVEL_LABEL))
        return detected, detected is not None


def _raise_for_status(status: int) -> None:
    if 200 <= status < 300:
        return
    if status == 400:
        raise ToolError(ErrorCode.INVALID_INPUT, "BACKEND_REJECTED_QUERY")
    if status in (401, 403):  # a hosted Loki refused the configured credentials
        raise ToolError(ErrorCode.UNAVAILABLE, "AUTH_REJECTED")
    if status == 413:
        raise ToolError(ErrorCode.RESULT_TOO_LARGE)
    if status == 429:
        raise ToolError(ErrorCode.UNAVAILABLE, "RATE_LIMITED")
    if status == 504:  # the query frontend gave up: a narrower window may succeed
        raise ToolError(ErrorCode.TIMEOUT)
    if status >= 500:
        raise ToolError(ErrorCode.UNAVAILABLE)
    raise ToolError(ErrorCode.BACKEND_ERROR)  # redirects (never followed), wrong path


def _result_data(body: bytes, result_type: str) -> dict[str, Any]:
    """The `data` of a successful Loki answer of `result_type` ("streams", "vector"), or BACKEND_ERROR."""
    document = json_document(body)
    data = document.get("data")
    if (
        document.get("status") != "success"
        or not isinstance(data, dict)
        or data.get("resultType") != result_type
    ):
        raise ToolError(ErrorCode.BACKEND_ERROR)
    return data


def _parse_streams(body: bytes) -> list[tuple[int, dict[str, str], str]]:
    """(ns, stream labels, line) for every value, or BACKEND_ERROR for anything not Loki's streams shape."""
    data = _result_data(body, "streams")
    if not isinstance(data.get("result"), list):
        raise ToolError(ErrorCode.BACKEND_ERROR)
    lines: list[tuple[int, dict[str, str], str]] = []
    for item in data["result"]:
        stream = item.get("stream") if isinstance(item, dict) else None
        values = item.get("values") if isinstance(item, dict) else None
        if not (
            isinstance(stream, dict)
            and all(isinstance(value, str) for value in stream.values())
            and isinstance(values, list)
        ):
            raise ToolError(ErrorCode.BACKEND_ERROR)
        for value in values:
            # A third element (structured metadata) appears when label categorisation is requested.
            if not (isinstance(value, list) and len(value) in (2, 3)):
                raise ToolError(ErrorCode.BACKEND_ERROR)
            ts, text = value[0], value[1]
            if not (isinstance(ts, str) and ts.isascii() and ts.isdigit() and isinstance(text, str)):
                raise ToolError(ErrorCode.BACKEND_ERROR)
            ns = int(ts)
            if ns > _MAX_NS:
                raise ToolError(ErrorCode.BACKEND_ERROR)
            lines.append((ns, _with_metadata(stream, value[2] if len(value) == 3 else None), text))
    return lines


def _with_metadata(stream: dict[str, str], categorized: object) -> dict[str, str]:
    """The stream's labels and, when Loki answered with categorised labels, the entry's structured
    metadata (where Loki 3 keeps `detected_level`) and parsed labels: one flat mapping, as Loki's
    default answer has it."""
    if not isinstance(categorized, dict):
        return stream
    merged = dict(stream)
    for group in ("structuredMetadata", "parsed"):
        labels = categorized.get(group)
        if isinstance(labels, dict):
            merged.update((key, value) for key, value in labels.items() if isinstance(value, str))
    return merged


def _parse_count(body: bytes) -> int:
    """The one sample of a `sum(...)` instant query (no sample: nothing counted), or BACKEND_ERROR."""
    result = _result_data(body, "vector").get("result")
    if not isinstance(result, list) or len(result) > 1:
        raise ToolError(ErrorCode.BACKEND_ERROR)
    if not result:
        return 0
    value = result[0].get("value") if isinstance(result[0], dict) else None
    count = value[1] if isinstance(value, list) and len(value) == 2 else None
    if not (isinstance(count, str) and count.isascii() and count.isdigit() and len(count) <= 18):
        raise ToolError(ErrorCode.BACKEND_ERROR)
    return int(count)
