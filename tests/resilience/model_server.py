"""An OpenAI-compatible stub that can also misbehave: hang past the client's timeout or drop the socket.

Extends tests/openai_server.py's reply list with two more kinds of reply: `Hang(seconds)` accepts the
request and says nothing, `Drop()` closes the connection without an HTTP response. A hang is released
when the server stops, so a test never waits for it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.openai_server import Reply


@dataclass(frozen=True)
class Hang:
    seconds: float


@dataclass(frozen=True)
class Drop:
    pass


StubReply = Reply | Hang | Drop


@dataclass
class ModelStub:
    replies: list[StubReply]
    requests: list[dict[str, Any]] = field(default_factory=list)
    url: str = ""
    release: threading.Event = field(default_factory=threading.Event)


@contextmanager
def model_stub(replies: list[StubReply]) -> Iterator[ModelStub]:
    state = ModelStub(list(replies))

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            state.requests.append(json.loads(self.rfile.read(length) or b"{}"))
            reply: StubReply = (
                state.replies.pop(0) if state.replies else (500, '{"error": "script exhausted"}')
            )
            if isinstance(reply, Hang):
                state.release.wait(reply.seconds)
                self.close_connection = True
                return
            if isinstance(reply, Drop):
                self.close_connection = True
                return
            status, body = reply if isinstance(reply, tuple) else (200, json.dumps(reply))
            data = body.encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        yield state
    finally:
        state.release.set()
        server.shutdown()
        server.server_close()
