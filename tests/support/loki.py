"""A local stand-in for Grafana Loki's `query_range` endpoint, for adapter tests (no real Loki is available).

It answers with the response shape Loki documents
(`{"status": "success", "data": {"resultType": "streams", "result": [{"stream", "values"}], "stats"}}`),
records every request, and can be told to misbehave the ways a real backend or proxy does: an error
status, broken JSON, a redirect, a hang, or a body far larger than anyone should buffer. It runs on the
stdlib `ThreadingHTTPServer` in a background thread so the client under test shares nothing with it.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest

Behavior = Callable[["_Handler"], None]
_CHUNK = 64 * 1024


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    params: dict[str, str]
    headers: dict[str, str]  # lower-cased names


def streams_body(result: list[dict[str, Any]]) -> bytes:
    """A successful log query response exactly as Loki documents it (stats abridged)."""
    return json.dumps(
        {
            "status": "success",
            "data": {
                "resultType": "streams",
                "result": result,
                "stats": {"summary": {"bytesProcessedPerSecond": 0, "totalEntriesReturned": 0}},
            },
        }
    ).encode()


class LokiServer:
    """Serves `streams` until told otherwise; every request is recorded before it is answered."""

    def __init__(self) -> None:
        self.requests: list[RecordedRequest] = []
        self.streams: list[dict[str, Any]] = []
        self._behavior: Behavior | None = None
        self._release = threading.Event()
        # Load-independent evidence for the client's side: hangs that ran out (or were released) and
        # body bytes the server managed to hand to the socket.
        self.hangs_ended = 0
        self.bytes_sent = 0
        self._httpd = _LokiHTTPServer(("127.0.0.1", 0), _Handler)
        self._httpd.loki = self
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, name="loki-stub", daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._release.set()  # frees handlers parked in a hang
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    # --- what to answer -------------------------------------------------------------------------

    def reply_status(self, status: int, body: bytes = b"") -> None:
        self._behavior = lambda handler: handler.send_body(status, body, "text/plain; charset=utf-8")

    def reply_raw(self, body: bytes, headers: dict[str, str] | None = None) -> None:
        self._behavior = lambda handler: handler.send_body(200, body, "application/json", headers)

    def reply_redirect(self, location: str, status: int = 302) -> None:
        self._behavior = lambda handler: handler.send_body(status, b"", "text/plain", {"Location": location})

    def reply_hang(self, seconds: float = 30.0) -> None:
        """Accept the request and say nothing, until `seconds` pass or the server stops."""

        def hang(handler: _Handler) -> None:
            self._release.wait(seconds)
            self.hangs_ended += 1
            handler.close_connection = True

        self._behavior = hang

    def reply_huge(self, total_bytes: int, *, chunked: bool) -> None:
        """A valid-looking streams response of `total_bytes`, generated 64 KiB at a time."""
        self._behavior = lambda handler: handler.send_stream(_huge_body(total_bytes), total_bytes, chunked)

    def answer(self, handler: _Handler) -> None:
        if self._behavior is not None:
            self._behavior(handler)
        else:
            handler.send_body(200, streams_body(self.streams), "application/json")


def _huge_body(total_bytes: int) -> Iterator[bytes]:
    head = b'{"status":"success","data":{"resultType":"streams","result":[{"stream":{"app":"x"},"values":['
    tail = b'["1","end"]]}]}}'
    entry = b'["1764470000000000000","' + b"x" * 1000 + b'"],'
    yield head
    sent = len(head)
    block = entry * (_CHUNK // len(entry))
    while sent + len(block) + len(tail) <= total_bytes:
        yield block
        sent += len(block)
    yield b" " * (total_bytes - sent - len(tail)) + tail


class _LokiHTTPServer(ThreadingHTTPServer):
    """The HTTP server of one stub; handlers reach the stub's state through it."""

    loki: LokiServer


class _Handler(BaseHTTPRequestHandler):
    server: _LokiHTTPServer

    protocol_version = "HTTP/1.1"  # keep-alive and chunked encoding, like Loki behind a proxy

    def do_GET(self) -> None:
        split = urlsplit(self.path)
        server = self.server.loki
        server.requests.append(
            RecordedRequest(
                method="GET",
                path=split.path,
                params=dict(parse_qsl(split.query, keep_blank_values=True)),
                headers={name.lower(): value for name, value in self.headers.items()},
            )
        )
        server.answer(self)

    def send_body(
        self, status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def handle(self) -> None:
        """A capped client hangs up mid-body; that is the expected end of the exchange, not an error."""
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            super().handle()

    def send_stream(self, parts: Iterable[bytes], total_bytes: int, chunked: bool) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Content-Length", str(total_bytes))
        self.end_headers()
        for part in parts:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part) if chunked else part)
            self.server.loki.bytes_sent += len(part)
        if chunked:
            self.wfile.write(b"0\r\n\r\n")

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: pytest output is for the adapter under test."""


@pytest.fixture(name="loki")
def loki_server_fixture() -> Iterator[LokiServer]:
    """A started server on an ephemeral 127.0.0.1 port, stopped (and any hang released) afterwards."""
    server = LokiServer()
    server.start()
    yield server
    server.stop()
