"""query_logs over Grafana Loki's `query_range` HTTP API (`[logs] source = "loki"`).

Same input as every source and the shared projection (`tools.logs.projection`), so the model cannot
tell which source answered. Loki cannot count matches beyond the page it returns: a full page says
`truncated`, and `matched` is then a lower bound.
Everything the backend can do wrong is bounded by the one outbound client (`tools.outbound_http`): an
overall deadline, no redirect (one could carry the tenant header elsewhere), a cap on the decoded
body; failures are reduced to stable codes here. Backend text never reaches a ToolError: Loki error
bodies echo the query and internal addresses.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from itertools import islice

import httpx

from tools.adapter import AdapterResult, ToolError, ToolRequest
from tools.input_models import QueryLogsInput
from tools.logs.logql import build_logql, validate_config
from tools.logs.projection import MAX_LABELS, LogProjection, NewestRecords, Window
from tools.logs.record import LogRecord
from tools.logs.severity import Severity, severity_of_field
from tools.outbound_http import HttpBounds, OutboundRefused, ResponseTooLarge, bounded_client
from tools.redaction import NOOP, Redactor
from tools.vocabulary import ErrorCode

QUERY_RANGE_PATH = "/loki/api/v1/query_range"
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
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
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
        connect_timeout_s: float = 3.0,
        read_timeout_s: float = 10.0,
        max_body_bytes: int = 2_000_000,
        level_label: str = "level",
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
        self._level_label = level_label
        headers = {"Accept": "application/json"}
        if tenant:
            headers["X-Scope-OrgID"] = tenant
        # The whole request, answer included, within the connect and read times together.
        bounds = HttpBounds(max_body_bytes, connect_timeout_s + read_timeout_s, connect_timeout_s)
        self._client = bounded_client(base_url, bounds, headers=headers, inner=transport)

    async def aclose(self) -> None:
        await self._client.aclose()

    async def execute(self, request: ToolRequest) -> AdapterResult:
        """Cancellation propagates untouched: leaving the stream context closes the connection."""
        params = request.input
        assert isinstance(params, QueryLogsInput)
        query = build_logql(
            self._service_matchers, params.service, params.level, params.contains, self._level_label
        )
        start_ns, end_ns = self._window(params)
        limit = min(params.limit, self._max_lines)
        body = await self._fetch(
            {
                "query": query,
                "start": str(start_ns),
                "end": str(end_ns + 1),  # Loki's end is exclusive; the tool's window includes `end`
                "limit": str(limit),
                "direction": "backward",
            }
        )
        newest = NewestRecords(limit)
        # Loki returns each stream newest first: among equal instants, the earlier in the answer is newer.
        for position, (ns, stream, text) in enumerate(_parse_streams(body)):
            newest.offer((ns, -position), self._record(params.service, ns, stream, text))
        records = newest.newest_first()
        return self._projection.observation(
            records,
            matched=newest.matched,
            window=Window(start_ns, end_ns),
            level=None if params.level is None else Severity[params.level],
            # Loki cannot say whether more lines matched: a full page may hide older ones.
            more_may_match=len(records) >= limit,
        )

    def _window(self, params: QueryLogsInput) -> tuple[int, int]:
        """Clamp to the configured maximum, keeping `end`: the latest minutes matter most in an incident."""
        start, end = _to_ns(params.start), _to_ns(params.end)
        if end < start:
            raise ToolError(ErrorCode.INVALID_INPUT, "WINDOW_INVERTED")
        return max(start, end - self._max_window_ns), end

    async def _fetch(self, query_params: dict[str, str]) -> bytes:
        try:
            response = await self._client.get(QUERY_RANGE_PATH, params=query_params)
        except ResponseTooLarge as exc:
            raise ToolError(ErrorCode.RESULT_TOO_LARGE) from exc
        except httpx.TimeoutException as exc:  # a slow connect, or the whole answer past its deadline
            raise ToolError(ErrorCode.TIMEOUT) from exc
        except OutboundRefused as exc:  # another origin, an encoding it cannot bound
            raise ToolError(ErrorCode.BACKEND_ERROR) from exc
        except httpx.NetworkError as exc:  # connect refused, reset, DNS failure
            raise ToolError(ErrorCode.UNAVAILABLE) from exc
        except httpx.HTTPError as exc:  # protocol violations, unsupported scheme
            raise ToolError(ErrorCode.BACKEND_ERROR) from exc
        _raise_for_status(response.status_code)
        return response.content

    def _record(self, service: str, ns: int, stream: dict[str, str], text: str) -> LogRecord:
        present = (key for key in self._label_whitelist if key in stream)
        return LogRecord(
            instant_ns=ns,
            service=service,
            severity=severity_of_field(stream.get(self._level_label)),
            message=text,
            labels=tuple((key, stream[key]) for key in islice(present, MAX_LABELS)),
            # Loki 3 writes `detected_level` from the line's text when no level was sent.
            severity_inferred=self._level_label == "detected_level",
        )


def _raise_for_status(status: int) -> None:
    if 200 <= status < 300:
        return
    if status == 400:
        raise ToolError(ErrorCode.INVALID_INPUT, "BACKEND_REJECTED_QUERY")
    if status == 413:
        raise ToolError(ErrorCode.RESULT_TOO_LARGE)
    if status == 429:
        raise ToolError(ErrorCode.UNAVAILABLE, "RATE_LIMITED")
    if status == 504:  # the query frontend gave up: a narrower window may succeed
        raise ToolError(ErrorCode.TIMEOUT)
    if status >= 500:
        raise ToolError(ErrorCode.UNAVAILABLE)
    raise ToolError(ErrorCode.BACKEND_ERROR)  # redirects (never followed), auth failures, wrong path


def _parse_streams(body: bytes) -> list[tuple[int, dict[str, str], str]]:
    """(ns, stream labels, line) for every value, or BACKEND_ERROR for anything not Loki's streams shape."""
    try:
        document = json.loads(body)
    except (ValueError, RecursionError):
        raise ToolError(ErrorCode.BACKEND_ERROR) from None
    if not isinstance(document, dict):
        raise ToolError(ErrorCode.BACKEND_ERROR)
    data = document.get("data")
    if (
        document.get("status") != "success"
        or not isinstance(data, dict)
        or data.get("resultType") != "streams"
        or not isinstance(data.get("result"), list)
    ):
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
            lines.append((ns, stream, text))
    return lines


def _to_ns(value: str) -> int:
    """Exact integer nanoseconds (the input model already guarantees an aware RFC3339 time)."""
    moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return (moment - _EPOCH) // timedelta(microseconds=1) * 1000
