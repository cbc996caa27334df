"""query_logs on a hosted Loki and on Loki 3: credentials in the Authorization header, `detected_level`.

Tested against a local HTTP server on 127.0.0.1 that answers exactly like Loki's documented
`query_range` API (tests/support/loki.py); no real Loki is available. The answers' labels are the
ones Loki 3 documents: `detected_level` (trace, debug, info, warn, error, critical, fatal or
unknown) merged into the stream labels by default, or under `structuredMetadata` in the third element
of each value when categorised labels are asked for.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from tests.support.loki import LokiServer, loki_server_fixture  # noqa: F401 (fixture)
from tools.adapter import AdapterResult, ToolError, ToolRequest
from tools.boundary import ToolBoundary
from tools.input_models import QueryLogsInput
from tools.logs.logql import build_logql, build_unleveled_count
from tools.logs.loki_source import LokiLogAdapter

MATCHERS = {"checkout": '{service_name="checkout"}'}
AT = "1764470000000000000"  # 2025-11-30T02:33:20Z


@pytest.fixture
async def make(loki: LokiServer) -> AsyncIterator[Callable[..., LokiLogAdapter]]:
    made: list[LokiLogAdapter] = []

    def build(**overrides: Any) -> LokiLogAdapter:
        overrides.setdefault("connect_timeout_s", 1.0)
        overrides.setdefault("deadline_s", 5.0)
        adapter = LokiLogAdapter(loki.url, MATCHERS, **overrides)
        made.append(adapter)
        return adapter

    yield build
    for adapter in made:
        await adapter.aclose()


async def query(adapter: LokiLogAdapter, **fields: Any) -> AdapterResult:
    fields.setdefault("service", "checkout")
    fields.setdefault("start", "2025-11-30T02:00:00Z")
    fields.setdefault("end", "2025-11-30T03:00:00Z")
    return await adapter.execute(
        ToolRequest("run-1", "session-1", "call-1", "query_logs", QueryLogsInput(**fields))
    )


def test_without_a_level_label_a_line_passes_on_its_written_or_detected_level() -> None:
    query_text = build_logql(MATCHERS, "checkout", "FATAL", None)

    pattern = '"(?i)(alert|crit|critical|dpanic|emerg|emergency|fatal|panic)"'
    assert query_text == f'{{service_name="checkout"}} | level=~{pattern} or detected_level=~{pattern}'


def test_a_configured_level_label_is_the_only_one_filtered() -> None:
    assert build_logql(MATCHERS, "checkout", "FATAL", None, level_label="severity").count("=~") == 1


@pytest.mark.parametrize(
    ("labels", "level", "inferred"),
    [
        ({"detected_level": "error"}, "ERROR", True),
        ({"detected_level": "critical"}, "FATAL", True),
        ({"level": "WARNING", "detected_level": "error"}, "WARN", False),  # what was written wins
        ({"detected_level": "unknown"}, None, False),
        ({}, None, False),
    ],
)
async def test_detected_level_is_the_severity_when_none_was_written(
    loki: LokiServer,
    make: Callable[..., LokiLogAdapter],
    labels: dict[str, str],
    level: str | None,
    inferred: bool,
) -> None:
    loki.streams = [{"stream": {"service_name": "checkout", **labels}, "values": [[AT, "payment declined"]]}]

    (entry,) = (await query(make())).data["entries"]

    assert entry["level"] == level
    assert entry.get("level_inferred", False) is inferred


async def test_detected_level_in_categorised_structured_metadata(
    loki: LokiServer, make: Callable[..., LokiLogAdapter]
) -> None:
    loki.streams = [
        {
            "stream": {"service_name": "checkout"},
            "values": [[AT, "retrying", {"structuredMetadata": {"detected_level": "warn"}, "parsed": {}}]],
        }
    ]

    (entry,) = (await query(make())).data["entries"]

    assert (entry["level"], entry["level_inferred"]) == ("WARN", True)


@pytest.mark.parametrize(
    "authorization", ["Bearer glc_eyJvIjoiMTIzNDU2In0=", "Basic MTIzNDU2OmdsY19leUp2SWpvaU1USXpORFUySW4wPQ=="]
)
async def test_a_hosted_lokis_credentials_go_in_the_authorization_header(
    loki: LokiServer, make: Callable[..., LokiLogAdapter], authorization: str
) -> None:
    await query(make(headers={"Authorization": authorization}, tenant="123456"))

    (sent,) = loki.requests
    assert (sent.headers["authorization"], sent.headers["x-scope-orgid"]) == (authorization, "123456")


async def test_a_stalled_loki_is_a_timeout_at_the_overall_deadline(
    loki: LokiServer, make: Callable[..., LokiLogAdapter]
) -> None:
    """The read timeout (5 s) would wait longer: the deadline (0.3 s) ends the exchange first."""
    loki.reply_hang(30)

    with pytest.raises(ToolError) as caught:
        await query(make(deadline_s=0.3))

    assert caught.value.code == "TIMEOUT"
    assert loki.hangs_ended == 0  # the server was still hanging when the call ended


async def test_an_auth_rejection_is_never_followed_elsewhere(
    loki: LokiServer, make: Callable[..., LokiLogAdapter]
) -> None:
    loki.reply_redirect("http://login.example.invalid/oauth", status=302)

    with pytest.raises(ToolError) as caught:
        await query(make(headers={"Authorization": "Bearer glc_secret"}))

    assert caught.value.code == "BACKEND_ERROR"
    assert len(loki.requests) == 1


# --- a level filter never silently hides the lines without a level ----------------------------------


def test_the_lines_without_a_level_are_counted_by_one_metric_query() -> None:
    query_text = build_unleveled_count(MATCHERS, "checkout", "Declined", None, 3_600_001)

    assert query_text == (
        'sum(count_over_time({service_name="checkout"} |~ "(?i)Declined"'
        ' | level="" | detected_level=~"(?i)(unknown)?" [3600001ms]))'
    )
    assert build_unleveled_count(MATCHERS, "checkout", None, "severity", 1).endswith('| severity="" [1ms]))')


async def test_a_level_filter_says_how_many_lines_it_could_not_judge(
    loki: LokiServer, make: Callable[..., LokiLogAdapter]
) -> None:
    loki.streams = [{"stream": {"detected_level": "error"}, "values": [[AT, "payment declined"]]}]
    loki.count = 17

    result = await query(make(), level="ERROR")

    assert (result.data["returned"], result.data["without_level"]) == (1, 17)
    ranged, counted = loki.requests
    assert (ranged.path, counted.path) == ("/loki/api/v1/query_range", "/loki/api/v1/query")
    assert counted.params == {
        "query": build_unleveled_count(MATCHERS, "checkout", None, None, 3_600_001),
        "time": "1764471600000000000",  # the window's end, 2025-11-30T03:00:00Z; its range reaches the start
    }


async def test_without_a_level_filter_nothing_is_counted(
    loki: LokiServer, make: Callable[..., LokiLogAdapter]
) -> None:
    result = await query(make())

    assert "without_level" not in result.data
    assert len(loki.requests) == 1


async def test_a_count_loki_refuses_leaves_the_evidence_and_says_nothing_it_does_not_know(
    loki: LokiServer, make: Callable[..., LokiLogAdapter], caplog: pytest.LogCaptureFixture
) -> None:
    loki.streams = [{"stream": {"level": "error"}, "values": [[AT, "payment declined"]]}]
    loki.count_status = 400

    result = await query(make(), level="ERROR")

    assert result.data["returned"] == 1
    assert "without_level" not in result.data
    assert "did not count the lines without a level (INVALID_INPUT)" in caplog.text
    assert "parse error" not in caplog.text


async def test_a_count_that_stalls_ends_before_the_evidence_is_lost(
    loki: LokiServer, make: Callable[..., LokiLogAdapter], caplog: pytest.LogCaptureFixture
) -> None:
    """Only the instant query hangs: it gets a quarter of the deadline, so the call still answers
    with what `query_range` found instead of running into the tool's time limit."""
    loki.streams = [{"stream": {"level": "error"}, "values": [[AT, "payment declined"]]}]
    loki.count_hang_s = 30

    boundary = ToolBoundary(
        {"query_logs": make(deadline_s=1.2)}, timeout_s=1.0
    )  # the tool's limit, shortened

    outcome = await boundary.invoke(
        ToolRequest(
            "run-1",
            "session-1",
            "call-1",
            "query_logs",
            QueryLogsInput(
                service="checkout", start="2025-11-30T02:00:00Z", end="2025-11-30T03:00:00Z", level="ERROR"
            ),
        )
    )

    assert outcome.status == "FOUND", outcome  # a full deadline for the count would have hit the limit
    assert outcome.data is not None
    assert outcome.data["returned"] == 1
    assert "without_level" not in outcome.data
    assert "did not count the lines without a level (TIMEOUT)" in caplog.text
    assert loki.hangs_ended == 0  # the count was still hanging when the call answered
