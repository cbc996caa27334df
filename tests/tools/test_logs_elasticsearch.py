"""query_logs over Elasticsearch / OpenSearch (`[logs] source = "elasticsearch"`).

No Elasticsearch or OpenSearch server can be installed here: every test runs against a local HTTP
server on 127.0.0.1 that answers `_search` exactly as the Elasticsearch reference documents it
(tests/support/elasticsearch.py: strict request parsing, the query DSL the adapter sends, the
documented response shapes). The indexed documents are real: the events Filebeat's nginx, Apache,
Elasticsearch and system modules index for their test logs (tests/data/logs/SOURCES.md), counted
by hand. Hostile answers (endless bodies, huge totals, wrong types, redirects) come from the same
server told to misbehave.
"""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.evidence import build_adapters
from agent.settings import ConfigError, load_settings
from tests.support.elasticsearch import ElasticsearchServer, elasticsearch_server_fixture, nested  # noqa: F401
from tests.support.http_stub import StubServer, running
from tools.adapter import AdapterResult, ToolError, ToolRequest
from tools.definitions import ToolName
from tools.input_models import QueryLogsInput
from tools.logs.elasticsearch_source import ElasticsearchLogAdapter, check_index, level_spellings
from tools.logs.severity import Severity
from tools.vocabulary import EvidenceStatus

EVENTS = Path(__file__).resolve().parents[1] / "data" / "logs" / "filebeat-index"
# Every indexed event lies in this window (2011-09-09 to 2020-04-14).
ALL_START, ALL_END = "2011-01-01T00:00:00Z", "2021-01-01T00:00:00Z"
BY_MODULE = {"service": "service.type"}


def events(name: str) -> list[dict[str, Any]]:
    loaded: list[dict[str, Any]] = json.loads((EVENTS / name).read_text(encoding="utf-8"))
    return loaded


@pytest.fixture
def indexed(elasticsearch: ElasticsearchServer) -> ElasticsearchServer:
    """The four modules' events, as Filebeat sends them (nested objects), one index per module."""
    for module in ("nginx-error", "apache-error", "elasticsearch-server", "system-auth"):
        elasticsearch.add(f"filebeat-{module}", [nested(event) for event in events(f"{module}.json")])
    return elasticsearch


@pytest.fixture
async def make(elasticsearch: ElasticsearchServer) -> AsyncIterator[Callable[..., ElasticsearchLogAdapter]]:
    made: list[ElasticsearchLogAdapter] = []

    def build(**overrides: Any) -> ElasticsearchLogAdapter:
        overrides.setdefault("index", "filebeat-*")
        overrides.setdefault("connect_timeout_s", 1.0)
        overrides.setdefault("deadline_s", 5.0)
        overrides.setdefault("max_window_minutes", 10 * 365 * 24 * 60)
        adapter = ElasticsearchLogAdapter(overrides.pop("base_url", elasticsearch.url), **overrides)
        made.append(adapter)
        return adapter

    yield build
    for adapter in made:
        await adapter.aclose()


async def query(adapter: ElasticsearchLogAdapter, **fields: Any) -> AdapterResult:
    fields.setdefault("start", ALL_START)
    fields.setdefault("end", ALL_END)
    return await adapter.execute(
        ToolRequest("run-1", "session-1", "call-1", "query_logs", QueryLogsInput(**fields))
    )


async def failure(adapter: ElasticsearchLogAdapter, **fields: Any) -> ToolError:
    with pytest.raises(ToolError) as caught:
        await query(adapter, **fields)
    return caught.value


def sent(server: StubServer) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(server.requests[-1].body)
    return body


# --- answers on real documents ---------------------------------------------------------------------


