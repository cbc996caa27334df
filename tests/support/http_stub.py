"""A local HTTP server that stands in for a log backend (Loki, Elasticsearch) in adapter tests.

No such backend can be installed here, so each stand-in answers its documented API from
documented response shapes (`tests.support.loki`, `tests.support.elasticsearch`); this module is
what they share: every request is recorded (method, path, query, lower-cased headers, body) before
it is answered, and the server can be told to misbehave the ways a real backend or a proxy does:
an error status, any raw body, a redirect, a hang, or a body far larger than anyone should buffer.
It runs the stdlib `ThreadingHTTPServer` in a background thread, so the client under test shares
nothing with it.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypeVar
from urllib.parse import parse_qsl, urlsplit

Behavior = Callable[["StubHandler"], None]
CHUNK = 64 * 1024
_MAX_REQUEST_BODY = 1024 * 1024
Stub = TypeVar("Stub", bound="StubServer")


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    params: dict[str, str]
    headers: dict[str, str]  # lower-cased names
    body: bytes = b""


class StubServer:
    """Answers with `answer` (the backend's documented behaviour) until told otherwise."""

    name = "http-stub"

    def __init__(self) -> None:
        self.requests: list[RecordedRequest] = []
        self._behavior: Behavior | None = None
        self._release = threading.Event()
        # Load-independent evidence for the client's side: hangs that ran out (or were released) and
        # body bytes the server managed to hand to the socket.
        self.hangs_ended = 0
        self.bytes_sent = 0
        self._httpd = _StubHTTPServer(("127.0.0.1", 0), StubHandler)
        self._httpd.stub = self
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, name=self.name, daemon=True
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

    def reply_status(
        self, status: int, body: bytes = b"", content_type: str = "text/plain; charset=utf-8"
    ) -> None:
        self._behavior = lambda handler: handler.send_body(status, body, content_type)

    def reply_raw(self, body: bytes, headers: dict[str, str] | None = None) -> None:
        self._behavior = lambda handler: handler.send_body(200, body, "application/json", headers)

    def reply_redirect(self, location: str, status: int = 302) -> None:
        self._behavior = lambda handler: handler.send_body(status, b"", "text/plain", {"Location": location})

    def reply_hang(self, seconds: float = 30.0) -> None:
        """Accept the request and say nothing, until `seconds` pass or the server stops."""

        def hang(handler: StubHandler) -> None:
            self._release.wait(seconds)
            self.hangs_ended += 1
            handler.close_connection = True

        self._behavior = hang

    def reply_stream(self, parts: Callable[[], Iterable[bytes]], total_bytes: int | None) -> None:
        """A 200 body generated part by part: with Content-Length when `total_bytes` is given, else
        chunked (and then it may never end)."""
        self._behavior = lambda handler: handler.send_stream(parts(), total_bytes)

    def answer(self, handler: StubHandler, request: RecordedRequest) -> None:
        if self._behavior is not None:
            self._behavior(handler)
        else:
            self.answer_normally(handler, request)

    def answer_normally(self, handler: StubHandler, request: RecordedRequest) -> None:
        handler.send_body(404, b"", "text/plain")


class _StubHTTPServer(ThreadingHTTPServer):
    """The HTTP server of one stub; handlers reach the stub's state through it."""

    stub: StubServer


class StubHandler(BaseHTTPRequestHandler):
    server: _StubHTTPServer

    protocol_version = "HTTP/1.1"  # keep-alive and chunked encoding, like a backend behind a proxy

    def do_GET(self) -> None:
        self._record_and_answer(b"")

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self._record_and_answer(self.rfile.read(min(length, _MAX_REQUEST_BODY)))

    def _record_and_answer(self, body: bytes) -> None:
        split = urlsplit(self.path)
        stub = self.server.stub
        request = RecordedRequest(
            method=self.command,
            path=split.path,
            params=dict(parse_qsl(split.query, keep_blank_values=True)),
            headers={name.lower(): value for name, value in self.headers.items()},
            body=body,
        )
        stub.requests.append(request)
        stub.answer(self, request)

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

    def send_stream(self, parts: Iterable[bytes], total_bytes: int | None) -> None:
        chunked = total_bytes is None
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Content-Length", str(total_bytes))
        self.end_headers()
        for part in parts:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part) if chunked else part)
            self.server.stub.bytes_sent += len(part)
        if chunked:
            self.wfile.write(b"0\r\n\r\n")

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: pytest output is for the adapter under test."""


@contextlib.contextmanager
def running(stub: Stub) -> Iterator[Stub]:
    """A started stub on an ephemeral 127.0.0.1 port, stopped (and any hang released) afterwards."""
    stub.start()
    try:
        yield stub
    finally:
        stub.stop()
