"""The one HTTP client every outbound request goes through: model server, Loki, trace collector,
package index, and whatever is added later (docs/RELIABILITY.md, "Outbound HTTP").

A server decides what it answers; it must not decide how much memory, time or trust a request costs.
So every request is bounded in its transport (`BoundedTransport`), which any `httpx.AsyncClient`
(ours, or one a library builds from our options) sends through:

- **One origin.** A client is pinned to the scheme, host and port it was configured with; a request
  anywhere else is refused before it is sent. No redirect is followed, same origin or not: a 3xx is
  the server's answer and fails the request as any other unexpected status would (a moved endpoint is
  fixed in configuration, once). Even a library that turns redirect following on cannot carry the
  request, its headers (an API key, a tenant) or its body (the prompt, the evidence) elsewhere.
- **A cap on the decoded size.** The body is counted as it arrives, after decoding; past
  `max_body_bytes` the request fails with `ResponseTooLarge` without reading further. Only `identity`
  is asked for; a server that compresses anyway is inflated a bounded step at a time (gzip, deflate),
  so a 250 KiB gzip bomb costs at most the cap, never the gigabytes it inflates to. Any other encoding
  is refused (`EncodingRefused`).
- **An overall deadline.** From sending the request to the last byte of its body, `deadline_s`, not
  per socket read: a server dripping one byte a second is cut at the deadline (`DeadlineExceeded`, an
  `httpx.TimeoutException`, so callers treat it as the timeout it is).

The errors are `httpx.TransportError`s, so a library that handles a failed connection handles them the
same way, and carry no server text.
"""

from __future__ import annotations

import asyncio
import urllib.request
import zlib
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

import httpx

MIB = 1024 * 1024
# Inflating never produces more than this per step, whatever one compressed chunk holds.
_INFLATE_STEP = 64 * 1024
_GZIP_WBITS = 16 + zlib.MAX_WBITS
_ZLIB_WBITS = zlib.MAX_WBITS
_RAW_DEFLATE_WBITS = -zlib.MAX_WBITS


@dataclass(frozen=True)
class HttpBounds:
    """What one request may cost: decoded body bytes, seconds from send to last byte, seconds to connect."""

    max_body_bytes: int
    deadline_s: float
    connect_timeout_s: float = 5.0


class OutboundRefused(httpx.TransportError):
    """A request or answer broke a bound; `reason` is a stable word for logs and tests."""

    reason = "REFUSED"


class ResponseTooLarge(OutboundRefused):
    reason = "TOO_LARGE"


class OriginRefused(OutboundRefused):
    """A request to another origin than the client's (a redirect's target, a misused client)."""

    reason = "OTHER_ORIGIN"


class EncodingRefused(OutboundRefused):
    reason = "ENCODING"


class DeadlineExceeded(httpx.TimeoutException):
    """The whole request took longer than its deadline (however the time was spent)."""

    reason = "DEADLINE"


def origin_of(url: httpx.URL | str) -> tuple[str, str, int | None]:
    """(scheme, host, port) with the scheme's default port filled in: the unit a client is pinned to."""
    parsed = httpx.URL(url)
    port = parsed.port or {"http": 80, "https": 443}.get(parsed.scheme)
    return parsed.scheme, parsed.host.lower(), port


class _Inflater:
    """gzip or deflate decoded a bounded step at a time (`zlib`'s `max_length`), concatenated gzip
    members included; `deflate` is zlib-wrapped or raw, as servers disagree (the two-byte zlib
    header, when its check holds, says which)."""

    def __init__(self, encoding: str) -> None:
        self._encoding = encoding
        self._gzip = encoding in ("gzip", "x-gzip")
        self._inflater: Any = zlib.decompressobj(_GZIP_WBITS) if self._gzip else None
        self._head = b""  # deflate's first byte, until the second one says which kind it is

    def feed(self, data: bytes, room: int) -> list[bytes]:
        """Decoded pieces of `data`, stopping once more than `room` bytes came out (the caller refuses)."""
        if self._inflater is None:
            data, self._head = self._head + data, b""
            if len(data) < 2:
                self._head = data
                return []
            zlib_header = data[0] & 0x0F == 8 and (data[0] << 8 | data[1]) % 31 == 0
            self._inflater = zlib.decompressobj(_ZLIB_WBITS if zlib_header else _RAW_DEFLATE_WBITS)
        pieces: list[bytes] = []
        made = 0
        while made <= room:
            step = min(_INFLATE_STEP, room - made + 1)
            try:
                piece = self._inflater.decompress(data, step)
            except zlib.error:
                raise EncodingRefused(f"the {self._encoding} body does not decode") from None
            pieces.append(piece)
            made += len(piece)
            if self._inflater.eof:
                data = self._inflater.unused_data if self._gzip else b""  # deflate is one stream
                if not data:
                    break
                self._inflater = zlib.decompressobj(_GZIP_WBITS)  # the next gzip member
                continue
            data = self._inflater.unconsumed_tail
            if not data and len(piece) < step:
                break  # all input used and no output held back
        return pieces


_INFLATED = frozenset({"gzip", "x-gzip", "deflate"})


