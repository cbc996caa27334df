"""query_logs on Grafana Loki: the query the model cannot write, the bounds it cannot exceed, stable failures.

Tested against a local HTTP server on 127.0.0.1 that serves responses shaped exactly like Loki's
documented query_range API; no real Loki is available. The LogQL checks parse the built query with an
independent string-literal tokenizer written here, so escaping is proven by reading, not by string compare.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import re
import socket
import tracemalloc
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.loki import LokiServer, loki_server_fixture, streams_body  # noqa: F401 (fixture)
from tools.adapter import AdapterResult, ToolError, ToolRequest
from tools.input_models import QueryLogsInput
from tools.logs.file_source import LogFileAdapter
from tools.logs.logql import build_logql, validate_config
from tools.logs.loki_source import QUERY_RANGE_PATH, LokiLogAdapter
from tools.vocabulary import EvidenceStatus

PAYMENT = '{app="payment-service", namespace="prod"}'
MATCHERS = {"payment-service": PAYMENT, "order-service": '{app="order-service"}'}
START = "2026-11-30T01:30:00Z"
END = "2026-11-30T03:30:00Z"
MINUTE_NS = 60 * 10**9
SECRET = "internal-loki-7.prod.svc:9095 parse error at line 1"


def ns(iso: str) -> str:
    """Nanosecond epoch string as Loki sends it, from a whole-second RFC3339 time."""
    return str(int(datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()) * 10**9)


END_NS = int(ns(END))


def stream(labels: dict[str, str], *values: tuple[str, str]) -> dict[str, Any]:
    return {"stream": labels, "values": [list(value) for value in values]}


def request_for(**fields: Any) -> ToolRequest:
    fields.setdefault("service", "payment-service")
    fields.setdefault("start", START)
    fields.setdefault("end", END)
    return ToolRequest("run-1", "session-1", "call-1", "query_logs", QueryLogsInput(**fields))


@pytest.fixture
async def make(loki: LokiServer) -> AsyncIterator[Callable[..., LokiLogAdapter]]:
    """Adapters against the stub, each closed after the test."""
    made: list[LokiLogAdapter] = []

    def build(**overrides: Any) -> LokiLogAdapter:
        overrides.setdefault("connect_timeout_s", 1.0)
        overrides.setdefault("deadline_s", 5.0)
        base_url = overrides.pop("base_url", loki.url)
        adapter = LokiLogAdapter(base_url, overrides.pop("service_matchers", MATCHERS), **overrides)
        made.append(adapter)
        return adapter

    yield build
    for adapter in made:
        await adapter.aclose()


async def failure(adapter: LokiLogAdapter, **fields: Any) -> ToolError:
    with pytest.raises(ToolError) as caught:
        await adapter.execute(request_for(**fields))
    return caught.value


# --- an independent reading of LogQL ------------------------------------------------------------

_GO_ESCAPES = dict(zip('\\"ntrabfv', '\\"\n\t\r\a\b\f\v', strict=True))


def tokenize(query: str) -> list[tuple[str, str]]:
    """LogQL tokens as Loki's lexer reads them; string literals decoded with Go's escape rules.

    Raises on anything a Go `strconv.Unquote` would refuse (unknown escape, raw newline, unterminated),
    so a query that tokenizes here is one Loki parses the same way.
    """
    tokens: list[tuple[str, str]] = []
    i = 0
    while i < len(query):
        ch = query[i]
        if ch == " ":
            i += 1
        elif ch == '"':
            i += 1
            decoded: list[str] = []
            while True:
                if i >= len(query) or query[i] == "\n":
                    raise ValueError("literal not terminated")
                if query[i] == '"':
                    i += 1
                    break
                if query[i] == "\\":
                    escape = query[i + 1 : i + 2]
                    if escape not in _GO_ESCAPES:
                        raise ValueError(f"invalid escape \\{escape}")
                    decoded.append(_GO_ESCAPES[escape])
                    i += 2
                else:
                    decoded.append(query[i])
                    i += 1
            tokens.append(("STRING", "".join(decoded)))
        elif ch == "`":
            close = query.index("`", i + 1)
            tokens.append(("STRING", query[i + 1 : close]))
            i = close + 1
        elif query.startswith(("|=", "|~", "!=", "!~", "=~"), i):
            tokens.append(("OP", query[i : i + 2]))
            i += 2
        elif ch in "{}|=,":
            tokens.append(("OP", ch))
            i += 1
        elif ch.isalnum() or ch == "_":
            start = i
            while i < len(query) and (query[i].isalnum() or query[i] == "_"):
                i += 1
            tokens.append(("IDENT", query[start:i]))
        else:
            raise ValueError(f"unexpected {ch!r} outside a string literal")
    return tokens


PAYMENT_TOKENS = tokenize(PAYMENT)
ERROR_OR_WORSE = "(?i)(alert|crit|critical|dpanic|emerg|emergency|err|error|fatal|panic|severe)"
# Without a configured level label: the written `level`, or Loki 3's `detected_level`.
ERROR_FILTER = [
    ("OP", "|"),
    ("IDENT", "level"),
    ("OP", "=~"),
    ("STRING", ERROR_OR_WORSE),
    ("IDENT", "or"),
    ("IDENT", "detected_level"),
    ("OP", "=~"),
    ("STRING", ERROR_OR_WORSE),
]

HOSTILE = [
    '"} |= "x',
    '" or 1=1 |~ ".*',
    '`{app=~".+"}`',
    '{app=~".+"}',
    "\\",
    'trailing backslash \\"',
    '\\" } | json | line_format "{{.secret}}',
    '|~ `.*` != "x"',
    "支付超时 🚨 ünïcödé",
    "\\x41\\u0041\\n",
    "x" * 200,
    '"' * 200,
    "\\" * 200,
]


def test_selector_is_the_configured_matcher_alone_without_filters() -> None:
    assert build_logql(MATCHERS, "payment-service", None, None) == PAYMENT


def finds_exactly(pattern: str, contains: str) -> bool:
    """The line filter's regex (Python's `re` reads RE2's escapes of metacharacters alike) finds
    `contains` in any case, inside a line, and nothing that differs from it. Case changes are the
    one-character ones (RE2 folds simply: `ß` does not become `SS`)."""
    swapped = "".join(ch.swapcase() if len(ch.swapcase()) == 1 else ch for ch in contains)
    return (
        pattern.startswith("(?i)")
        and re.search(pattern, f"before {swapped} after") is not None
        and re.fullmatch(pattern, contains) is not None
        and re.fullmatch(pattern, contains + "x") is None
        and re.fullmatch(pattern, contains[:-1]) is None
    )


@pytest.mark.parametrize("hostile", HOSTILE, ids=lambda value: ascii(value)[:40])
def test_hostile_contains_stays_inside_one_string_literal(hostile: str) -> None:
    query = build_logql(MATCHERS, "payment-service", "ERROR", hostile)

    *head, (operator, kind), (literal, pattern) = tokenize(query)
    assert head == [*PAYMENT_TOKENS, *ERROR_FILTER]
    assert (operator, kind, literal) == ("OP", "|~", "STRING")
    assert finds_exactly(pattern, hostile)
    assert [token for token in tokenize(query) if token[1] == "{"] == [("OP", "{")]


@settings(max_examples=300, deadline=None)
@given(
    st.text(
        st.characters(exclude_categories=("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp")), min_size=1, max_size=200
    )
)
def test_any_printable_contains_round_trips_as_the_only_line_filter(contains: str) -> None:
    query = build_logql(MATCHERS, "payment-service", None, contains)

    *head, operator, (kind, pattern) = tokenize(query)
    assert (head, operator, kind) == (PAYMENT_TOKENS, ("OP", "|~"), "STRING")
    assert finds_exactly(pattern, contains)


@pytest.mark.parametrize(
    ("contains", "reason"),
    [
        ("line\nbreak", "CONTAINS_NOT_PRINTABLE"),
        ("nul\x00", "CONTAINS_NOT_PRINTABLE"),
        ("del\x7f", "CONTAINS_NOT_PRINTABLE"),
        ("bidi \u202e override", "CONTAINS_NOT_PRINTABLE"),
        ("lone \ud800 surrogate", "CONTAINS_NOT_PRINTABLE"),
        ("line\u2028separator", "CONTAINS_NOT_PRINTABLE"),
        ("x" * 201, "CONTAINS_TOO_LONG"),
    ],
)
def test_unprintable_or_long_contains_is_rejected_even_past_the_input_model(
    contains: str, reason: str
) -> None:
    with pytest.raises(ToolError) as caught:
        build_logql(MATCHERS, "payment-service", None, contains)
    assert (caught.value.code, caught.value.reason) == ("INVALID_INPUT", reason)


@pytest.mark.parametrize(
    ("level", "pattern"),
    [
        ("FATAL", "(?i)(alert|crit|critical|dpanic|emerg|emergency|fatal|panic)"),
        ("ERROR", ERROR_OR_WORSE),
        (
            "WARN",
            "(?i)(alert|crit|critical|dpanic|emerg|emergency|err|error|fatal|panic|severe|warn|warning)",
        ),
    ],
)
def test_level_is_a_fixed_label_filter_on_the_configured_label(level: str, pattern: str) -> None:
    """`level` means this severity or worse, in every spelling the file source reads."""
    query = build_logql(MATCHERS, "order-service", level, None, level_label="detected_level")

    assert query == '{app="order-service"} | detected_level=~"' + pattern + '"'
    assert tokenize(query)[-3:] == [("IDENT", "detected_level"), ("OP", "=~"), ("STRING", pattern)]


@pytest.mark.parametrize("level", ["INFO", "DEBUG"])
def test_a_lower_level_filter_accepts_every_level_above_it(level: str) -> None:
    pattern = re.fullmatch(r'.*=~"(.*)"', build_logql(MATCHERS, "order-service", level, None))
    assert pattern is not None
    accepted = re.compile(pattern.group(1))
    assert all(accepted.fullmatch(word) for word in ("info", "Notice", "WARNING", "err", "CRITICAL"))
    assert not accepted.fullmatch("trace")


def test_unknown_service_is_invalid_input() -> None:
    with pytest.raises(ToolError) as caught:
        build_logql(MATCHERS, '{app=~".+"}', None, None)
    assert (caught.value.code, caught.value.reason) == ("INVALID_INPUT", "UNKNOWN_SERVICE")


@pytest.mark.parametrize(
    ("matchers", "level_label", "reason"),
    [
        ({}, "level", "at least one service matcher is required"),
        ({"svc": 'app="svc"'}, "level", "matcher for service 'svc' is not a LogQL stream selector"),
        ({"svc": "{}"}, "level", "matcher for service 'svc' is not a LogQL stream selector"),
        (MATCHERS, "le vel", "level label 'le vel' is not a LogQL label name"),
    ],
)
def test_broken_configuration_fails_at_wiring(
    matchers: dict[str, str], level_label: str, reason: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(reason)):
        validate_config(matchers, level_label)


# --- the request sent ---------------------------------------------------------------------------


async def test_request_carries_built_query_window_limit_and_no_tenant(
    loki: LokiServer, make: Callable[..., LokiLogAdapter]
) -> None:
    result = await make().execute(request_for(level="ERROR", contains='timeout "30s"', limit=25))

    assert result == AdapterResult(
        EvidenceStatus.EMPTY,
        {
            "entries": [],
            "returned": 0,
            "matched": 0,
            "truncated": False,
            "window": {"start": START, "end": END},
            "without_level": 0,  # from the count query that follows (tests/tools/test_logs_loki_hosted.py)
        },
    )
    sent, counted = loki.requests
    assert (sent.path, counted.path) == (QUERY_RANGE_PATH, "/loki/api/v1/query")
    assert sent.params == {
        "query": build_logql(MATCHERS, "payment-service", "ERROR", 'timeout "30s"'),
        "start": str(END_NS - 120 * MINUTE_NS),
        "end": str(END_NS + 1),  # Loki's end is exclusive, the tool's is inclusive
        "limit": "25",
        "direction": "backward",
    }
    assert "x-scope-orgid" not in sent.headers
    assert sent.headers["accept-encoding"] == "identity"


async def test_tenant_header_is_sent_when_configured(
    loki: LokiServer, make: Callable[..., LokiLogAdapter]
) -> None:
    await make(tenant="team-payments").execute(request_for())

    assert loki.requests[0].headers["x-scope-orgid"] == "team-payments"


async def test_window_is_clamped_keeping_end(loki: LokiServer, make: Callable[..., LokiLogAdapter]) -> None:
    result = await make(max_window_minutes=60).execute(request_for(start="2026-11-29T17:30:00Z"))

    assert loki.requests[0].params["start"] == str(END_NS - 60 * MINUTE_NS)
    assert loki.requests[0].params["end"] == str(END_NS + 1)
    assert result.data["window"] == {"start": "2026-11-30T02:30:00Z", "end": END}


async def test_offset_times_are_sent_as_the_same_instant(
    loki: LokiServer, make: Callable[..., LokiLogAdapter]
) -> None:
    await make().execute(request_for(start="2026-11-30T09:30:00.5+08:00", end="2026-11-30T11:30:00+08:00"))

    assert loki.requests[0].params["start"] == str(END_NS - 120 * MINUTE_NS + 500_000_000)
    assert loki.requests[0].params["end"] == str(END_NS + 1)


async def test_inverted_window_is_rejected_before_any_request(
    loki: LokiServer, make: Callable[..., LokiLogAdapter]
) -> None:
    error = await failure(make(), start=END, end=START)

    assert (error.code, error.reason) == ("INVALID_INPUT", "WINDOW_INVERTED")
    assert loki.requests == []


async def test_unknown_service_sends_nothing(loki: LokiServer, make: Callable[..., LokiLogAdapter]) -> None:
    error = await failure(make(), service="billing")

    assert (error.code, error.reason) == ("INVALID_INPUT", "UNKNOWN_SERVICE")
    assert loki.requests == []


@pytest.mark.parametrize(("asked", "max_lines", "sent"), [(200, 20, "20"), (5, 20, "5"), (200, 200, "200")])
async def test_limit_is_clamped_to_max_lines(
    loki: LokiServer, make: Callable[..., LokiLogAdapter], asked: int, max_lines: int, sent: str
) -> None:
    await make(max_lines=max_lines).execute(request_for(limit=asked))

    assert loki.requests[0].params["limit"] == sent


# --- failures -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "code", "reason"),
    [
        (400, "INVALID_INPUT", "BACKEND_REJECTED_QUERY"),
        (401, "UNAVAILABLE", "AUTH_REJECTED"),
        (403, "UNAVAILABLE", "AUTH_REJECTED"),
        (404, "BACKEND_ERROR", None),
        (413, "RESULT_TOO_LARGE", None),
        (429, "UNAVAILABLE", "RATE_LIMITED"),
        (500, "UNAVAILABLE", None),
        (502, "UNAVAILABLE", None),
        (503, "UNAVAILABLE", None),
        (504, "TIMEOUT", None),
    ],
)
async def test_http_status_maps_to_a_stable_code_without_backend_text(
    loki: LokiServer, make: Callable[..., LokiLogAdapter], status: int, code: str, reason: str | None
) -> None:
    loki.reply_status(status, SECRET.encode())

    error = await failure(make())

    assert (error.code, error.reason) == (code, reason)
    assert "internal-loki" not in repr(error.args)


async def test_a_hanging_server_is_timeout(loki: LokiServer, make: Callable[..., LokiLogAdapter]) -> None:
    loki.reply_hang()

    error = await failure(make(deadline_s=0.3))

    assert (error.code, error.reason) == ("TIMEOUT", None)
    assert loki.hangs_ended == 0  # the client gave up; the server's 30 s hang is still going


@pytest.fixture
def closed_port() -> Iterator[int]:
    """Bound but never listening: connecting is refused, and no other test can take the port meanwhile."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


