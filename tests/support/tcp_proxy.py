"""A TCP forwarder a test can pull the plug on: a database server "going away" mid-run, for one
test's connections only, while the real server keeps serving everyone else.

Two faults: `stop()` closes every connection and refuses new ones (the server is gone); `freeze()`
cuts the connections open now without a word (no FIN, no RST: a dropped NAT entry, a pulled cable
between two switches), while connections opened afterwards are forwarded as usual. `retarget()`
sends the connections opened afterwards to another server: a fail-over behind the same address.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from types import TracebackType


class TcpProxy:
    """Forwards 127.0.0.1:<port> to host:port until `stop()`."""

    def __init__(self, host: str, port: int) -> None:
        self._target = (host, port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._sockets: list[socket.socket] = []
        self._cuts: list[threading.Event] = []
        self._lock = threading.Lock()
        self._stopped = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self._target, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            cut = threading.Event()
            with self._lock:
                if self._stopped:
                    client.close()
                    upstream.close()
                    return
                self._sockets += [client, upstream]
                self._cuts.append(cut)
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(source, sink, cut), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket, cut: threading.Event) -> None:
        try:
            while data := source.recv(65536):
                if cut.is_set():
                    break  # swallowed, as a cut cable would
                sink.sendall(data)
        except OSError:
            pass
        if cut.is_set():
            return  # a cut flow does not even say goodbye: `stop()` closes its sockets
        for end in (source, sink):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)

    def retarget(self, host: str, port: int) -> None:
        self._target = (host, port)

    def freeze(self) -> None:
        """Stop forwarding, in both directions, on every connection open now, without closing any."""
        with self._lock:
            for cut in self._cuts:
                cut.set()

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            sockets, self._sockets = self._sockets, []
        self._listener.close()
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def __enter__(self) -> TcpProxy:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
