"""A real OTLP/HTTP receiver for tests, and endpoints that are dead in two ways.

`OtlpReceiver` listens on 127.0.0.1, accepts POST /v1/traces (protobuf, gzip or not) and decodes each
request with opentelemetry-proto's `ExportTraceServiceRequest`: the wire format the exporter really
sends, decoded as a collector would. It keeps every body as it arrived and as it decoded to, so a test
can look for a planted secret in every byte that left the process.

`refused_endpoint` names a port nobody listens on (connection refused); `BlackHole` accepts
connections and never answers, the endpoint an exporter can only give up on.
"""

from __future__ import annotations

import gzip
import socket
import threading
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from tests.support.mysql import closed_port


def any_value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [any_value(item) for item in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: any_value(kv.value) for kv in value.kvlist_value.values}
    return None if kind is None else getattr(value, kind)


@dataclass
class ReceivedSpan:
    """One decoded span, with its resource's and scope's attributes beside its own."""

    name: str
    trace_id: str
    span_id: str
    parent_id: str
    kind: int
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    status_code: int  # 0 unset, 1 ok, 2 error
    status_message: str
    events: list[tuple[str, int, dict[str, Any]]]
    resource: dict[str, Any]


@dataclass
class OtlpReceiver:
    """POST /v1/traces on 127.0.0.1: every request's raw bytes, decoded bytes, headers and spans."""

    status: int = 200
    raw_bodies: list[bytes] = field(default_factory=list)
    bodies: list[bytes] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    requests: list[ExportTraceServiceRequest] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __enter__(self) -> OtlpReceiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                encoding = (self.headers.get("Content-Encoding") or "").lower()
                body = (
                    gzip.decompress(raw)
                    if encoding == "gzip"
                    else zlib.decompress(raw)
                    if encoding == "deflate"
                    else raw
                )
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                with receiver._lock:
                    receiver.raw_bodies.append(raw)
                    receiver.bodies.append(body)
                    receiver.headers.append({k.lower(): v for k, v in self.headers.items()})
                    receiver.requests.append(request)
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(receiver.status if self.path == "/v1/traces" else 404)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()

    @property
    def endpoint(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1/traces"

    def spans(self) -> list[ReceivedSpan]:
        with self._lock:
            requests = list(self.requests)
        return list(_spans(requests))

    def all_bytes(self) -> bytes:
        """Every byte that arrived, compressed and decoded, headers included."""
        with self._lock:
            parts = [*self.raw_bodies, *self.bodies, *(repr(h).encode() for h in self.headers)]
        return b"\n".join(parts)


def _spans(requests: list[ExportTraceServiceRequest]) -> Iterator[ReceivedSpan]:
    for request in requests:
        for resource_spans in request.resource_spans:
            resource = {kv.key: any_value(kv.value) for kv in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    yield ReceivedSpan(
                        name=span.name,
                        trace_id=span.trace_id.hex(),
                        span_id=span.span_id.hex(),
                        parent_id=span.parent_span_id.hex(),
                        kind=span.kind,
                        start_ns=span.start_time_unix_nano,
                        end_ns=span.end_time_unix_nano,
                        attributes={kv.key: any_value(kv.value) for kv in span.attributes},
                        status_code=span.status.code,
                        status_message=span.status.message,
                        events=[
                            (e.name, e.time_unix_nano, {kv.key: any_value(kv.value) for kv in e.attributes})
                            for e in span.events
                        ],
                        resource=resource,
                    )


def refused_endpoint() -> str:
    """An endpoint on a port that was free a moment ago: connecting is refused."""
    return f"http://127.0.0.1:{closed_port()}/v1/traces"


class BlackHole:
    """Accepts every connection and reads, never answers: a request waits for its own timeout."""

    def __init__(self) -> None:
        self._socket = socket.socket()
        self._socket.bind(("127.0.0.1", 0))
        self._socket.listen(64)
        self._held: list[socket.socket] = []
        self._stop = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        self._socket.settimeout(0.1)
        while not self._stop.is_set():
            try:
                connection, _ = self._socket.accept()
            except OSError:
                continue
            self._held.append(connection)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._socket.getsockname()[1]}/v1/traces"

    def __enter__(self) -> BlackHole:
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for connection in self._held:
            connection.close()
        self._socket.close()
