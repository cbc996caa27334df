"""Every outbound request goes through one bounded client (docs/RELIABILITY.md, "Outbound HTTP").

A server decides what it answers, never how much memory or time a request costs nor where the request
goes. First the client itself, with generated answers (sizes around the cap, chunkings, encodings) and
generated redirect targets, through an in-memory transport that hands over exactly the bytes given;
then each of its users (the model client, the trace export, the trace backfill, Loki) against hostile
servers on 127.0.0.1 (tests.support.hostile_http): a gzip bomb, a body dripped a byte at a time, a
redirect to another origin, a body that does not end.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import random
import tracemalloc
import zlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any
from unittest import mock

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.model.factory import build_model
from agent.settings import ModelSettings
from tests.support.hostile_http import (
    MIB,
    HostileServer,
    bomb,
    drip,
    endless,
    gzip_bomb,
    in_chunks,
    redirect,
    whole,
)
from tests.support.resilience import run_cli, write_config
from tools.outbound_http import (
    DeadlineExceeded,
    EncodingRefused,
    HttpBounds,
    OriginRefused,
    ResponseTooLarge,
    bounded_client,
    origin_of,
)

# --------------------------------------------------------------------------------- the client itself


class _Chunks(httpx.AsyncByteStream):
    def __init__(self, chunks: list[bytes]) -> None:
        self._chunks = chunks

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self._chunks:
            yield chunk


class RawTransport(httpx.AsyncBaseTransport):
    """Answers with exactly these bytes in these chunks (httpx's MockTransport would decode them first)."""

    def __init__(self, status: int, headers: dict[str, str], chunks: list[bytes]) -> None:
        self.answer = (status, headers, chunks)
        self.sent: list[httpx.Request] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(request)
        status, headers, chunks = self.answer
        return httpx.Response(status, headers=headers, stream=_Chunks(chunks))


def encode(body: bytes, encoding: str) -> tuple[bytes, dict[str, str]]:
    if encoding == "identity":
        return body, {}
    if encoding == "gzip":
        return gzip.compress(body), {"Content-Encoding": "gzip"}
    if encoding == "gzip, two members":
        half = len(body) // 2
        return gzip.compress(body[:half]) + gzip.compress(body[half:]), {"Content-Encoding": "gzip"}
    if encoding == "deflate":
        return zlib.compress(body), {"Content-Encoding": "deflate"}
    raw = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)  # "deflate" as some servers send it
    return raw.compress(body) + raw.flush(), {"Content-Encoding": "deflate"}


def chunked(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)] or [b""]


async def fetch(transport: httpx.AsyncBaseTransport, cap: int, url: str = "/x", **options: Any) -> bytes:
    async with bounded_client("http://service.test:8080", HttpBounds(cap, 5.0), inner=transport) as client:
        response = await client.get(url, **options)
        return response.content


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    cap=st.integers(1, 20_000),
    size_over_cap=st.integers(-20_000, 20_000),
    compressible=st.booleans(),
    encoding=st.sampled_from(["identity", "gzip", "gzip, two members", "deflate", "raw deflate"]),
    chunk=st.integers(1, 3000),
    seed=st.integers(0, 2**32),
)
def test_any_answer_is_returned_whole_within_the_decoded_cap_and_refused_past_it(
    cap: int, size_over_cap: int, compressible: bool, encoding: str, chunk: int, seed: int
) -> None:
    size = max(0, cap + size_over_cap)
    rng = random.Random(seed)
    body = bytes(size) if compressible else rng.randbytes(size)
    wire, headers = encode(body, encoding)
    transport = RawTransport(200, headers, chunked(wire, chunk))
    if size <= cap:
        assert asyncio.run(fetch(transport, cap)) == body
    else:
        with pytest.raises(ResponseTooLarge):
            asyncio.run(fetch(transport, cap))
    # Whatever the server does, it is asked for nothing but identity.
    assert transport.sent[0].headers["Accept-Encoding"] == "identity"


@pytest.mark.parametrize("encoding", ["br", "zstd", "compress", "gzip, br", "x-custom"])
def test_an_encoding_the_client_cannot_inflate_in_bounded_steps_is_refused(encoding: str) -> None:
    transport = RawTransport(200, {"Content-Encoding": encoding}, [b"\x00" * 100])
    with pytest.raises(EncodingRefused):
        asyncio.run(fetch(transport, 1000))