async def test_ecs_field_names_by_default(
    indexed: ElasticsearchServer, make: Callable[..., ElasticsearchLogAdapter]
) -> None:
    """service.name is set only on the three Elasticsearch server events (`ES_ECS`)."""
    result = await query(make(), service="ES_ECS", start="2020-04-14T00:00:00Z", end="2020-04-15T00:00:00Z")

    assert [(entry["ts"], entry["level"], entry["message"]) for entry in result.data["entries"]] == [
        ("2020-04-14T20:57:49.772Z", "INFO", "update_mapping [_doc]"),
        (
            "2020-04-14T20:57:49.663Z",
            "INFO",
            "creating index, cause [auto(bulk api)], templates [test-filebeat-modules], shards [1]/[1], "
            "mappings [_doc]",
        ),
        (
            "2020-04-14T14:05:58.019Z",
            "INFO",
            "adding template [.management-beats] for index patterns [.management-beats]",
        ),
    ]
    assert result.data["entries"][0]["labels"] == {
        "log.logger": "org.elasticsearch.cluster.metadata.MetadataMappingService",
        "event.dataset": "elasticsearch.server",
        "_index": "filebeat-elasticsearch-server",
    }
    request = indexed.requests[-1]
    assert (request.method, request.path, request.params) == (
        "POST",
        "/filebeat-*/_search",
        {"allow_partial_search_results": "false"},
    )
    body = sent(indexed)
    assert body["query"] == {
        "bool": {
            "filter": [
                {
                    "range": {
                        "@timestamp": {
                            "gte": "2020-04-14T00:00:00Z",
                            "lte": "2020-04-15T00:00:00.999999Z",  # an end on a whole second covers it
                            "format": "strict_date_optional_time_nanos",
                        }
                    }
                }
            ]
        }
    }
    assert body["post_filter"] == {"bool": {"filter": [{"term": {"service.name": {"value": "ES_ECS"}}}]}}
    assert body["sort"] == [{"@timestamp": {"order": "desc", "unmapped_type": "date"}}]


async def test_a_renamed_service_field_and_level_means_this_severity_or_worse(
    indexed: ElasticsearchServer, make: Callable[..., ElasticsearchLogAdapter]
) -> None:
    """Apache: two `error`, one `warn`, one `notice` (INFO)."""
    adapter = make(fields=BY_MODULE)

    errors = await query(adapter, service="apache", level="ERROR")
    warnings = await query(adapter, service="apache", level="WARN")

    assert [(entry["ts"], entry["message"]) for entry in errors.data["entries"]] == [
        ("2016-12-26T18:22:08Z", "File does not exist: /var/www/favicon.ico"),
        ("2011-09-09T12:42:29.902Z", "File does not exist: /usr/local/apache2/htdocs/favicon.ico"),
    ]
    assert (errors.data["matched"], errors.data["without_level"]) == (2, 0)
    assert [entry["level"] for entry in warnings.data["entries"]] == ["WARN", "ERROR", "ERROR"]
    (level_filter,) = [f for f in sent(indexed)["post_filter"]["bool"]["filter"] if "terms" in f]
    spellings = level_filter["terms"]["log.level"]
    assert {"warn", "WARN", "Warning", "error", "ERROR", "fatal", "CRITICAL", "severe"} <= set(spellings)
    assert not {"info", "INFO", "notice", "debug"} & set(spellings)


async def test_records_without_a_level_are_counted_not_hidden(
    indexed: ElasticsearchServer, make: Callable[..., ElasticsearchLogAdapter]
) -> None:
    """The two system/auth events (sudo, pam) carry no log.level."""
    adapter = make(fields=BY_MODULE)

    filtered = await query(adapter, service="system", level="ERROR")
    unfiltered = await query(adapter, service="system")

    assert filtered.status == EvidenceStatus.EMPTY
    assert (filtered.data["matched"], filtered.data["without_level"]) == (0, 2)
    assert [entry["level"] for entry in unfiltered.data["entries"]] == [None, None]


@pytest.mark.parametrize(
    ("service", "contains", "matched"),
    [
        ("apache", "FAVICON.ICO", 2),
        ("apache", "file does not exist", 2),
        ("nginx", "favicon.ico", 1),
        ("nginx", "php warning", 1),
        ("nginx", "Declaration of FEE_Field_Tags", 1),  # only on the second line of a multi-line message
        ("nginx", "exist no such", 0),  # words out of order are no phrase
        ("apache", ": /", 0),  # punctuation only: the analyzer leaves no token, so no document
    ],
)
async def test_contains_is_a_case_insensitive_phrase(
    indexed: ElasticsearchServer,
    make: Callable[..., ElasticsearchLogAdapter],
    service: str,
    contains: str,
    matched: int,
) -> None:
    result = await query(make(fields=BY_MODULE), service=service, contains=contains)

    assert result.data["matched"] == matched
    assert {"match_phrase": {"message": {"query": contains}}} in sent(indexed)["post_filter"]["bool"][
        "filter"
    ]


async def test_a_multi_line_message_shows_its_first_lines_and_says_it_was_cut(
    indexed: ElasticsearchServer, make: Callable[..., ElasticsearchLogAdapter]
) -> None:
    result = await query(make(fields=BY_MODULE, message_chars=300), service="nginx", contains="FastCGI")

    (entry,) = result.data["entries"]
    assert entry["message"].startswith(
        'FastCGI sent in stderr: "PHP message: PHP Warning:  Declaration of FEE_Field_Terms'
    )
    assert entry["cut"] is True