async def test_refused_connection_is_unavailable(
    make: Callable[..., LokiLogAdapter], closed_port: int
) -> None:
    error = await failure(make(base_url=f"http://127.0.0.1:{closed_port}"))

    assert (error.code, error.reason) == ("UNAVAILABLE", None)


@pytest.mark.parametrize("status", [301, 302, 307, 308])
async def test_redirect_is_not_followed(
    loki: LokiServer, make: Callable[..., LokiLogAdapter], status: int
) -> None:
    loki.reply_redirect(f"{loki.url}{QUERY_RANGE_PATH}?query=x", status)

    error = await failure(make(tenant="team-payments"))

    assert (error.code, error.reason) == ("BACKEND_ERROR", None)
    assert len(loki.requests) == 1


@pytest.mark.parametrize(
    "body",
    [
        b'{"status":"success","data":{"resultType":"streams","result":[',
        b"<html>502 Bad Gateway</html>",
        b"\xff\xfe not utf-8",
        b"[" * 100_000,
        b"[]",
        b'{"status":"error","errorType":"bad_data","error":"' + SECRET.encode() + b'"}',
        b'{"status":"success","data":{"resultType":"matrix","result":[]}}',
        b'{"status":"success","data":{"resultType":"streams","result":{}}}',
        b'{"status":"success","data":{"resultType":"streams","result":[{"stream":{"a":1},"values":[]}]}}',
        b'{"status":"success","data":{"resultType":"streams","result":[{"stream":{},"values":[["1"]]}]}}',
        b'{"status":"success","data":{"resultType":"streams","result":[{"stream":{},"values":[[1,"x"]]}]}}',
        b'{"status":"success","data":{"resultType":"streams","result":[{"stream":{},"values":[["-1","x"]]}]}}',
        b'{"status":"success","data":{"resultType":"streams","result":[{"stream":{},"values":[["1e9","x"]]}]}}',
        b'{"status":"success","data":{"resultType":"streams","result":[{"stream":{},"values":[["1",null]]}]}}',
        b'{"status":"success","data":{"resultType":"streams","result":[{"stream":{},"values":[["9'
        + b"9" * 30
        + b'","x"]]}]}}',
    ],
)
async def test_malformed_or_foreign_body_is_backend_error(
    loki: LokiServer, make: Callable[..., LokiLogAdapter], body: bytes
) -> None:
    loki.reply_raw(body)

    error = await failure(make())

    assert (error.code, error.reason) == ("BACKEND_ERROR", None)
    assert "internal-loki" not in repr(error.args)


