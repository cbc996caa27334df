"""A local stand-in for Grafana Loki's `query_range` endpoint, for adapter tests (no real Loki is available).

It answers `query_range` with the response shape Loki documents
(`{"status": "success", "data": {"resultType": "streams", "result": [{"stream", "values"}], "stats"}}`),
the instant `query` endpoint with a `vector` of one sample (the count a metric query asks for, set by
the test, or a status), and misbehaves on demand as every stub of `tests.support.http_stub` does.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.http_stub import CHUNK, RecordedRequest, StubHandler, StubServer, running

__all__ = ["LokiServer", "RecordedRequest", "loki_server_fixture", "streams_body", "vector_body"]


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


def vector_body(count: int) -> bytes:
    """An instant metric query's answer as Loki documents it: `sum(...)` is one sample, or none."""
    result = [{"metric": {}, "value": [1764470000.0, str(count)]}] if count else []
    return json.dumps({"status": "success", "data": {"resultType": "vector", "result": result}}).encode()


class LokiServer(StubServer):
    """Serves `streams` until told otherwise."""

    name = "loki-stub"

    def __init__(self) -> None:
        super().__init__()
        self.streams: list[dict[str, Any]] = []
        # What the instant query endpoint answers: a count (a one-sample vector), or an error status.
        self.count = 0
        self.count_status = 200
        self.count_hang_s = 0.0

    def reply_huge(self, total_bytes: int, *, chunked: bool) -> None:
        """A valid-looking streams response of `total_bytes`, generated 64 KiB at a time."""
        self.reply_stream(lambda: _huge_body(total_bytes), None if chunked else total_bytes)

    def answer_normally(self, handler: StubHandler, request: RecordedRequest) -> None:
        if request.path != "/loki/api/v1/query":
            handler.send_body(200, streams_body(self.streams), "application/json")
        elif self.count_hang_s:
            self._release.wait(self.count_hang_s)
            self.hangs_ended += 1
            handler.close_connection = True
        elif self.count_status != 200:
            handler.send_body(self.count_status, b"parse error at line 1", "text/plain")
        else:
            handler.send_body(200, vector_body(self.count), "application/json")


def _huge_body(total_bytes: int) -> Iterator[bytes]:
    head = b'{"status":"success","data":{"resultType":"streams","result":[{"stream":{"app":"x"},"values":['
    tail = b'["1","end"]]}]}}'
    entry = b'["1764470000000000000","' + b"x" * 1000 + b'"],'
    yield head
    sent = len(head)
    block = entry * (CHUNK // len(entry))
    while sent + len(block) + len(tail) <= total_bytes:
        yield block
        sent += len(block)
    yield b" " * (total_bytes - sent - len(tail)) + tail


@pytest.fixture(name="loki")
def loki_server_fixture() -> Iterator[LokiServer]:
    """A started server on an ephemeral 127.0.0.1 port, stopped (and any hang released) afterwards."""
    with running(LokiServer()) as server:
        yield server
