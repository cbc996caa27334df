"""A local HTTP server on 127.0.0.1 shaped like the OpenAI chat-completions API, for model-path tests.

Each request is answered by the next scripted reply: a chat-completion dict, `(status, raw body)`,
`Hang(seconds)` (accept the request and say nothing, to pass the client's timeout), `Drop()` (close
the connection without an HTTP response) or `Trickle(completion, seconds)` (a valid answer, slowly).
Every request body is recorded so tests can count model calls and inspect what the model was sent. A
hang is released when the server stops. GET requests (what `[model] request_shaping = "auto"` asks a
server) are answered from `routes` by path, else 404, and their paths recorded in `gets`.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Hang:
    seconds: float


@dataclass(frozen=True)
class Drop:
    pass


@dataclass(frozen=True)
class Trickle:
    """A valid completion, its body sent in `pieces` over `seconds`: every read of the client gets
    bytes in time, so only a bound on the whole call stops it."""

    completion: dict[str, Any]
    seconds: float
    pieces: int = 10


Reply = dict[str, Any] | tuple[int, str] | Hang | Drop | Trickle
EXHAUSTED = '{"error": {"message": "script exhausted"}}'


def completion(
    text: str | None = None,
    tool_calls: list[dict[str, Any]] | None = None,
    prompt_tokens: int = 100,
    completion_tokens: int = 20,
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if tool_calls:
        message["tool_calls"] = [
            {
                "id": c["id"],
                "type": "function",
                "function": {"name": c["name"], "arguments": json.dumps(c["arguments"], ensure_ascii=False)},
            }
            for c in tool_calls
        ]
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 1764460800,
        "model": "test-model",
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if tool_calls else "stop"}
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


@dataclass
class FakeOpenAI:
    replies: list[Reply]
    requests: list[dict[str, Any]] = field(default_factory=list)
    gets: list[str] = field(default_factory=list)
    url: str = ""
    release: threading.Event = field(default_factory=threading.Event)


@contextmanager
def fake_openai(
    replies: Sequence[Reply], routes: dict[str, tuple[int, str]] | None = None
) -> Iterator[FakeOpenAI]:
    state = FakeOpenAI(list(replies))

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            state.gets.append(self.path)
            self._send_json(*(routes or {}).get(self.path, (404, '{"error": {"message": "not found"}}')))

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            state.requests.append(json.loads(self.rfile.read(length) or b"{}"))
            reply = (
                state.replies.pop(0) if state.replies else (500, '{"error": {"message": "script exhausted"}}')
            )
            if isinstance(reply, Hang):
                state.release.wait(reply.seconds)
                self.close_connection = True
                return
            if isinstance(reply, Drop):
                self.close_connection = True
                return
            if isinstance(reply, Trickle):
                answer = json.dumps(reply.completion).encode("utf-8")
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                step = -(-len(answer) // reply.pieces)
                for start in range(0, len(answer), step):
                    self.wfile.write(answer[start : start + step])
                    self.wfile.flush()
                    if state.release.wait(reply.seconds / reply.pieces):
                        return
                return
            self._send_json(*(reply if isinstance(reply, tuple) else (200, json.dumps(reply))))

        def _send_json(self, status: int, body: str) -> None:
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