async def test_a_compressed_body_is_read_and_a_compressed_bomb_is_cut_at_the_decoded_cap(
    loki: LokiServer, make: Callable[..., LokiLogAdapter]
) -> None:
    found = [stream({"service": "payment"}, (str(END_NS), "gzip ok"))]
    loki.reply_raw(gzip.compress(streams_body(found)), {"Content-Encoding": "gzip"})
    result = await make().execute(request_for())
    assert result.data is not None
    assert [entry["message"] for entry in result.data["entries"]] == ["gzip ok"]

    # 3 MB of spaces inside valid JSON, 3 KiB on the wire: the cap counts what it inflates to.
    loki.reply_raw(gzip.compress(b" " * 3_000_000 + streams_body([])), {"Content-Encoding": "gzip"})
    error = await failure(make(max_body_bytes=2_000_000))
    assert (error.code, error.reason) == ("RESULT_TOO_LARGE", None)


@pytest.mark.parametrize("chunked", [True, False])
async def test_fifty_megabyte_body_is_cut_at_the_byte_cap_in_bounded_memory(
    loki: LokiServer, make: Callable[..., LokiLogAdapter], chunked: bool
) -> None:
    loki.reply_huge(50_000_000, chunked=chunked)
    adapter = make(max_body_bytes=2_000_000)
    tracemalloc.start()
    try:
        error = await failure(adapter)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert (error.code, error.reason) == ("RESULT_TOO_LARGE", None)
    assert peak < 8_000_000  # the cap plus a few read buffers, never the 50 MB body
    # The client stopped reading at the cap: the server could not hand over the rest (socket buffers).
    assert loki.bytes_sent < 20_000_000