def test_a_gzip_bomb_costs_the_cap_not_what_it_inflates_to() -> None:
    wire = gzip_bomb(128 * MIB)  # 127 KiB on the wire
    headers = {"Content-Encoding": "gzip"}
    transport = RawTransport(200, headers, chunked(wire, 16 * 1024))
    tracemalloc.start()
    try:
        with pytest.raises(ResponseTooLarge):
            asyncio.run(fetch(transport, 1 * MIB))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 * MIB


_HOSTS = st.sampled_from(["service.test", "SERVICE.test", "other.test", "service.test.evil", "127.0.0.1"])


@settings(max_examples=120, deadline=None)
@given(
    scheme=st.sampled_from(["http", "https"]),
    host=_HOSTS,
    port=st.sampled_from([None, 80, 443, 8080, 8081]),
    userinfo=st.sampled_from(["", "user:pass@"]),
    path=st.sampled_from(["/", "/v1/chat/completions", "/loki/api/v1/query_range?x=1"]),
    status=st.sampled_from([301, 302, 303, 307, 308]),
)
def test_no_redirect_is_followed_and_none_can_carry_a_request_to_another_origin(
    scheme: str, host: str, port: int | None, userinfo: str, path: str, status: int
) -> None:
    location = f"{scheme}://{userinfo}{host}{'' if port is None else f':{port}'}{path}"
    same_origin = origin_of(location) == ("http", "service.test", 8080)
    # By default the 3xx is the answer: nothing is sent a second time, anywhere.
    transport = RawTransport(status, {"Location": location}, [b""])
    asyncio.run(fetch(transport, 1000))
    assert len(transport.sent) == 1
    # A library that asks for redirects to be followed still cannot leave the origin.
    transport = RawTransport(status, {"Location": location}, [b""])
    if same_origin:
        with pytest.raises(httpx.TooManyRedirects):  # the same answer each time, until httpx gives up
            asyncio.run(fetch(transport, 1000, follow_redirects=True))
    else:
        with pytest.raises(OriginRefused):
            asyncio.run(fetch(transport, 1000, follow_redirects=True))
        assert len(transport.sent) == 1
    # And a request aimed elsewhere by mistake is refused before it is sent.
    transport = RawTransport(200, {}, [b"ok"])
    if not same_origin:
        with pytest.raises(OriginRefused):
            asyncio.run(fetch(transport, 1000, url=location))
        assert transport.sent == []


def test_the_deadline_covers_the_whole_answer_not_each_read() -> None:
    with HostileServer(drip(60, every_s=0.05)) as server:  # every read is quick; the answer takes 3 s

        async def read() -> bytes:
            async with bounded_client(server.origin, HttpBounds(1000, deadline_s=0.5)) as client:
                return (await client.get("/")).content

        with pytest.raises(DeadlineExceeded):
            asyncio.run(read())


# ------------------------------------------------------------------------------------------ its users
# Each user against a real local server, with generated answers around its own cap.
AROUND_THE_CAP = st.one_of(st.integers(-2000, 0), st.integers(1, 2000))
WIRE = st.sampled_from(["identity", "gzip", "deflate", "raw deflate"])


def padded(document: bytes, size: int) -> bytes:
    """`document` followed by spaces up to `size` bytes (JSON ignores them; the client counts them)."""
    return document + b" " * max(0, size - len(document))


CHAT_COMPLETION = json.dumps(
    {
        "id": "c1",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }
).encode()


@settings(max_examples=15, deadline=None)
@given(delta=AROUND_THE_CAP, encoding=WIRE, chunk=st.integers(64, 4096))
def test_the_model_client_reads_any_answer_within_its_cap_and_none_past_it(
    delta: int, encoding: str, chunk: int
) -> None:
    import openai

    import agent.model.factory

    cap = 20_000  # the client is the model's own; only its cap is smaller than 16 MiB, to be quick
    wire, headers = encode(padded(CHAT_COMPLETION, cap + delta), encoding)
    with (
        mock.patch.object(agent.model.factory, "MAX_MODEL_ANSWER_BYTES", cap),
        HostileServer(in_chunks(wire, {**headers, "Content-Type": "application/json"}, chunk)) as server,
    ):
        if delta <= 0:
            assert model_reply(server.origin)["replies"][0].text == "ok"
        else:
            with pytest.raises(openai.APIConnectionError):
                model_reply(server.origin)


