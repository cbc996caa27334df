"""One bounded HTTP exchange with a log server (Grafana Loki, Elasticsearch, OpenSearch).

Every such server is outside the console's trust: it may redirect, stall, compress, stream without
end or answer with text that echoes queries and internal addresses. Its client is the one bounded
outbound client (`tools.outbound_http`: one origin, no redirect followed, a cap on the decoded body,
an overall deadline), and every request goes through `exchange`, which adds what is particular to a
log source:

- a call may ask for a shorter deadline than the client's (a second, optional count query);
- the status is judged before any of the body is read (`check_status` raises the source's code);
- failures are reduced to `ToolError` codes; the server's text never reaches one.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from typing import Any

import httpx

from tools.adapter import ToolError
from tools.outbound_http import HttpBounds, OutboundRefused, ResponseTooLarge, bounded_client
from tools.vocabulary import ErrorCode

DEFAULT_CONNECT_TIMEOUT_S = 3.0
DEFAULT_DEADLINE_S = 20.0
DEFAULT_MAX_BODY_BYTES = 2_000_000


def log_server_client(
    base_url: str,
    headers: Mapping[str, str],
    *,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    deadline_s: float = DEFAULT_DEADLINE_S,
    connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
    transport: httpx.AsyncBaseTransport | None = None,
) -> httpx.AsyncClient:
    """The client of one log server: its headers (credentials included) go to its origin only."""
    bounds = HttpBounds(max_body_bytes, deadline_s, connect_timeout_s)
    return bounded_client(
        base_url, bounds, headers={"Accept": "application/json", **headers}, inner=transport
    )


async def exchange(
    client: httpx.AsyncClient,
    method: str,
    path: str,
    *,
    check_status: Callable[[int], None],
    params: Mapping[str, str] | None = None,
    body: Mapping[str, Any] | None = None,
    deadline_s: float = DEFAULT_DEADLINE_S,
) -> bytes:
    """The body of a successful answer. `check_status` raises the source's ToolError for a status it
    does not accept (before any of the body is read); cancellation propagates untouched, and leaving
    the stream closes the connection."""
    content = None if body is None else json.dumps(body, ensure_ascii=False).encode("utf-8")
    headers = None if content is None else {"Content-Type": "application/json"}
    try:
        async with asyncio.timeout(deadline_s):
            async with client.stream(
                method, path, params=params, content=content, headers=headers
            ) as response:
                check_status(response.status_code)
                return await response.aread()
    except ResponseTooLarge as exc:
        raise ToolError(ErrorCode.RESULT_TOO_LARGE) from exc
    except (TimeoutError, httpx.TimeoutException) as exc:  # a slow connect, or past the deadline
        raise ToolError(ErrorCode.TIMEOUT) from exc
    except OutboundRefused as exc:  # another origin, an encoding it cannot bound
        raise ToolError(ErrorCode.BACKEND_ERROR) from exc
    except httpx.NetworkError as exc:  # connect refused, reset, DNS failure
        raise ToolError(ErrorCode.UNAVAILABLE) from exc
    except httpx.HTTPError as exc:  # protocol violations, unsupported scheme
        raise ToolError(ErrorCode.BACKEND_ERROR) from exc


def json_document(body: bytes) -> dict[str, Any]:
    """The JSON object a log server answered, or BACKEND_ERROR (not JSON, too deep, a bare value, an
    integer of thousands of digits)."""
    try:
        document = json.loads(body)
    except (ValueError, RecursionError):
        raise ToolError(ErrorCode.BACKEND_ERROR) from None
    if not isinstance(document, dict):
        raise ToolError(ErrorCode.BACKEND_ERROR)
    return document
