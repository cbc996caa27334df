"""JSON lines: our NDJSON and the common JSON loggers, read with their own field names.

One object per line. The time, level, message and service are looked up among the names the
common writers use, first present wins (`DEFAULT_FIELDS`): our NDJSON (`ts`, `level`, `message`,
`service`), ECS (`@timestamp`, `log.level`, `message`, `service.name`), Docker's `json-file`
driver (`time`, `log`, `stream`), Bunyan and Pino (`time`, numeric `level`, `msg`, `name`),
zap (`ts` as epoch seconds, `msg`), zerolog and logrus (`time`, `level`, `message`/`msg`), logstash
(`@timestamp`, `message`), `journalctl -o json` (`__REALTIME_TIMESTAMP`, `PRIORITY`, `MESSAGE`,
`SYSLOG_IDENTIFIER`), Elasticsearch's server log (`timestamp`, `level`, `message`, `stacktrace`).
`[logs.fields]` puts a configured name first. A dotted name is a key as written or a path into
nested objects (`log.level` in either spelling). A stack trace field is appended to the message,
one frame per line, so `contains` and the projection see it.

Decoding cost is bounded per line: a line whose structure (commas, brackets) exceeds
`MAX_JSON_ELEMENTS` is not decoded (it is skipped as too costly), so a crafted line of millions of
tiny members cannot cost hundreds of MiB while its bytes stay under the line cap.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from itertools import islice
from typing import Any

from tools.logs.line_format import FormatTraits, Head
from tools.logs.projection import MAX_LABEL_CHARS, MAX_LABELS
from tools.logs.severity import severity_of_field
from tools.logs.text_lines import level_word
from tools.logs.timestamps import Clock, epoch_ns

ROLES = ("time", "level", "message", "service")
# `[logs.fields]` keys: a role by its name or the usual field name for it (`ts = "when"` is `time`).
ROLE_NAMES = {
    **{name: name for name in ROLES},
    "ts": "time",
    "timestamp": "time",
    "severity": "level",
    "msg": "message",
    "app": "service",
}
DEFAULT_FIELDS: Mapping[str, tuple[str, ...]] = {
    "time": ("ts", "@timestamp", "timestamp", "time", "__REALTIME_TIMESTAMP", "date", "datetime", "asctime"),
    "level": ("level", "log.level", "severity", "lvl", "levelname", "loglevel", "log_level", "PRIORITY"),
    "message": ("message", "msg", "MESSAGE", "log", "@message", "short_message", "text"),
    "service": (
        "service",
        "service.name",
        "app",
        "application",
        "SYSLOG_IDENTIFIER",
        "_SYSTEMD_UNIT",
        "name",
    ),
}
_STACK_FIELDS = ("error.stack_trace", "stack_trace", "stacktrace", "exception", "exc_info", "err.stack")
# Each element of a JSON text needs a comma or an opening bracket, so these bound what decoding builds.
MAX_JSON_ELEMENTS = 20_000
_STRUCTURE_CHECK_BYTES = 64 * 1024  # shorter lines cannot hold enough elements to matter


class TooCostly(ValueError):
    """A line whose JSON structure would cost far more memory to decode than its bytes."""


def decode_object(line: str) -> dict[str, Any] | None:
    """The JSON object on this line, or None; TooCostly for a line past the element bound."""
    if len(line) > _STRUCTURE_CHECK_BYTES and (
        line.count(",") + line.count("[") + line.count("{") > MAX_JSON_ELEMENTS
    ):
        if line.lstrip().startswith("{"):
            raise TooCostly
        return None
    text = line.strip().removeprefix("\ufeff")
    if not text.startswith("{"):
        return None
    try:
        record = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return record if isinstance(record, dict) else None


class JsonLines(FormatTraits):
    name = "json"
    escapes_text = True
    spans_lines = True
    indented_heads = True

    def __init__(self, fields: Mapping[str, str] | None = None) -> None:
        configured = {ROLE_NAMES[key]: name for key, name in (fields or {}).items()}
        self._fields = {
            role: ((configured[role],) if role in configured else ()) + DEFAULT_FIELDS[role] for role in ROLES
        }
        self._mapped = frozenset(name for names in self._fields.values() for name in names) | set(
            _STACK_FIELDS
        )

    def head(self, line: str, clock: Clock) -> Head | None:
        record = decode_object(line)
        if record is None:
            return None
        instant = _instant(self._first(record, "time"), clock)
        if instant is None:
            return None
        message = self._first(record, "message")
        if message is None:  # no message field: the record itself is the message
            text = line.strip()
        else:
            text = message.rstrip("\n") if isinstance(message, str) else _compact(message)
        stack = _stack(record)
        if stack:
            text = f"{text}\n{stack}" if text else stack
        service = self._first(record, "service")
        labels = tuple(
            (key, _compact(value))
            for key, value in islice(
                ((key, value) for key, value in record.items() if key not in self._mapped), MAX_LABELS
            )
        )
        severity = severity_of_field(self._first(record, "level"))
        if severity is None and "stream" in record and isinstance(record.get("log"), str):
            severity = level_word(text)  # Docker json-file: the container's own text says it
        return Head(
            instant_ns=instant,
            severity=severity,
            message=text,
            service=service if isinstance(service, str) and service else None,
            labels=labels,
        )

    def _first(self, record: dict[str, Any], role: str) -> Any:
        """The first named field present; an object or array is no time, level or service (ECS
        nests `service` as `{"name": ...}`: `service.name` is then tried)."""
        for name in self._fields[role]:
            value = lookup(record, name)
            if value is not None and (role == "message" or not isinstance(value, dict | list)):
                return value
        return None


def lookup(record: Mapping[str, Any], name: str) -> Any:
    """`name` as a key, else as a dotted path into nested objects."""
    if name in record:
        return record[name]
    if "." not in name:
        return None
    value: Any = record
    for part in name.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def _instant(value: Any, clock: Clock) -> int | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return epoch_ns(value)
    if not isinstance(value, str):
        return None
    parsed = clock.iso(value.strip())
    if parsed is not None:
        return parsed[0]
    return epoch_ns(value)


def _stack(record: Mapping[str, Any]) -> str:
    for name in _STACK_FIELDS:
        value = lookup(record, name)
        if isinstance(value, str) and value:
            return value.rstrip("\n")
        if isinstance(value, list) and value:
            return "\n".join(item if isinstance(item, str) else _compact(item) for item in value)
    return ""


def _compact(value: Any) -> str:
    if isinstance(value, str):
        return value[:MAX_LABEL_CHARS] if len(value) > MAX_LABEL_CHARS * 4 else value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