@settings(max_examples=15, deadline=None)
@given(delta=AROUND_THE_CAP, encoding=WIRE, chunk=st.integers(64, 4096))
def test_the_trace_export_reads_any_answer_within_its_cap_and_none_past_it(
    delta: int, encoding: str, chunk: int
) -> None:
    from opentelemetry.sdk.trace.export import SpanExportResult

    from console.traces.otlp_http import MAX_COLLECTOR_ANSWER_BYTES, OtlpHttpExporter

    wire, headers = encode(bytes(MAX_COLLECTOR_ANSWER_BYTES + delta), encoding)
    with HostileServer(in_chunks(wire, headers, chunk)) as collector:
        result = OtlpHttpExporter(f"{collector.origin}/v1/traces", {}, 2.0).export([span()])
    assert result == (SpanExportResult.SUCCESS if delta <= 0 else SpanExportResult.FAILURE)


@settings(max_examples=15, deadline=None)
@given(delta=AROUND_THE_CAP, encoding=WIRE, chunk=st.integers(64, 4096))
def test_loki_reads_any_answer_within_its_cap_and_none_past_it(delta: int, encoding: str, chunk: int) -> None:
    from tools.adapter import ToolError
    from tools.vocabulary import EvidenceStatus

    cap = 20_000
    document = json.dumps({"status": "success", "data": {"resultType": "streams", "result": []}}).encode()
    wire, headers = encode(padded(document, cap + delta), encoding)
    with HostileServer(in_chunks(wire, {**headers, "Content-Type": "application/json"}, chunk)) as loki:
        if delta <= 0:
            assert asyncio.run(loki_query(loki.origin, max_body_bytes=cap)).status == EvidenceStatus.EMPTY
        else:
            with pytest.raises(ToolError) as failed:
                asyncio.run(loki_query(loki.origin, max_body_bytes=cap))
            assert failed.value.code == "RESULT_TOO_LARGE"


async def loki_query(origin: str, **options: Any) -> Any:
    from tools.adapter import ToolRequest
    from tools.input_models import QueryLogsInput
    from tools.logs.loki_source import LokiLogAdapter

    adapter = LokiLogAdapter(origin, {"payment-service": '{app="payment"}'}, **options)
    business = QueryLogsInput(
        service="payment-service", start="2026-11-30T02:00:00Z", end="2026-11-30T03:00:00Z"
    )
    try:
        return await adapter.execute(ToolRequest("run-1", "s-1", "call-1", "query_logs", business))
    finally:
        await adapter.aclose()


# Hostile answers: a gzip bomb, a slow drip, a body that does not end.
HOSTILE = {
    "gzip bomb": lambda: bomb(128 * MIB),
    "slow drip": lambda: drip(60, every_s=0.05),
    "endless body": lambda: endless(),
}