async def test_body_exactly_at_the_cap_is_accepted(
    loki: LokiServer, make: Callable[..., LokiLogAdapter]
) -> None:
    loki.streams = [stream({"level": "info"}, (ns(END), "ok"))]
    size = len(streams_body(loki.streams))

    assert (await make(max_body_bytes=size).execute(request_for())).status == "FOUND"
    assert (await failure(make(max_body_bytes=size - 1))).code == "RESULT_TOO_LARGE"


async def test_cancelling_a_hanging_query_propagates(
    loki: LokiServer, make: Callable[..., LokiLogAdapter]
) -> None:
    loki.reply_hang()
    task = asyncio.create_task(make(deadline_s=30).execute(request_for()))
    for _ in range(200):
        if loki.requests:
            break
        await asyncio.sleep(0.01)
    assert loki.requests, "the request never reached the server"

    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert loki.hangs_ended == 0  # cancelled at once, not after the server gave up


# --- projection ---------------------------------------------------------------------------------


async def test_streams_merge_newest_first_with_nanosecond_timestamps(
    loki: LokiServer, make: Callable[..., LokiLogAdapter]
) -> None:
    base = END_NS - 10 * MINUTE_NS
    loki.streams = [
        stream({"level": "error", "pod": "p-1"}, (str(base + 3_000_000_000), "c"), (str(base + 1), "a")),
        stream({"level": "warning", "pod": "p-2"}, (str(base + 2_500_000), "b"), (str(base), "z")),
    ]

    result = await make().execute(request_for())

    assert [(entry["ts"], entry["message"], entry["level"]) for entry in result.data["entries"]] == [
        ("2026-11-30T03:20:03Z", "c", "ERROR"),
        ("2026-11-30T03:20:00.002500Z", "b", "WARN"),
        ("2026-11-30T03:20:00.000000001Z", "a", "ERROR"),
        ("2026-11-30T03:20:00Z", "z", "WARN"),
    ]
    assert result.status == "FOUND"
    assert result.data["returned"] == 4
    assert result.data["truncated"] is False


