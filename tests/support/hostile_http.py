"""HTTP servers on 127.0.0.1 that answer the ways a hostile or broken server does: a gzip bomb, a body
dripped a byte at a time, a redirect to another origin, a body that never ends.

Raw sockets, so each answer is exactly the bytes written here (no framework decoding or buffering in
between); every request is recorded (method, path, headers, body) before it is answered, so a test can
show that a request never reached a server at all. Each connection gets one answer and is closed.
"""

from __future__ import annotations

import functools
import socket
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType

MIB = 1024 * 1024
Answer = Callable[[socket.socket], None]


@dataclass(frozen=True)
class Received:
    method: str
    path: str
    headers: dict[str, str]  # lower-cased names
    body: bytes


@functools.cache
def gzip_bomb(inflated_bytes: int) -> bytes:
    """`inflated_bytes` of zeros as one gzip member (about a thousandth of the size), built without
    holding the inflated bytes."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    zeros = bytes(MIB)
    parts = [packer.compress(zeros) for _ in range(inflated_bytes // MIB)]
    return b"".join([*parts, packer.compress(bytes(inflated_bytes % MIB)), packer.flush()])


def head(status: int, headers: dict[str, str]) -> bytes:
    lines = [f"HTTP/1.1 {status} X"] + [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join([*lines, "Connection: close", "", ""])).encode()


def whole(status: int, body: bytes, headers: dict[str, str] | None = None) -> Answer:
    """An ordinary answer: these headers, a Content-Length, the body."""

    def answer(sock: socket.socket) -> None:
        sock.sendall(head(status, {**(headers or {}), "Content-Length": str(len(body))}) + body)

    return answer


def in_chunks(body: bytes, headers: dict[str, str], chunk: int) -> Answer:
    """A 200 with these headers and a Content-Length, the body written `chunk` bytes at a time."""

    def answer(sock: socket.socket) -> None:
        sock.sendall(head(200, {**headers, "Content-Length": str(len(body))}))
        for start in range(0, len(body), chunk):
            sock.sendall(body[start : start + chunk])

    return answer


def bomb(inflated_bytes: int, content_type: str = "application/json") -> Answer:
    """A small gzip body that inflates to `inflated_bytes`."""
    return whole(200, gzip_bomb(inflated_bytes), {"Content-Encoding": "gzip", "Content-Type": content_type})


def redirect(location: str, status: int = 307) -> Answer:
    return whole(status, b"", {"Location": location})


def drip(total_bytes: int, every_s: float, content_type: str = "application/json") -> Answer:
    """A Content-Length of `total_bytes`, sent one byte every `every_s`: each read is quick, the whole
    answer slow. The bytes are spaces, so an answer read to its end is no valid answer either."""

    def answer(sock: socket.socket) -> None:
        sock.sendall(head(200, {"Content-Type": content_type, "Content-Length": str(total_bytes)}))
        for _ in range(total_bytes):
            time.sleep(every_s)
            sock.sendall(b" ")

    return answer


def endless(stop_after: int = 256 * MIB, content_type: str = "application/json") -> Answer:
    """A chunked body that does not end: 64 KiB chunks until the client hangs up. It stops after
    `stop_after` bytes only so that a client with no cap fails its test instead of hanging it."""

    def answer(sock: socket.socket) -> None:
        sock.sendall(head(200, {"Content-Type": content_type, "Transfer-Encoding": "chunked"}))
        chunk = b"%x\r\n%s\r\n" % (64 * 1024, b" " * 64 * 1024)
        for _ in range(stop_after // (64 * 1024)):
            sock.sendall(chunk)
        sock.sendall(b"0\r\n\r\n")

    return answer


@dataclass
class HostileServer:
    """Answers every request with `answer` until closed."""

    answer: Answer
    received: list[Received] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._closed = threading.Event()
        threading.Thread(target=self._accept, name="hostile-http", daemon=True).start()

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self._listener.getsockname()[1]}"

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(sock,), daemon=True).start()

    def _serve(self, sock: socket.socket) -> None:
        with sock:
            try:
                self.received.append(_read_request(sock))
                self.answer(sock)
            except OSError:
                pass  # the client hung up, as it should on a hostile answer

    def close(self) -> None:
        self._closed.set()
        self._listener.close()

    def __enter__(self) -> HostileServer:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def _read_request(sock: socket.socket) -> Received:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise OSError("closed before the request was complete")
        data += chunk
    raw_head, _, body = data.partition(b"\r\n\r\n")
    request_line, *header_lines = raw_head.decode("latin-1").split("\r\n")
    headers = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    method, path, _ = request_line.split(" ", 2)
    return Received(method, path, headers, body)