class _BoundedBody(httpx.AsyncByteStream):
    """The response body as it is read: decoded, counted against the cap, each read within the deadline."""

    def __init__(
        self, raw: httpx.AsyncByteStream, inflater: _Inflater | None, cap: int, deadline: float
    ) -> None:
        self._raw = raw
        self._inflater = inflater
        self._cap = cap
        self._deadline = deadline

    async def __aiter__(self) -> AsyncIterator[bytes]:
        total = 0
        chunks = self._raw.__aiter__()
        while True:
            try:
                async with asyncio.timeout_at(self._deadline):
                    chunk = await anext(chunks)
            except StopAsyncIteration:
                return
            except TimeoutError:
                raise DeadlineExceeded("the answer did not arrive within the deadline") from None
            pieces = [chunk] if self._inflater is None else self._inflater.feed(chunk, self._cap - total)
            for piece in pieces:
                total += len(piece)
                if total > self._cap:
                    raise ResponseTooLarge(f"the answer is larger than {self._cap} bytes")
                if piece:
                    yield piece

    async def aclose(self) -> None:
        await self._raw.aclose()


class BoundedTransport(httpx.AsyncBaseTransport, httpx.BaseTransport):
    """Sends requests to one origin within `HttpBounds`; see the module docstring."""

    def __init__(
        self, origin: str, bounds: HttpBounds, inner: httpx.AsyncBaseTransport | None = None
    ) -> None:
        self._origin = origin_of(origin)
        self._bounds = bounds
        self._inner = inner or httpx.AsyncHTTPTransport(retries=0, proxy=_env_proxy(origin))

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if origin_of(request.url) != self._origin:
            raise OriginRefused("a request to another origin than the configured one", request=request)
        request.headers["Accept-Encoding"] = "identity"
        deadline = asyncio.get_running_loop().time() + self._bounds.deadline_s
        try:
            async with asyncio.timeout_at(deadline):
                response = await self._inner.handle_async_request(request)
        except TimeoutError:
            raise DeadlineExceeded("no answer within the deadline", request=request) from None
        encoding = response.headers.get("Content-Encoding", "identity").strip().lower()
        if encoding not in _INFLATED and encoding not in ("", "identity"):
            await response.aclose()
            raise EncodingRefused(f"an answer in the {encoding[:40]!r} encoding", request=request)
        headers = response.headers
        inflater = None
        if encoding in _INFLATED:
            inflater = _Inflater(encoding)
            # Decoded here: the client must not decode it a second time, and the length no longer holds.
            headers = httpx.Headers(
                [(k, v) for k, v in response.headers.multi_items() if k.lower() not in _DECODED_AWAY]
            )
        assert isinstance(response.stream, httpx.AsyncByteStream)  # noqa: S101 - invariant for the type checker
        body = _BoundedBody(response.stream, inflater, self._bounds.max_body_bytes, deadline)
        return httpx.Response(
            response.status_code,
            headers=headers,
            stream=body,
            extensions=response.extensions,
            request=request,
        )

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        """A library may build a synchronous client from the same options it builds the async one
        from (Haystack's OpenAI generator does); every request this program sends is async, so one
        sent synchronously is a bug, refused rather than sent unbounded."""
        raise OutboundRefused("a synchronous request, which this client does not bound", request=request)

    async def aclose(self) -> None:
        await self._inner.aclose()


_DECODED_AWAY = frozenset({"content-encoding", "content-length"})


def _env_proxy(origin: str) -> str | None:
    """The proxy the environment names for this origin (`HTTPS_PROXY`, `NO_PROXY`, ...): the client
    does not read the environment itself, whose proxies would be transports outside these bounds."""
    scheme, host, _ = origin_of(origin)
    if urllib.request.proxy_bypass(host):
        return None
    return urllib.request.getproxies().get(scheme)


def client_options(
    base_url: str,
    bounds: HttpBounds,
    *,
    headers: Mapping[str, str] | None = None,
    inner: httpx.AsyncBaseTransport | None = None,
) -> dict[str, Any]:
    """The `httpx.AsyncClient` keyword arguments of a bounded client, for a library that builds its
    client itself from options (Haystack's `http_client_kwargs`)."""
    return {
        "base_url": base_url,
        "headers": dict(headers or {}),
        "follow_redirects": False,
        # Per-read limits inside the overall deadline; the deadline is what bounds the request.
        "timeout": httpx.Timeout(bounds.deadline_s, connect=min(bounds.connect_timeout_s, bounds.deadline_s)),
        "transport": BoundedTransport(base_url, bounds, inner),
        "trust_env": False,  # proxies come from `_env_proxy`, inside the transport
    }


def bounded_client(
    base_url: str,
    bounds: HttpBounds,
    *,
    headers: Mapping[str, str] | None = None,
    inner: httpx.AsyncBaseTransport | None = None,
) -> httpx.AsyncClient:
    """An `httpx.AsyncClient` for `base_url`'s origin whose every request is bounded by `bounds`."""
    return httpx.AsyncClient(**client_options(base_url, bounds, headers=headers, inner=inner))
