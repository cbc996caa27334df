"""A local stand-in for Elasticsearch/OpenSearch's `_search` API, for adapter tests.

No server can be installed here. The stand-in holds documents in named indices and answers
`POST /<index>/_search` as the Elasticsearch reference documents it. It parses the request strictly,
as the server does: an unknown body key or query clause is a 400 `parsing_exception`, an unknown
URL parameter a 400 `illegal_argument_exception`, a `terms` aggregation on a `text` field a 400
(fielddata is disabled on text fields), a concrete index that does not exist a 404
`index_not_found_exception` (a pattern matching none answers no hits). It runs the query DSL the
adapter sends: `bool` (`filter`, `must`, `must_not`), `range` on a date (`gte`/`lte`/`gt`/`lt`),
`term` and `terms` (exact on `keyword` fields, one token on `text` fields), `match_phrase` (the
standard analyzer's lower-cased word tokens, consecutive), `match_all`; `post_filter` (hits only);
`sort` on a date; `_source` includes; and the `terms`, `filter` and `missing` aggregations. It
answers `took`, `timed_out`, `_shards`, `hits.total` as `{value, relation}` (counted exactly up to
10,000, then `gte`), `hits.hits` (`_index`, `_id`, `_score`, `_source`, `sort` in epoch
milliseconds) and `aggregations`. A dotted field name is read from `_source` as a key as written
or as a path through objects, as Elasticsearch resolves both. With `authorization` set it answers
401 `security_exception` to any request without exactly that header.
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections import Counter
from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import Any, Literal

import pytest

from tests.support.http_stub import RecordedRequest, StubHandler, StubServer, running

FieldType = Literal["keyword", "text", "date"]
TRACK_TOTAL_HITS = 10_000
_URL_PARAMETERS = frozenset(
    {"allow_partial_search_results", "ignore_unavailable", "typed_keys", "track_total_hits"}
)
_BODY_KEYS = frozenset(
    {
        "size",
        "from",
        "query",
        "post_filter",
        "aggs",
        "aggregations",
        "sort",
        "_source",
        "track_total_hits",
        "timeout",
    }
)
_DATE_FORMATS = frozenset(
    {"strict_date_optional_time_nanos", "strict_date_optional_time", "date_optional_time"}
)
_ISO = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d{1,9}))?)?)?(Z|[+-]\d{2}:?\d{2})?"
)
_WORD = re.compile(r"\w+")


class SearchError(Exception):
    """An error answer, in Elasticsearch's error body shape."""

    def __init__(self, status: int, kind: str, reason: str) -> None:
        super().__init__(reason)
        self.status, self.kind, self.reason = status, kind, reason

    def body(self) -> bytes:
        cause = {"type": self.kind, "reason": self.reason}
        return json.dumps({"error": {"root_cause": [cause], **cause}, "status": self.status}).encode()