async def test_a_misspelt_service_is_told_which_services_exist_in_the_window(
    indexed: ElasticsearchServer, make: Callable[..., ElasticsearchLogAdapter]
) -> None:
    result = await query(make(fields=BY_MODULE), service="apach")

    assert result.status == EvidenceStatus.EMPTY
    assert result.data["services_in_window"] == ["apache", "nginx", "elasticsearch", "system"]


async def test_a_full_page_says_how_many_matched(
    indexed: ElasticsearchServer, make: Callable[..., ElasticsearchLogAdapter]
) -> None:
    result = await query(make(fields=BY_MODULE), service="apache", limit=1)

    assert (result.data["returned"], result.data["matched"], result.data["truncated"]) == (1, 4, True)
    assert result.data["entries"][0]["ts"] == "2019-06-27T08:58:09.169Z"
    assert sent(indexed)["size"] == 1


async def test_documents_with_dotted_keys_as_written_answer_the_same(
    elasticsearch: ElasticsearchServer, make: Callable[..., ElasticsearchLogAdapter]
) -> None:
    """ecs-logging and Filebeat's ndjson parser may index `log.level` as a key: both spellings work."""
    elasticsearch.add("filebeat-apache-error", events("apache-error.json"))

    result = await query(make(fields=BY_MODULE), service="apache", level="ERROR")

    assert result.data["matched"] == 2
    assert [entry["level"] for entry in result.data["entries"]] == ["ERROR", "ERROR"]


async def test_a_lower_bound_total_is_marked_truncated(
    elasticsearch: ElasticsearchServer, make: Callable[..., ElasticsearchLogAdapter]
) -> None:
    """Beyond the server's default of 10,000 tracked hits, `hits.total` is a lower bound (`gte`)."""
    elasticsearch.reply_raw(
        json.dumps(
            {
                "took": 5,
                "timed_out": False,
                "_shards": {"total": 1, "successful": 1, "skipped": 0, "failed": 0},
                "hits": {
                    "total": {"value": 10000, "relation": "gte"},
                    "max_score": None,
                    "hits": [
                        {
                            "_index": "logs-app",
                            "_id": "1",
                            "_score": None,
                            "_source": {
                                "@timestamp": "2020-01-01T00:00:00Z",
                                "message": "boom",
                                "log": {"level": "error"},
                            },
                            "sort": [1577836800000],
                        }
                    ],
                },
                "aggregations": {
                    "services": {"doc_count_error_upper_bound": 0, "sum_other_doc_count": 0, "buckets": []}
                },
            }
        ).encode()
    )

    result = await query(make(), service="app", limit=1)

    assert (result.data["matched"], result.data["truncated"]) == (10000, True)


async def test_the_api_key_goes_in_the_authorization_header(
    indexed: ElasticsearchServer, make: Callable[..., ElasticsearchLogAdapter]
) -> None:
    indexed.authorization = "ApiKey VnVhQ2ZHY0JDZGJrUW0tZTVhT3g6dWkybHAyYXhUTm1zeWFrdzl0dk5udw=="

    refused = await failure(make(), service="ES_ECS")
    answered = await query(make(headers={"Authorization": indexed.authorization}), service="ES_ECS")

    assert (refused.code, refused.reason) == ("UNAVAILABLE", "AUTH_REJECTED")
    assert answered.data["matched"] == 3


# --- the model's text is only ever a JSON string value ----------------------------------------------

# Any text the input model accepts: no C0 control or DEL; surrogates cannot be sent as JSON text.
_TEXT = st.characters(min_codepoint=32, exclude_characters="\x7f", exclude_categories=["Cs"])


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    service=st.text(_TEXT, min_size=1, max_size=60),
    contains=st.none() | st.text(_TEXT, min_size=1, max_size=60),
)
async def test_any_service_and_contains_stay_the_values_they_are(
    indexed: ElasticsearchServer,
    make: Callable[..., ElasticsearchLogAdapter],
    service: str,
    contains: str | None,
) -> None:
    result = await query(make(fields=BY_MODULE), service=service, contains=contains, level="WARN")

    filters = sent(indexed)["post_filter"]["bool"]["filter"]
    assert filters[0] == {"term": {"service.type": {"value": service}}}
    if contains is not None:
        assert filters[1] == {"match_phrase": {"message": {"query": contains}}}
    assert result.status in (EvidenceStatus.FOUND, EvidenceStatus.EMPTY)


