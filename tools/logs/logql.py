"""LogQL for query_logs, built only from structured input: the model picks values, it never writes a query.

The stream selector is a fixed matcher the config author wrote, chosen by service name; the level becomes
a fixed label filter from a table; `contains` is the only model text. It becomes one case-insensitive
regular-expression line filter, `|~ "(?i)<contains with every RE2 metacharacter escaped>"` (Loki runs a
`(?i)` literal as a case-insensitive substring search), emitted as exactly one double-quoted LogQL string
literal (Go `strconv.Unquote` rules, which Loki's lexer applies): whatever it holds it can only ever be
the text the filter looks for, in any case, as for every other source.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping

from tools.adapter import ToolError
from tools.logs.severity import Severity, spellings_at_or_above
from tools.vocabulary import ErrorCode

MAX_CONTAINS_CHARS = 200
# `level` means this severity or worse, in every spelling the file source normalises
# (tools.logs.severity): appenders and Loki's own `detected_level` write `error`, `ERROR`, `warning` or
# `critical`; an exact `="ERROR"` would silently answer EMPTY for them, and EMPTY reads as "no errors
# happened". Label regexes are anchored, so each is a whole-value alternation.
_LEVEL_PATTERNS = {
    severity.name: "(?i)(" + "|".join(spellings_at_or_above(severity)) + ")" for severity in Severity
}
# With no level label configured: the label an appender or a pipeline wrote, else the one Loki 3
# derives at ingestion (`detected_level`, from the line's text or its OpenTelemetry severity).
WRITTEN_LEVEL_LABEL = "level"
DETECTED_LEVEL_LABEL = "detected_level"
# Control, format, surrogate, private use, unassigned; line and paragraph separators.
_UNPRINTABLE = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
_LABEL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_RE2_SPECIAL = frozenset("\\.+*?()|[]{}^$")


def build_logql(
    service_matchers: Mapping[str, str],
    service: str,
    level: str | None,
    contains: str | None,
    level_label: str | None = None,
) -> str:
    """`<configured selector> [| level=~"<fixed>"] [|~ "(?i)<escaped contains>"]`.

    Without a configured level label the filter reads `level=~"<fixed>" or detected_level=~"<fixed>"`:
    a line passes on the level it was written with, or on the one Loki 3 detected for it."""
    selector = service_matchers.get(service)
    if selector is None:
        raise ToolError(ErrorCode.INVALID_INPUT, "UNKNOWN_SERVICE")
    parts = [selector]
    if level is not None:
        pattern = _LEVEL_PATTERNS.get(level)
        if pattern is None:
            raise ToolError(ErrorCode.INVALID_INPUT)
        labels = (WRITTEN_LEVEL_LABEL, DETECTED_LEVEL_LABEL) if level_label is None else (level_label,)
        parts.append("| " + " or ".join(f"{label}=~{quote(pattern)}" for label in labels))
    if contains is not None:
        parts.append(_contains_filter(contains))
    return " ".join(parts)


def build_unleveled_count(
    service_matchers: Mapping[str, str],
    service: str,
    contains: str | None,
    level_label: str | None,
    range_ms: int,
) -> str:
    """A metric query counting the lines a level filter cannot judge: those matching all but the
    level that carry no level (no `level` label, and no `detected_level` or `unknown`; or an empty
    configured label), over the `range_ms` before the query's instant.
    `sum(count_over_time(<selector> [|~ ...] | level="" | detected_level=~"(?i)(unknown)?" [Nms]))`."""
    selector = service_matchers.get(service)
    if selector is None:
        raise ToolError(ErrorCode.INVALID_INPUT, "UNKNOWN_SERVICE")
    parts = [selector]
    if contains is not None:
        parts.append(_contains_filter(contains))
    if level_label is None:
        parts.append(f'| {WRITTEN_LEVEL_LABEL}="" | {DETECTED_LEVEL_LABEL}=~{quote("(?i)(unknown)?")}')
    else:
        parts.append(f'| {level_label}=""')
    return f"sum(count_over_time({' '.join(parts)} [{max(1, range_ms)}ms]))"


def _contains_filter(contains: str) -> str:
    return f"|~ {quote('(?i)' + re2_literal(_checked_contains(contains)))}"


def re2_literal(text: str) -> str:
    """`text` as an RE2 pattern matching exactly it: Go's `regexp.QuoteMeta`."""
    return "".join("\\" + ch if ch in _RE2_SPECIAL else ch for ch in text)


def quote(text: str) -> str:
    """A LogQL double-quoted literal. Only `\\` and `"` need escaping once line breaks are excluded."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def validate_config(service_matchers: Mapping[str, str], level_label: str | None) -> None:
    """Fail at wiring time, not on the model's first call: a broken matcher would 400 on every query."""
    if not service_matchers:
        raise ValueError("at least one service matcher is required")
    for service, selector in service_matchers.items():
        text = selector.strip()
        if not (text.startswith("{") and text.endswith("}") and len(text) > 2) or not _printable(text):
            raise ValueError(f"matcher for service {service!r} is not a LogQL stream selector {{...}}")
    if level_label is not None and not _LABEL_NAME.fullmatch(level_label):
        raise ValueError(f"level label {level_label!r} is not a LogQL label name")


def _checked_contains(contains: str) -> str:
    """The input model already rejects these; checked again because this is the injection boundary."""
    if len(contains) > MAX_CONTAINS_CHARS:
        raise ToolError(ErrorCode.INVALID_INPUT, "CONTAINS_TOO_LONG")
    if not _printable(contains):
        raise ToolError(ErrorCode.INVALID_INPUT, "CONTAINS_NOT_PRINTABLE")
    return contains


def _printable(text: str) -> bool:
    """No control, format (bidi overrides), surrogate, private or unassigned code points, no line breaks.

    Lone surrogates would also fail UTF-8 encoding of the request; bidi controls would make the
    audited query read differently from what Loki runs.
    """
    return all(unicodedata.category(ch) not in _UNPRINTABLE for ch in text)