async def test_page_is_cut_to_limit_and_flagged_truncated(
    loki: LokiServer, make: Callable[..., LokiLogAdapter]
) -> None:
    loki.streams = [stream({}, *((str(END_NS - i), f"line {i}") for i in range(5)))]

    result = await make(max_lines=3).execute(request_for(limit=50))

    assert [entry["message"] for entry in result.data["entries"]] == ["line 0", "line 1", "line 2"]
    assert (result.data["returned"], result.data["truncated"]) == (3, True)


async def test_long_lines_and_labels_are_cut_and_flagged(
    loki: LokiServer, make: Callable[..., LokiLogAdapter]
) -> None:
    labels = {key: "v" * 300 for key in ("trace_id", "pod", "namespace", "instance", "version", "container")}
    labels |= {
        "enterprise_id": "ent-1",
        "service": "pay",
        "level": "ERROR",
        "password": "hunter2",
        "ip": "10.0.0.1",
    }
    loki.streams = [stream(labels, (ns(END), "m" * 600))]

    entry = (await make(message_chars=500).execute(request_for())).data["entries"][0]

    assert entry["message"] == "m" * 500
    assert len(entry["labels"]) == 8
    assert set(entry["labels"]) <= set(labels) - {"password", "ip"}
    assert all(len(value) <= 100 for value in entry["labels"].values())


