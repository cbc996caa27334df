"""query_logs over Elasticsearch or OpenSearch (`[logs] source = "elasticsearch"`): one `_search`.

The model never writes a query: the adapter builds the search body from the structured input, and
the model's text only ever lands in JSON string values (the service in a `term`, `contains` in a
`match_phrase`). One request answers everything the projection needs:

- `query`: the window, a `range` on the time field (both ends included);
- `post_filter`: the service (`term`, exact), `contains` (`match_phrase` on the message field) and
  the level (`terms` of every spelling at or above it, in lower, upper and title case);
- `aggs`: the services in the window (so a misspelt service is told what exists) and, with a level
  filter, the records that match all but the level and carry no level field (`missing`). The
  post filter applies to the hits only, so both aggregations see the whole window;
- `hits.total` is `matched`: exact up to the server's default of 10,000, beyond that a lower bound
  (`relation: gte`), which the answer marks `truncated`.

What `contains` guarantees here: `match_phrase` goes through the message field's analyzer. On a
`text` or `match_only_text` field (ECS, Filebeat, Elastic Agent and OpenSearch's defaults) that
analyzer lower-cases, so the phrase matches in any case, as whole words in order: `connection
reset` finds `Connection RESET by peer`; a fragment inside a word (`time` in `timeout`) is not
found, and punctuation between words is not compared. On a `keyword` message field the phrase must
equal the whole message.

Field names are ECS's by default (`@timestamp`, `service.name`, `log.level`, `message`) and renamed
with `[logs.fields]`. The service and level fields must be `keyword` fields (as ECS maps them): a
`term` on an analyzed `text` field would silently match nothing, so the services aggregation,
which the server refuses on a `text` field, makes that mistake a BACKEND_ERROR instead of an empty
answer.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import islice
from typing import Any
from urllib.parse import quote
from zoneinfo import ZoneInfo

import httpx

from tools.adapter import AdapterResult, ToolError, ToolRequest
from tools.input_models import QueryLogsInput
from tools.logs.http_exchange import (
    DEFAULT_CONNECT_TIMEOUT_S,
    DEFAULT_DEADLINE_S,
    DEFAULT_MAX_BODY_BYTES,
    exchange,
    json_document,
    log_server_client,
)
from tools.logs.json_lines import lookup
from tools.logs.projection import (
    MAX_LABELS,
    MAX_SERVICES_SHOWN,
    LogProjection,
    NewestRecords,
    Window,
    format_ns,
)
from tools.logs.record import LogRecord
from tools.logs.severity import Severity, severity_of_field, spellings_at_or_above
from tools.logs.timestamps import Clock, epoch_ns
from tools.redaction import NOOP, Redactor
from tools.vocabulary import ErrorCode

logger = logging.getLogger(__name__)

ECS_FIELDS: Mapping[str, str] = {
    "time": "@timestamp",
    "service": "service.name",
    "level": "log.level",
    "message": "message",
}
# Shown beside the message when present: where it ran and what wrote it (ECS names).
LABEL_FIELDS = (
    "host.name",
    "container.name",
    "kubernetes.pod.name",
    "log.logger",
    "event.dataset",
    "trace.id",
    "error.type",
)
STACK_TRACE_FIELD = "error.stack_trace"
DEFAULT_INDEX = "logs-*"
# An index, alias or data stream name or pattern, or a comma-separated list of them (`-` excludes):
# Elasticsearch's own rules (lower case; none of `\ / ? " < > | #`, space; not `.` or `..`), plus
# `*` and the `cluster:` prefix of a cross-cluster search. Never a path of its own.
_INDEX_PART = re.compile(r"(?:[a-z0-9_*-]+:)?-?[a-z0-9.*][a-z0-9._*+-]*")
_FIELD_NAME = re.compile(r"[^\x00-\x1f\x7f]{1,255}")
_MAX_TOTAL = 2**63 - 1  # hits.total is a Java long
_NS_PER_S = 1_000_000_000
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_UTC = Clock(ZoneInfo("UTC"), 0)  # Elasticsearch reads a stamp without an offset as UTC


def check_index(index: str) -> str:
    """The index pattern, or ValueError saying what is wrong with it (at wiring, not on a call)."""
    parts = index.split(",")
    if not all(
        _INDEX_PART.fullmatch(part) and part.split(":")[-1].lstrip("-") not in (".", "..") for part in parts
    ):
        raise ValueError(
            f"index {index!r} is not an Elasticsearch index name or pattern (lower case, no / ? #)"
        )
    return index


def search_fields(configured: Mapping[str, str]) -> dict[str, str]:
    """ECS names with `[logs.fields]` renames applied, or ValueError for a name no server accepts."""
    fields = {**ECS_FIELDS, **{role: name for role, name in configured.items() if role in ECS_FIELDS}}
    for role, name in fields.items():
        if not _FIELD_NAME.fullmatch(name) or name != name.strip():
            raise ValueError(f"[logs.fields] {role} = {name!r} is not a field name")
    return fields


@dataclass(frozen=True)
class _Answer:
    """What one search answered, checked for shape."""

    hits: list[dict[str, Any]]
    total: int
    total_is_lower_bound: bool
    services: list[str]
    without_level: int | None


class ElasticsearchLogAdapter:
    """Answers query_logs with one bounded `_search` request per invocation."""

    def __init__(
        self,
        base_url: str,
        *,
        index: str = DEFAULT_INDEX,
        fields: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
        max_window_minutes: int = 360,
        max_lines: int = 200,
        message_chars: int = 500,
        message_lines: int = 12,
        connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
        deadline_s: float = DEFAULT_DEADLINE_S,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        transport: httpx.AsyncBaseTransport | None = None,
        redactor: Redactor = NOOP,
    ) -> None:
        self._path = "/" + quote(check_index(index), safe="*,:+-._") + "/_search"
        self._fields = search_fields(fields or {})
        self._max_window_ns = max_window_minutes * 60 * _NS_PER_S
        self._max_lines = max_lines
        # Values are redacted before they are cut (`tools.logs.projection.LogProjection`).
        self._projection = LogProjection(message_chars, message_lines, redactor)
        self._deadline_s = deadline_s
        self._client = log_server_client(
            base_url,
            headers or {},
            max_body_bytes=max_body_bytes,
            deadline_s=deadline_s,
            connect_timeout_s=connect_timeout_s,
            transport=transport,
        )

    async def aclose(self) -> None:
        await self._client.aclose()

    async def execute(self, request: ToolRequest) -> AdapterResult:
        params = request.input
        assert isinstance(params, QueryLogsInput)  # noqa: S101 - invariant for the type checker
        window = Window.asked(params.start, params.end, self._max_window_ns)
        limit = min(params.limit, self._max_lines)
        level = None if params.level is None else Severity[params.level]
        body = await exchange(
            self._client,
            "POST",
            self._path,
            check_status=_check_status,
            # A shard that fails must fail the search: a partial answer would read as "nothing there".
            params={"allow_partial_search_results": "false"},
            body=search_body(self._fields, window, params.service, level, params.contains, limit),
            deadline_s=self._deadline_s,
        )
        answer = _parse(body, level is not None)
        newest = NewestRecords(limit)
        unreadable = 0
        for position, hit in enumerate(islice(answer.hits, limit)):
            record = self._record(params.service, hit)
            if record is None:
                unreadable += 1
                continue
            newest.offer((record.instant_ns, -position), record)
        if unreadable:
            logger.warning("skipped %d search hits without a readable time field", unreadable)
        return self._projection.observation(
            newest.newest_first(),
            matched=answer.total,
            window=window,
            level=level,
            without_level=answer.without_level,
            services_in_window=answer.services,
            more_may_match=answer.total_is_lower_bound,
        )

    def _record(self, service: str, hit: dict[str, Any]) -> LogRecord | None:
        source = hit["_source"]
        instant = _instant(lookup(source, self._fields["time"]), hit.get("sort"))
        if instant is None:
            return None
        message = _text(lookup(source, self._fields["message"]))
        stack = _text(lookup(source, STACK_TRACE_FIELD))
        if stack:
            message = f"{message}\n{stack}" if message else stack
        labels = []
        for name in LABEL_FIELDS:
            value = _text(lookup(source, name))
            if value:
                labels.append((name, value))
        index = hit.get("_index")
        if isinstance(index, str) and len(labels) < MAX_LABELS:
            labels.append(("_index", index))
        return LogRecord(
            instant_ns=instant,
            service=service,
            severity=severity_of_field(lookup(source, self._fields["level"])),
            message=message,
            labels=tuple(labels),
        )


def search_body(
    fields: Mapping[str, str],
    window: Window,
    service: str,
    level: Severity | None,
    contains: str | None,
    limit: int,
) -> dict[str, Any]:
    """The `_search` request body (docs/contracts.md, "Configuration" names the fields)."""
    service_term = {"term": {fields["service"]: {"value": service}}}
    matches: list[dict[str, Any]] = [service_term]
    if contains is not None:
        matches.append({"match_phrase": {fields["message"]: {"query": contains}}})
    hit_filters = list(matches)
    if level is not None:
        hit_filters.append({"terms": {fields["level"]: level_spellings(level)}})
    aggregations: dict[str, Any] = {
        "services": {"terms": {"field": fields["service"], "size": MAX_SERVICES_SHOWN}},
    }
    if level is not None:
        aggregations["matched_but_level"] = {
            "filter": {"bool": {"filter": matches}},
            "aggs": {"without_level": {"missing": {"field": fields["level"]}}},
        }
    return {
        "size": limit,
        "query": {
            "bool": {
                "filter": [
                    {
                        "range": {
                            fields["time"]: {
                                "gte": format_ns(window.start_ns),
                                "lte": format_ns(window.through_ns),
                                "format": "strict_date_optional_time_nanos",
                            }
                        }
                    }
                ]
            }
        },
        "post_filter": {"bool": {"filter": hit_filters}},
        "aggs": aggregations,
        "sort": [{fields["time"]: {"order": "desc", "unmapped_type": "date"}}],
        "_source": [fields["time"], fields["message"], fields["level"], STACK_TRACE_FIELD, *LABEL_FIELDS],
    }


def level_spellings(level: Severity) -> list[str]:
    """Every word spelling at or above `level` as a keyword field may hold it: `error`, `ERROR`, `Error`."""
    words = spellings_at_or_above(level)
    return sorted({spelling for word in words for spelling in (word, word.upper(), word.capitalize())})


def _check_status(status: int) -> None:
    if 200 <= status < 300:
        return
    if status == 400:  # the mapping refuses the search: a text service field, a time field that is no date
        raise ToolError(ErrorCode.BACKEND_ERROR, "BACKEND_REJECTED_QUERY")
    if status in (401, 403):
        raise ToolError(ErrorCode.UNAVAILABLE, "AUTH_REJECTED")
    if status == 404:  # no such index (a pattern with `*` matching none answers empty hits instead)
        raise ToolError(ErrorCode.UNAVAILABLE, "INDEX_NOT_FOUND")
    if status == 429:
        raise ToolError(ErrorCode.UNAVAILABLE, "RATE_LIMITED")
    if status == 504:
        raise ToolError(ErrorCode.TIMEOUT)
    if status >= 500:
        raise ToolError(ErrorCode.UNAVAILABLE)
    raise ToolError(ErrorCode.BACKEND_ERROR)  # redirects (never followed) and anything else


def _parse(body: bytes, level_filtered: bool) -> _Answer:
    """The search response, or BACKEND_ERROR for anything that is not its documented shape."""
    document = json_document(body)
    if document.get("timed_out") is True:
        raise ToolError(ErrorCode.TIMEOUT)
    shards = document.get("_shards")
    if isinstance(shards, dict) and shards.get("failed") not in (None, 0):
        raise ToolError(ErrorCode.UNAVAILABLE, "PARTIAL_RESULTS")
    hits = document.get("hits")
    if not isinstance(hits, dict) or not isinstance(hits.get("hits"), list):
        raise ToolError(ErrorCode.BACKEND_ERROR)
    listed = hits["hits"]
    if not all(isinstance(hit, dict) and isinstance(hit.get("_source"), dict) for hit in listed):
        raise ToolError(ErrorCode.BACKEND_ERROR)
    total, lower_bound = _total(hits.get("total"), len(listed))
    aggregations = document.get("aggregations")
    if not isinstance(aggregations, dict):
        raise ToolError(ErrorCode.BACKEND_ERROR)
    return _Answer(
        hits=listed,
        total=total,
        total_is_lower_bound=lower_bound,
        services=_bucket_keys(aggregations.get("services")),
        without_level=_without_level(aggregations.get("matched_but_level")) if level_filtered else None,
    )


def _total(total: object, listed: int) -> tuple[int, bool]:
    """`{"value": n, "relation": "eq" | "gte"}` (Elasticsearch 7+, OpenSearch), or n (6.x)."""
    if isinstance(total, dict):
        value, relation = total.get("value"), total.get("relation")
        if relation not in ("eq", "gte"):
            raise ToolError(ErrorCode.BACKEND_ERROR)
    else:
        value, relation = total, "eq"
    if isinstance(value, bool) or not isinstance(value, int) or not listed <= value <= _MAX_TOTAL:
        raise ToolError(ErrorCode.BACKEND_ERROR)
    return value, relation == "gte"


def _bucket_keys(aggregation: object) -> list[str]:
    if not isinstance(aggregation, dict) or not isinstance(aggregation.get("buckets"), list):
        raise ToolError(ErrorCode.BACKEND_ERROR)
    keys = [bucket.get("key") if isinstance(bucket, dict) else None for bucket in aggregation["buckets"]]
    return [key for key in keys if isinstance(key, str)][:MAX_SERVICES_SHOWN]


def _without_level(aggregation: object) -> int:
    inner = aggregation.get("without_level") if isinstance(aggregation, dict) else None
    count = inner.get("doc_count") if isinstance(inner, dict) else None
    if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= _MAX_TOTAL:
        raise ToolError(ErrorCode.BACKEND_ERROR)
    return count


def _instant(value: object, sort: object) -> int | None:
    """The record's time: an ISO stamp (no offset: UTC, as Elasticsearch reads it) or epoch millis;
    else the hit's sort value, which Elasticsearch gives a `date` field as epoch milliseconds."""
    if isinstance(value, list) and value:
        value = value[0]
    if isinstance(value, str):
        parsed = _UTC.iso(value.strip())
        if parsed is not None:
            return parsed[0]
    if isinstance(value, int | str) and not isinstance(value, bool):
        instant = epoch_ns(value)
        if instant is not None:
            return instant
    if isinstance(sort, list) and sort and isinstance(sort[0], int) and not isinstance(sort[0], bool):
        return epoch_ns(sort[0])
    return None


def _text(value: object) -> str:
    """A field as text: a string, an array of strings (one per line), anything else as compact JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return "\n".join(value)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