class ElasticsearchServer(StubServer):
    """Indices of documents (`_source` objects), searched as Elasticsearch searches them."""

    name = "elasticsearch-stub"

    def __init__(self, mapping: Mapping[str, FieldType] | None = None) -> None:
        super().__init__()
        self.indices: dict[str, list[dict[str, Any]]] = {}
        # Unmapped fields are keyword, as ECS maps service.name and log.level.
        self.mapping: dict[str, FieldType] = {"@timestamp": "date", "message": "text", **(mapping or {})}
        self.authorization: str | None = None

    def add(self, index: str, documents: list[dict[str, Any]]) -> None:
        self.indices.setdefault(index, []).extend(documents)

    def reply_endless(self) -> None:
        """A search response whose one message never ends (chunked, 64 KiB at a time)."""
        self.reply_stream(_endless_response, None)

    def answer_normally(self, handler: StubHandler, request: RecordedRequest) -> None:
        if self.authorization is not None and request.headers.get("authorization") != self.authorization:
            error = SearchError(
                401, "security_exception", "missing authentication credentials for REST request"
            )
            handler.send_body(
                401, error.body(), "application/json", {"WWW-Authenticate": 'Basic realm="security"'}
            )
            return
        try:
            answer = self.search(request)
        except SearchError as error:
            handler.send_body(error.status, error.body(), "application/json")
            return
        handler.send_body(200, json.dumps(answer).encode(), "application/json")

    # --- the search ------------------------------------------------------------------------------

    def search(self, request: RecordedRequest) -> dict[str, Any]:
        match = re.fullmatch(r"/([^/]+)/_search", request.path)
        if match is None or request.method not in ("GET", "POST"):
            raise SearchError(400, "illegal_argument_exception", "no handler found for uri")
        for parameter in request.params:
            if parameter not in _URL_PARAMETERS:
                raise SearchError(
                    400,
                    "illegal_argument_exception",
                    f"request contains unrecognized parameter: [{parameter}]",
                )
        try:
            body = json.loads(request.body or b"{}")
        except ValueError:
            raise SearchError(400, "x_content_parse_exception", "Failed to parse the request body") from None
        if not isinstance(body, dict):
            raise SearchError(400, "parsing_exception", "Expected [START_OBJECT]")
        for key in body:
            if key not in _BODY_KEYS:
                raise SearchError(400, "parsing_exception", f"Unknown key for a START_OBJECT in [{key}].")
        documents = list(self._resolve(match.group(1)))
        scoped = [
            (index, number, doc)
            for index, number, doc in documents
            if self._matches(doc, body.get("query", {"match_all": {}}))
        ]
        hits = [item for item in scoped if self._matches(item[2], body.get("post_filter", {"match_all": {}}))]
        sort_field = self._sort_field(body.get("sort"))
        if sort_field is not None:
            hits.sort(key=lambda item: _date_ns(_value(item[2], sort_field)) or 0, reverse=True)
        size = body.get("size", 10)
        if not isinstance(size, int) or size < 0:
            raise SearchError(400, "parsing_exception", "[size] must be a non-negative integer")
        includes = body.get("_source")
        aggregations = body.get("aggs", body.get("aggregations", {}))
        return {
            "took": 1,
            "timed_out": False,
            "_shards": {"total": 1, "successful": 1, "skipped": 0, "failed": 0},
            "hits": {
                "total": {
                    "value": min(len(hits), TRACK_TOTAL_HITS),
                    "relation": "eq" if len(hits) <= TRACK_TOTAL_HITS else "gte",
                },
                "max_score": None,
                "hits": [
                    self._hit(index, number, doc, includes, sort_field) for index, number, doc in hits[:size]
                ],
            },
            "aggregations": self._aggregate(aggregations, [doc for _, _, doc in scoped]),
        }

    def _resolve(self, expression: str) -> Iterator[tuple[str, int, dict[str, Any]]]:
        chosen: set[str] = set()
        for part in expression.split(","):
            excluded = part.startswith("-")
            pattern = part.lstrip("-")
            names = {name for name in self.indices if fnmatch.fnmatchcase(name, pattern)}
            if not names and not excluded and "*" not in pattern:
                raise SearchError(404, "index_not_found_exception", f"no such index [{pattern}]")
            chosen = chosen - names if excluded else chosen | names
        for name in sorted(chosen):
            for number, doc in enumerate(self.indices[name]):
                yield name, number, doc

    def _matches(self, doc: dict[str, Any], clause: Any) -> bool:
        if not isinstance(clause, dict) or len(clause) != 1:
            raise SearchError(400, "parsing_exception", "query malformed, must start with start_object")
        ((kind, spec),) = clause.items()
        if kind == "match_all":
            return True
        if kind == "bool":
            return self._bool(doc, spec)
        if not isinstance(spec, dict) or len(spec) != 1:
            raise SearchError(400, "parsing_exception", f"[{kind}] query malformed")
        ((field, condition),) = spec.items()
        value = _value(doc, field)
        if kind == "range":
            return self._range(value, field, condition)
        if kind == "term":
            wanted = condition.get("value") if isinstance(condition, dict) else condition
            return self._term(value, field, wanted)
        if kind == "terms":
            if not isinstance(condition, list):
                raise SearchError(400, "parsing_exception", "[terms] query does not support [field]")
            return any(self._term(value, field, wanted) for wanted in condition)
        if kind == "match_phrase":
            query = condition.get("query") if isinstance(condition, dict) else condition
            if not isinstance(query, str):
                raise SearchError(400, "parsing_exception", "[match_phrase] requires query value")
            return self._phrase(value, field, query)
        raise SearchError(400, "parsing_exception", f"unknown query [{kind}]")

    def _bool(self, doc: dict[str, Any], spec: Any) -> bool:
        if not isinstance(spec, dict):
            raise SearchError(400, "parsing_exception", "[bool] malformed query")
        for key in spec:
            if key not in ("filter", "must", "must_not"):
                raise SearchError(400, "parsing_exception", f"[bool] query does not support [{key}]")

        def clauses(key: str) -> list[Any]:
            found = spec.get(key, [])
            return found if isinstance(found, list) else [found]

        return all(self._matches(doc, clause) for clause in clauses("filter") + clauses("must")) and not any(
            self._matches(doc, clause) for clause in clauses("must_not")
        )

    def _range(self, value: Any, field: str, condition: Any) -> bool:
        if not isinstance(condition, dict) or not set(condition) <= {"gte", "lte", "gt", "lt", "format"}:
            raise SearchError(400, "parsing_exception", "[range] query malformed")
        if self.mapping.get(field) != "date":
            raise SearchError(400, "illegal_argument_exception", f"field [{field}] is not a date")
        if condition.get("format", "strict_date_optional_time") not in _DATE_FORMATS:
            raise SearchError(400, "illegal_argument_exception", "Invalid format")
        instant = _date_ns(value)
        if instant is None:
            return False
        bounds: dict[str, int] = {}
        for key in ("gte", "lte", "gt", "lt"):
            if key in condition:
                bound = _date_ns(condition[key])
                if bound is None:
                    raise SearchError(400, "parse_exception", "failed to parse date field")
                bounds[key] = bound
        return (
            instant >= bounds.get("gte", instant)
            and instant <= bounds.get("lte", instant)
            and instant > bounds.get("gt", instant - 1)
            and instant < bounds.get("lt", instant + 1)
        )

    def _term(self, value: Any, field: str, wanted: Any) -> bool:
        values = value if isinstance(value, list) else [value]
        if self.mapping.get(field) == "text":
            return any(isinstance(item, str) and str(wanted) in _tokens(item) for item in values)
        return any(item is not None and item == wanted for item in values)

    def _phrase(self, value: Any, field: str, query: str) -> bool:
        wanted = _tokens(query)
        if not wanted:  # `zero_terms_query: none`, the default: no token, no document
            return False
        values = value if isinstance(value, list) else [value]
        for item in values:
            if not isinstance(item, str):
                continue
            if self.mapping.get(field, "keyword") != "text":
                if item == query:
                    return True
                continue
            tokens = _tokens(item)
            if any(
                tokens[start : start + len(wanted)] == wanted
                for start in range(len(tokens) - len(wanted) + 1)
            ):
                return True
        return False

    def _sort_field(self, sort: Any) -> str | None:
        if sort is None:
            return None
        if not (
            isinstance(sort, list) and len(sort) == 1 and isinstance(sort[0], dict) and len(sort[0]) == 1
        ):
            raise SearchError(400, "parsing_exception", "malformed sort")
        ((field, spec),) = sort[0].items()
        if (
            not isinstance(spec, dict)
            or spec.get("order") != "desc"
            or not set(spec) <= {"order", "unmapped_type", "format"}
        ):
            raise SearchError(400, "parsing_exception", "malformed sort")
        return str(field)

    def _hit(
        self, index: str, number: int, doc: dict[str, Any], includes: Any, sort_field: str | None
    ) -> dict[str, Any]:
        hit: dict[str, Any] = {
            "_index": index,
            "_id": f"{index}-{number}",
            "_score": None,
            "_source": _pick(doc, includes),
        }
        if sort_field is not None:
            instant = _date_ns(_value(doc, sort_field))
            hit["sort"] = [instant // 1_000_000 if instant is not None else -(2**63)]
        return hit

    def _aggregate(self, aggregations: Any, docs: list[dict[str, Any]]) -> dict[str, Any]:
        if not isinstance(aggregations, dict):
            raise SearchError(400, "parsing_exception", "malformed aggregations")
        answers: dict[str, Any] = {}
        for name, spec in aggregations.items():
            if not isinstance(spec, dict):
                raise SearchError(400, "parsing_exception", f"[{name}] malformed aggregation")
            kinds = [key for key in spec if key != "aggs"]
            if len(kinds) != 1:
                raise SearchError(400, "parsing_exception", f"[{name}] needs exactly one aggregation type")
            kind = kinds[0]
            if kind == "terms":
                field, size = spec[kind].get("field"), spec[kind].get("size", 10)
                if self.mapping.get(field) == "text":
                    raise SearchError(
                        400,
                        "illegal_argument_exception",
                        "Text fields are not optimised for operations that require per-document field data",
                    )
                counts = Counter(value for doc in docs if isinstance(value := _value(doc, field), str))
                buckets = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
                answers[name] = {
                    "doc_count_error_upper_bound": 0,
                    "sum_other_doc_count": sum(count for _, count in buckets[size:]),
                    "buckets": [{"key": key, "doc_count": count} for key, count in buckets[:size]],
                }
            elif kind == "filter":
                inside = [doc for doc in docs if self._matches(doc, spec[kind])]
                answers[name] = {"doc_count": len(inside), **self._aggregate(spec.get("aggs", {}), inside)}
            elif kind == "missing":
                field = spec[kind].get("field")
                inside = [doc for doc in docs if _value(doc, field) in (None, [])]
                answers[name] = {"doc_count": len(inside), **self._aggregate(spec.get("aggs", {}), inside)}
            else:
                raise SearchError(400, "parsing_exception", f"Unknown aggregation type [{kind}]")
        return answers


def _endless_response() -> Iterator[bytes]:
    yield b'{"took":1,"timed_out":false,"hits":{"total":{"value":1,"relation":"eq"},'
    yield b'"hits":[{"_source":{"message":"'
    while True:
        yield b"x" * 65536


def _value(doc: Mapping[str, Any], field: str) -> Any:
    """A dotted field: a key as written, else a path through objects."""
    if field in doc:
        return doc[field]
    value: Any = doc
    for part in field.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def _pick(doc: dict[str, Any], includes: Any) -> dict[str, Any]:
    """`_source` filtering by field names (either spelling of a dotted name)."""
    if includes is None or includes is True:
        return doc
    if not isinstance(includes, list):
        raise SearchError(400, "parsing_exception", "[_source] must be a list of fields")
    picked: dict[str, Any] = {}
    for key, value in doc.items():
        wanted = [name for name in includes if name == key or name.startswith(key + ".")]
        if not wanted:
            continue
        if any(name == key for name in wanted) or not isinstance(value, dict):
            picked[key] = value
        else:
            inner = _pick(value, [name[len(key) + 1 :] for name in wanted])
            if inner:
                picked[key] = inner
    return picked


def _tokens(text: str) -> list[str]:
    return [token.lower() for token in _WORD.findall(text)]


def _date_ns(value: Any) -> int | None:
    """A date as Elasticsearch's default format reads it: ISO (UTC without an offset) or epoch millis."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value * 1_000_000
    if not isinstance(value, str):
        return None
    match = _ISO.fullmatch(value)
    if match is None:
        return None
    year, month, day, hour, minute, second, fraction, zone = match.groups()
    moment = datetime.fromisoformat(
        f"{year}-{month}-{day}T{hour or '00'}:{minute or '00'}:{second or '00'}+00:00"
    )
    ns = int(moment.timestamp()) * 1_000_000_000 + int((fraction or "0").ljust(9, "0"))
    if zone and zone != "Z":
        sign = 1 if zone[0] == "+" else -1
        digits = zone[1:].replace(":", "")
        ns -= sign * (int(digits[:2]) * 3600 + int(digits[2:]) * 60) * 1_000_000_000
    return ns


def nested(document: Mapping[str, Any]) -> dict[str, Any]:
    """Dotted keys as the nested objects a shipper sends (`log.level` -> `{"log": {"level": ...}}`)."""
    result: dict[str, Any] = {}
    for key, value in document.items():
        target = result
        *parents, last = key.split(".")
        for part in parents:
            target = target.setdefault(part, {})
        target[last] = value
    return result


@pytest.fixture(name="elasticsearch")
def elasticsearch_server_fixture() -> Iterator[ElasticsearchServer]:
    """A started stand-in on an ephemeral 127.0.0.1 port, stopped (and any hang released) afterwards."""
    with running(ElasticsearchServer()) as server:
        yield server
