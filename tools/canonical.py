"""Canonical business inputs: when two tool calls are the same call.

The duplicate check and the audit's input key compare calls by this form, never by the text the
model wrote. Two inputs share a canonical form only when the adapters are sure to answer them with
the same data, so refusing the second as DUPLICATE_CALL never hides evidence:

- every tool: defaults are explicit (`top_k: 3`, `part: 1`, `level: null`, `limit: 50`, `database: null`);
- `lookup_knowledge`: a search's `query` NFC-normalised, runs of whitespace collapsed to one space,
  trimmed (the search tokenises on whitespace; removing a space is NOT equivalent: it changes Chinese
  bigrams); a read's `source` kept exactly (it names one file) with its `part`; the two shapes never
  share a form (a search is `{query, top_k}`, a read `{source, part}`);
- `query_logs`: `start` and `end` as UTC instants (`2026-11-30T10:00:00+08:00` is
  `2026-11-30T02:00:00Z`), at the microsecond precision both log sources read; `service` (an exact
  match) and `contains` (a literal substring, spaces included) are kept exactly;
- `query_mysql`: a SELECT or set operation in sqlglot's generated MySQL form — the form the guard
  executes — so keyword case, layout and a trailing semicolon do not matter while identifiers and
  literals do; any other statement (SHOW, DESCRIBE, unparseable text) only trimmed; `database` kept.
"""

from __future__ import annotations

import json
import unicodedata
from datetime import UTC, datetime
from typing import Any

import sqlglot
from pydantic import BaseModel
from sqlglot import exp

from tools.definitions import ToolName


def canonical_input(tool: str, business: BaseModel) -> dict[str, Any]:
    """The canonical form of a validated business input of `tool`."""
    data = business.model_dump(mode="json")
    if tool == ToolName.LOOKUP_KNOWLEDGE and "query" in data:
        data["query"] = canonical_text(data["query"])
    elif tool == ToolName.QUERY_LOGS:
        data["start"] = canonical_instant(data["start"])
        data["end"] = canonical_instant(data["end"])
    elif tool == ToolName.QUERY_MYSQL:
        data["sql"] = canonical_sql(data["sql"])
    return data


def input_key(tool: str, business: BaseModel) -> str:
    """The canonical input as stable JSON text: the duplicate check's key and the audit's input key."""
    return json.dumps(
        canonical_input(tool, business), sort_keys=True, ensure_ascii=False, separators=(",", ":")
    )


def canonical_text(text: str) -> str:
    return " ".join(unicodedata.normalize("NFC", text).split())


def canonical_instant(value: str) -> str:
    """RFC 3339 in UTC with `Z`; fractional seconds only when there are any (as the log sources read)."""
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return value  # not an instant this module can place: only the identical text is equivalent
    if moment.tzinfo is None:
        return value
    utc = moment.astimezone(UTC).replace(tzinfo=None)
    return utc.isoformat(timespec="microseconds" if utc.microsecond else "seconds") + "Z"


def canonical_sql(sql: str) -> str:
    try:
        statements = [s for s in sqlglot.parse(sql, read="mysql") if s is not None]
        if len(statements) == 1 and isinstance(statements[0], exp.Query):
            return statements[0].sql(dialect="mysql", identify=True)
    except Exception:  # noqa: S110 - sqlglot's parse and generate errors, RecursionError:
        pass  # not a statement it can judge
    return sql.strip()
