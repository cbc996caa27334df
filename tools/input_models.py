"""The pydantic side of the tool definitions: business inputs, the envelope's evaluation, their schemas.

Kept apart from `tools.definitions` (names and limits) because building these models costs ~100 ms of
imports and schema construction, which the console's first frame must not pay.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    GetJsonSchemaHandler,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from tools.definitions import (
    MAX_KNOWLEDGE_PART,
    MAX_KNOWLEDGE_SOURCE_CHARS,
    MAX_SQL_BYTES,
    MAX_TOOL_CALL_ID_CHARS,
    ToolName,
)


class StrictModel(BaseModel):
    """Base for every contract model: unknown keys are errors, values are never coerced."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


# RFC 3339 date-time exactly: `datetime.fromisoformat` alone also takes ISO week dates, basic format
# and naive times. The instant must fall in a range a log query can mean (and Loki's nanosecond
# epoch clock can hold); year 1 or 9999 is a bad input, not a backend failure.
_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?(?:Z|[+-]\d{2}:\d{2})", re.ASCII)
EARLIEST_INSTANT = datetime(1970, 1, 1, tzinfo=UTC)
LATEST_INSTANT = datetime(2100, 1, 1, tzinfo=UTC)


def _rfc3339(value: str) -> str:
    """`YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)` between 1970 and 2100; a naive time is ambiguous at 3 a.m."""
    if not _RFC3339.fullmatch(value):
        raise ValueError(
            "must be an RFC 3339 timestamp like 2026-11-30T02:10:00Z or 2026-11-30T10:10:00+08:00"
        )
    try:
        instant = datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(UTC)
    except (ValueError, OverflowError) as exc:
        raise ValueError("must be a valid date and time") from exc
    if not EARLIEST_INSTANT <= instant < LATEST_INSTANT:
        raise ValueError("must lie between 1970 and 2100")
    return value


def _within_bytes(limit: int) -> Callable[[str], str]:
    def check(value: str) -> str:
        if len(value.encode("utf-8")) > limit:
            raise ValueError(f"must be at most {limit} UTF-8 bytes")
        return value

    return check


def _no_control_characters(value: str | None) -> str | None:
    if value is not None and any(ord(ch) < 32 or ord(ch) == 127 for ch in value):
        raise ValueError("must not contain control characters")
    return value


# "format": "date-time" lets a grammar-constrained server generate only RFC 3339 timestamps.
Rfc3339 = Annotated[
    str,
    Field(min_length=1, max_length=40, json_schema_extra={"format": "date-time"}),
    AfterValidator(_rfc3339),
]


class LookupKnowledgeInput(StrictModel):
    """A search (`query`, `top_k`) or the reading of a runbook a search of this run returned (`source`,
    `part`): exactly one of the two shapes, each with its own defaults (docs/contracts.md, "Tool
    envelope"). Its schema offers the model the two closed shapes, so a grammar-constrained server
    writes one or the other, never a mixture; it serialises as the shape it is."""

    query: Annotated[
        str | None, Field(default=None, min_length=1, max_length=500), AfterValidator(_no_control_characters)
    ] = None
    top_k: int = Field(default=3, ge=1, le=5)
    source: Annotated[
        str | None,
        Field(default=None, min_length=1, max_length=MAX_KNOWLEDGE_SOURCE_CHARS),
        AfterValidator(_no_control_characters),
    ] = None
    part: int = Field(default=1, ge=1, le=MAX_KNOWLEDGE_PART)

    @model_validator(mode="before")
    @classmethod
    def _no_mixture(cls, data: Any) -> Any:
        if isinstance(data, dict) and set(data) & _SEARCH_KEYS and set(data) & _READ_KEYS:
            raise ValueError("either query (with top_k) or source (with part), not both")
        return data

    @model_validator(mode="after")
    def _one_shape(self) -> LookupKnowledgeInput:
        if (self.query is None) == (self.source is None):
            raise ValueError("either query (with top_k) or source (with part)")
        return self

    @model_serializer(mode="wrap")
    def _as_its_shape(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        keys = _READ_KEYS if self.source is not None else _SEARCH_KEYS
        return {key: value for key, value in data.items() if key in keys}

    @classmethod
    def __get_pydantic_json_schema__(
        cls, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        properties = handler.resolve_ref_schema(handler(core_schema))["properties"]

        def shape(names: frozenset[str], required: str) -> dict[str, Any]:
            return {
                "type": "object",
                "properties": {name: _not_null(properties[name]) for name in properties if name in names},
                "required": [required],
                "additionalProperties": False,
            }

        return {"anyOf": [shape(_SEARCH_KEYS, "query"), shape(_READ_KEYS, "source")]}


_SEARCH_KEYS = frozenset({"query", "top_k"})
_READ_KEYS = frozenset({"source", "part"})


def _not_null(schema: dict[str, Any]) -> dict[str, Any]:
    """`anyOf [X, null]` as X: within its shape a field is never null."""
    options = schema.get("anyOf")
    if not options:
        return schema
    (value,) = [option for option in options if option != {"type": "null"}]
    return {**{k: v for k, v in schema.items() if k not in ("anyOf", "default")}, **value}


class QueryLogsInput(StrictModel):
    service: Annotated[str, Field(min_length=1, max_length=100), AfterValidator(_no_control_characters)]
    start: Rfc3339
    end: Rfc3339
    level: Literal["FATAL", "ERROR", "WARN", "INFO", "DEBUG"] | None = None
    contains: Annotated[
        str | None, Field(default=None, min_length=1, max_length=200), AfterValidator(_no_control_characters)
    ] = None
    # Small by default: each entry costs a small local model ~100-150 tokens of context.
    limit: int = Field(default=10, ge=1, le=200)


class QueryMysqlInput(StrictModel):
    sql: Annotated[str, Field(min_length=1), AfterValidator(_within_bytes(MAX_SQL_BYTES))]
    database: Annotated[str | None, Field(default=None, min_length=1, max_length=64)] = None


BUSINESS_INPUTS: dict[str, type[StrictModel]] = {
    ToolName.LOOKUP_KNOWLEDGE: LookupKnowledgeInput,
    ToolName.QUERY_LOGS: QueryLogsInput,
    ToolName.QUERY_MYSQL: QueryMysqlInput,
}


class PreviousObservation(StrictModel):
    """The model's judgement of the pending FOUND observation: did it move the diagnosis forward?"""

    tool_call_id: str = Field(min_length=1, max_length=MAX_TOOL_CALL_ID_CHARS)
    evaluation: Literal["GAINED", "NO_GAIN"]


def envelope_schema(tool: str) -> dict[str, Any]:
    """JSON schema of a tool's envelope as the model sees it (docs/contracts.md, "Tool envelope")."""
    business = BUSINESS_INPUTS[tool].model_json_schema()
    previous = PreviousObservation.model_json_schema()
    return {
        "type": "object",
        "properties": {
            "previous_observation": {
                "anyOf": [previous, {"type": "null"}],
                "description": (
                    "对待评估的 FOUND 观察（evaluation_required=true）的评估；"
                    "没有待评估的观察时为 null 或省略。"
                ),
            },
            "input": business,
        },
        "required": ["input"],
        "additionalProperties": False,
    }