async def test_projection_has_the_file_sources_shape_and_values(
    loki: LokiServer, make: Callable[..., LokiLogAdapter], tmp_path: Path
) -> None:
    lines = [
        ("2026-11-30T02:10:00Z", "ERROR", "HikariPool-1 - Connection is not available"),
        (END, "INFO", "ok"),
    ]
    log_file = tmp_path / "app.ndjson"
    log_file.write_text(
        "".join(
            json.dumps(
                {"ts": ts, "service": "payment-service", "level": level, "message": message, "pod": "p-1"}
            )
            + "\n"
            for ts, level, message in lines
        )
    )
    loki.streams = [
        stream({"app": "payment-service", "level": level.lower(), "pod": "p-1"}, (ns(ts), message))
        for ts, level, message in lines
    ]
    request = request_for(limit=10)

    from_file = await LogFileAdapter(log_file).execute(request)
    from_loki = await make().execute(request)

    assert from_loki.status == from_file.status == "FOUND"
    assert from_loki.data.keys() == from_file.data.keys()
    assert from_loki.data["window"] == from_file.data["window"]
    assert from_loki.data["returned"] == from_file.data["returned"] == 2
    for loki_entry, file_entry in zip(from_loki.data["entries"], from_file.data["entries"], strict=True):
        assert loki_entry.keys() == file_entry.keys()
        core = ("ts", "service", "level", "message")
        assert [loki_entry[key] for key in core] == [file_entry[key] for key in core]
        assert loki_entry["labels"]["pod"] == file_entry["labels"]["pod"]