def peak_memory(work: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        work()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def model_reply(origin: str) -> Any:
    """One chat completion from the OpenAI-compatible client `build_model` makes, against `origin`."""
    from haystack.dataclasses import ChatMessage

    settings = ModelSettings(provider="openai", base_url=f"{origin}/v1", name="m", timeout_s=0.5)
    generator = build_model(settings, None).generator
    return asyncio.run(generator.run_async(messages=[ChatMessage.from_user("hello")]))


@pytest.mark.parametrize("hostile", sorted(HOSTILE))
def test_the_model_client_is_bounded(hostile: str) -> None:
    import openai

    with HostileServer(HOSTILE[hostile]()) as server:
        failed: list[BaseException] = []

        def ask() -> None:
            try:
                model_reply(server.origin)
            except Exception as exc:
                failed.append(exc)

        peak = peak_memory(ask)
    # Timeouts are the SDK's timeout error; a refused answer is a failed connection: MODEL_ERROR.
    expected = openai.APITimeoutError if hostile == "slow drip" else openai.APIConnectionError
    assert len(failed) == 1
    assert isinstance(failed[0], expected)
    assert peak < 48 * MIB  # the cap (16 MiB) read once and joined once, never the 128 MiB


def test_the_model_client_sends_the_prompt_to_no_other_origin() -> None:
    import openai

    with HostileServer(whole(200, b"{}")) as elsewhere:
        location = f"{elsewhere.origin}/v1/chat/completions"
        # The 307 is the answer, a failed call (MODEL_ERROR): the prompt is not sent again anywhere.
        with HostileServer(redirect(location)) as server, pytest.raises(openai.APIStatusError, match="307"):
            model_reply(server.origin)
        assert len(server.received) == 1
        assert elsewhere.received == []


@pytest.mark.parametrize("hostile", [*sorted(HOSTILE), "redirect"])
def test_the_request_shaping_probe_is_bounded(hostile: str) -> None:
    from agent.model import server_kind

    with HostileServer(whole(200, b'{"data": [{"owned_by": "llamacpp"}]}')) as elsewhere:
        answer = redirect(f"{elsewhere.origin}/v1/models") if hostile == "redirect" else HOSTILE[hostile]()
        with HostileServer(answer) as server:
            settings = ModelSettings(provider="openai", base_url=f"{server.origin}/v1", timeout_s=0.5)
            modes: list[str] = []
            peak = peak_memory(lambda: modes.append(asyncio.run(server_kind.shaping_mode(settings))))
        assert modes == ["off"]
        assert peak < 16 * MIB
        assert elsewhere.received == []


def span() -> Any:
    from opentelemetry.sdk.trace import TracerProvider

    with TracerProvider().get_tracer("test").start_as_current_span("s") as made:
        pass
    return made


@pytest.mark.parametrize("hostile", [*sorted(HOSTILE), "redirect"])
def test_the_trace_export_is_bounded(hostile: str) -> None:
    from opentelemetry.sdk.trace.export import SpanExportResult

    from console.traces.otlp_http import OtlpHttpExporter

    with HostileServer(whole(200, b"")) as elsewhere:
        answer = redirect(f"{elsewhere.origin}/v1/traces") if hostile == "redirect" else HOSTILE[hostile]()
        with HostileServer(answer) as collector:
            exporter = OtlpHttpExporter(f"{collector.origin}/v1/traces", {"x-scope-orgid": "t"}, 0.5)
            results: list[SpanExportResult] = []
            peak = peak_memory(lambda: results.append(exporter.export([span()])))
        assert results == [SpanExportResult.FAILURE]
        assert peak < 8 * MIB
        assert len(collector.received) == 1
        assert elsewhere.received == []


def test_the_trace_backfill_gives_up_on_a_dripping_collector(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    db = tmp_path / "audit.db"
    run = run_cli(capsys, "run", "--json", "--audit-db", db, "--scenario", "unknown-tool")
    config = write_config(tmp_path / "diagnose.toml", {"telemetry.traces": {"export_timeout_s": 0.5}})
    with HostileServer(drip(60, every_s=0.05)) as collector:
        sent = run_cli(
            capsys,
            "audit",
            "export",
            *("--config", config, "--audit-db", db),
            *("--otlp", f"{collector.origin}/v1/traces", "--run", run.result["run_id"]),
        )
    assert sent.code == 3
    assert sent.err.endswith("diagnose audit: the trace endpoint did not accept 1 run (see the log)\n")


@pytest.mark.parametrize("hostile", [*sorted(HOSTILE), "redirect"])
async def test_loki_is_bounded(hostile: str) -> None:
    from tools.adapter import ToolError, ToolRequest
    from tools.input_models import QueryLogsInput
    from tools.logs.loki_source import LokiLogAdapter

    expected = {"gzip bomb": "RESULT_TOO_LARGE", "slow drip": "TIMEOUT", "endless body": "RESULT_TOO_LARGE"}
    with HostileServer(whole(200, b"")) as elsewhere:
        answer = redirect(f"{elsewhere.origin}/loki") if hostile == "redirect" else HOSTILE[hostile]()
        with HostileServer(answer) as loki:
            adapter = LokiLogAdapter(
                loki.origin, {"payment-service": '{app="payment"}'}, connect_timeout_s=0.2, deadline_s=0.5
            )
            business = QueryLogsInput(
                service="payment-service", start="2026-11-30T02:00:00Z", end="2026-11-30T03:00:00Z"
            )
            tracemalloc.start()
            try:
                with pytest.raises(ToolError) as failed:
                    await adapter.execute(ToolRequest("run-1", "s-1", "call-1", "query_logs", business))
                peak = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
                await adapter.aclose()
        assert failed.value.code == expected.get(hostile, "BACKEND_ERROR")
        assert peak < 8 * MIB
        assert elsewhere.received == []