@pytest.mark.parametrize(
    "index",
    ["logs-*", "filebeat-*,-filebeat-system-auth", "remote:logs-*", ".ds-logs-app-default", "logs-app"],
)
def test_index_patterns_elasticsearch_accepts(index: str) -> None:
    assert check_index(index) == index


@pytest.mark.parametrize(
    "index", ["../_all", "logs/_doc", "LOGS", "a b", "logs?x", "logs#x", "", ".", "..", "_search"]
)
def test_an_index_that_could_leave_its_path_is_refused_at_wiring(index: str) -> None:
    with pytest.raises(ValueError, match="is not an Elasticsearch index name or pattern"):
        check_index(index)


def test_level_spellings_cover_every_case_a_keyword_field_holds() -> None:
    spellings = level_spellings(Severity.FATAL)

    assert {"fatal", "FATAL", "Fatal", "critical", "CRIT", "emerg", "Alert", "panic"} <= set(spellings)
    assert "error" not in spellings


# --- a hostile or broken server ---------------------------------------------------------------------

BACKEND_TEXT = "parse error at 10.42.0.7:9200 index=acme-internal"


@pytest.mark.parametrize(
    ("misbehave", "code", "reason"),
    [
        (lambda es: es.reply_status(500, BACKEND_TEXT.encode()), "UNAVAILABLE", None),
        (lambda es: es.reply_status(429, BACKEND_TEXT.encode()), "UNAVAILABLE", "RATE_LIMITED"),
        (lambda es: es.reply_status(400, BACKEND_TEXT.encode()), "BACKEND_ERROR", "BACKEND_REJECTED_QUERY"),
        (lambda es: es.reply_status(404, BACKEND_TEXT.encode()), "UNAVAILABLE", "INDEX_NOT_FOUND"),
        (lambda es: es.reply_raw(BACKEND_TEXT.encode()), "BACKEND_ERROR", None),
        (lambda es: es.reply_raw(b'{"hits": {"total": 1, "hits": "many"}}'), "BACKEND_ERROR", None),
        (
            lambda es: es.reply_raw(b'{"hits": {"total": "lots", "hits": []}, "aggregations": {}}'),
            "BACKEND_ERROR",
            None,
        ),
        (
            lambda es: es.reply_raw(b'{"hits": {"total": {"value": 1e400, "relation": "eq"}, "hits": []}}'),
            "BACKEND_ERROR",
            None,
        ),
        (
            lambda es: es.reply_raw(
                b'{"hits": {"total": {"value": ' + b"9" * 5000 + b', "relation": "eq"}, "hits": []}}'
            ),
            "BACKEND_ERROR",
            None,
        ),
        (
            lambda es: es.reply_raw(
                b'{"hits": {"total": {"value": 99999999999999999999, "relation": "eq"}, "hits": []},'
                b' "aggregations": {"services": {"buckets": []}}}'
            ),
            "BACKEND_ERROR",
            None,
        ),
        (
            lambda es: es.reply_raw(b'{"hits": {"total": 1, "hits": [{"_source": "x"}]}}'),
            "BACKEND_ERROR",
            None,
        ),
        (lambda es: es.reply_raw(b"[" * 100_000 + b"]" * 100_000), "BACKEND_ERROR", None),
        (lambda es: es.reply_raw(b'{"timed_out": true, "hits": {"total": 0, "hits": []}}'), "TIMEOUT", None),
        (
            lambda es: es.reply_raw(b'{"_shards": {"failed": 2}, "hits": {"total": 0, "hits": []}}'),
            "UNAVAILABLE",
            "PARTIAL_RESULTS",
        ),
        (lambda es: es.reply_raw(b"{}", {"Content-Encoding": "gzip"}), "BACKEND_ERROR", None),
        (lambda es: es.reply_endless(), "RESULT_TOO_LARGE", None),
    ],
    ids=[
        "500",
        "429",
        "400",
        "404",
        "not-json",
        "hits-not-a-list",
        "total-not-a-number",
        "total-infinite",
        "total-5000-digits",
        "total-past-int64",
        "source-not-an-object",
        "nested-100k-deep",
        "timed-out",
        "failed-shards",
        "gzip",
        "endless-body",
    ],
)
async def test_a_misbehaving_server_is_one_typed_error(
    elasticsearch: ElasticsearchServer,
    make: Callable[..., ElasticsearchLogAdapter],
    misbehave: Callable[[ElasticsearchServer], None],
    code: str,
    reason: str | None,
) -> None:
    misbehave(elasticsearch)

    error = await failure(make(), service="app")

    assert (error.code, error.reason) == (code, reason)
    assert BACKEND_TEXT not in str(error)
    assert BACKEND_TEXT not in repr(error.__cause__)
    assert len(elasticsearch.requests) == 1, "no retry"


