"""One bounded HTTP exchange with a log server (Grafana Loki, Elasticsearch, OpenSearch).

Every such server is outside the console's trust: it may redirect, stall, compress, stream without
end or answer with text that echoes queries and internal addresses. So every request to one goes
through `exchange`, and what it bounds is bounded once, for every HTTP source:

- no redirect is ever followed (a redirect could carry the credentials to another origin); it is a
  status like any other, which the source maps to a stable code;
- explicit connect, read and write timeouts, and one overall deadline for the whole exchange, so a
  server trickling a byte per read timeout cannot hold a call until the tool's limit;
- no compressed answer (`Accept-Encoding: identity`, and a `Content-Encoding` answer is refused):
  the byte cap must bound memory, and one compressed chunk can inflate a thousandfold;
- a byte cap enforced while the body streams, never after;
- failures reduced to `ToolError` codes; the server's text never reaches one.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from typing import Any

import httpx

from tools.adapter import ToolError
from tools.vocabulary import ErrorCode

DEFAULT_CONNECT_TIMEOUT_S = 3.0
DEFAULT_READ_TIMEOUT_S = 10.0
DEFAULT_DEADLINE_S = 20.0
DEFAULT_MAX_BODY_BYTES = 2_000_000


def log_server_client(
    base_url: str,
    headers: Mapping[str, str],
    *,
    connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
    read_timeout_s: float = DEFAULT_READ_TIMEOUT_S,
    transport: httpx.AsyncBaseTransport | None = None,
) -> httpx.AsyncClient:
    """The client of one log server: its headers (credentials included) go to its origin only."""
    return httpx.AsyncClient(
        base_url=base_url,
        headers={"Accept": "application/json", "Accept-Encoding": "identity", **headers},
        follow_redirects=False,
        timeout=httpx.Timeout(
            connect=connect_timeout_s, read=read_timeout_s, write=read_timeout_s, pool=connect_timeout_s
        ),
        transport=transport,
    )


async def exchange(
    client: httpx.AsyncClient,
    method: str,
    path: str,
    *,
    check_status: Callable[[int], None],
    params: Mapping[str, str] | None = None,
    body: Mapping[str, Any] | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
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
                if response.headers.get("content-encoding", "identity").lower() != "identity":
                    raise ToolError(ErrorCode.BACKEND_ERROR)
                received = bytearray()
                async for chunk in response.aiter_raw():
                    received += chunk
                    if len(received) > max_body_bytes:
                        raise ToolError(ErrorCode.RESULT_TOO_LARGE)
                return bytes(received)
    except (TimeoutError, httpx.TimeoutException) as exc:
        raise ToolError(ErrorCode.TIMEOUT) from exc
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