async def test_an_endless_body_costs_no_more_memory_than_the_cap(
    elasticsearch: ElasticsearchServer, make: Callable[..., ElasticsearchLogAdapter]
) -> None:
    elasticsearch.reply_endless()
    adapter = make(max_body_bytes=2_000_000)

    tracemalloc.start()
    try:
        error = await failure(adapter, service="app")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert error.code == "RESULT_TOO_LARGE"
    assert peak < 8_000_000
    assert elasticsearch.bytes_sent < 40_000_000  # the server could hand over no more than the socket took


async def test_a_redirect_is_never_followed_so_credentials_stay_with_their_origin(
    elasticsearch: ElasticsearchServer, make: Callable[..., ElasticsearchLogAdapter]
) -> None:
    with running(ElasticsearchServer()) as elsewhere:
        elasticsearch.reply_redirect(f"{elsewhere.url}/logs-*/_search", status=307)

        error = await failure(make(headers={"Authorization": "ApiKey c2VjcmV0"}), service="app")

        assert (error.code, error.reason) == ("BACKEND_ERROR", None)
        assert elsewhere.requests == []


async def test_a_stalled_server_is_a_timeout_at_the_overall_deadline(
    elasticsearch: ElasticsearchServer, make: Callable[..., ElasticsearchLogAdapter]
) -> None:
    """The read timeout (5 s) would wait longer: the deadline (0.3 s) ends the exchange first."""
    elasticsearch.reply_hang(30)

    error = await failure(make(deadline_s=0.3), service="app")

    assert error.code == "TIMEOUT"
    assert elasticsearch.hangs_ended == 0  # the server was still hanging when the call ended


async def test_a_text_mapped_service_field_fails_loudly_instead_of_matching_nothing(
    make: Callable[..., ElasticsearchLogAdapter],
) -> None:
    """With `service.name` mapped as analyzed text, `term` would match no document and read as "no
    errors"; the services aggregation makes the server refuse the search instead."""
    with running(ElasticsearchServer({"service.name": "text"})) as server:
        server.add("logs-app", [nested(event) for event in events("elasticsearch-server.json")])

        error = await failure(make(base_url=server.url, index="logs-*"), service="ES_ECS")

    assert (error.code, error.reason) == ("BACKEND_ERROR", "BACKEND_REJECTED_QUERY")


# --- the configuration -------------------------------------------------------------------------------


async def test_the_configuration_wires_url_index_renamed_fields_and_credential(
    indexed: ElasticsearchServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DIAGNOSE_TEST_ES_KEY", "c2VjcmV0LWlkOnNlY3JldC1rZXk=")
    indexed.authorization = "ApiKey c2VjcmV0LWlkOnNlY3JldC1rZXk="
    logs = {
        "source": "elasticsearch",
        "url": indexed.url,
        "index": "filebeat-*",
        "api_key_env": "DIAGNOSE_TEST_ES_KEY",
    }
    settings = load_settings(overrides={"logs": {**logs, "fields": {"service": "service.type"}}})

    adapter = build_adapters(settings)[ToolName.QUERY_LOGS]
    assert isinstance(adapter, ElasticsearchLogAdapter)
    try:
        result = await query(
            adapter, service="apache", level="ERROR", start="2011-09-09T12:00:00Z", end="2011-09-09T13:00:00Z"
        )
    finally:
        await adapter.aclose()

    assert result.data["matched"] == 1  # File does not exist: /usr/local/apache2/htdocs/favicon.ico
    assert indexed.requests[-1].path == "/filebeat-*/_search"


@pytest.mark.parametrize(
    ("logs", "says"),
    [
        ({"source": "elasticsearch"}, "needs url"),
        (
            {"source": "elasticsearch", "url": "http://127.0.0.1:9", "index": "../_all"},
            "is not an Elasticsearch index",
        ),
        (
            {"source": "elasticsearch", "url": "http://127.0.0.1:9", "fields": {"level": "log.\nlevel"}},
            "is not a field name",
        ),
    ],
)
def test_a_configuration_elasticsearch_cannot_use_is_refused_at_wiring(
    logs: dict[str, Any], says: str
) -> None:
    with pytest.raises(ConfigError, match=says):
        build_adapters(load_settings(overrides={"logs": logs}))
