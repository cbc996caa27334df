"""Hide the values of secret-named members of JSON held in a text value, even when it is cut short.

A JSON document stored in a text column is structured data whose keys no statement names: the SQL
guard refuses `JSON_EXTRACT(doc, '$.password')`, but `SELECT doc` or `JSON_EXTRACT(doc, '$.auth')`
returns whatever the document or subtree holds, as a `*` returns columns the guard cannot see. So every
member `"key": value` whose key `names_secret` (after JSON unescaping, so `"pass\\u0077ord"` counts)
gets `"[REDACTED]"` for its value, a nested object or array included: the key-name rule the redactor
applies to result columns, applied to the keys inside a value.

Members are found by searching for `"key":` anywhere rather than by parsing from the first character,
because values arrive cut to a prefix and may be built by the query (`CONCAT('x', doc)` shifts where a
parser would think strings begin). A member whose value was cut is hidden to the end of the text. JSON
text held in a string (a document inside a document, or the JSON string `JSON_EXTRACT` returns for it)
is searched too, a few levels deep. What this cannot see is a value sliced out of its member by
position (`SUBSTRING(doc, 30, 14)`): see docs/RELIABILITY.md.
"""

from __future__ import annotations

import json
import re

from tools.redaction import REDACTED
from tools.secret_names import names_secret

_MEMBER_KEY = re.compile(r'"((?:[^"\\]++|\\.)*+)"\s*+:\s*+')
_QUOTE_COLON = re.compile(r'"\s*+:')
_STRING = re.compile(r'"(?:[^"\\]++|\\.)*+"?')
_SCALAR = re.compile(r"[^\s,}\]]*+")
_HIDDEN = json.dumps(REDACTED)
# The end of a string cut inside an escape (`\\`, `\\u00`): dropped before decoding what came before.
_TRAILING_ESCAPE = re.compile(r"(\\+)(u[0-9a-fA-F]{0,3})?\Z")
_MAX_NESTED_TEXT = 3


def may_hold_members(text: str) -> bool:
    """The cheap test: only text with a quote followed by a colon can hold a member (a nested
    document's `\\":` too); most text has no quote at all."""
    return '"' in text and _QUOTE_COLON.search(text) is not None


def hide_secret_members(text: str, *, _depth: int = 0) -> str:
    """`text` with the value of every secret-named member replaced; other text comes back unchanged."""
    if not may_hold_members(text):
        return text
    stripped = text.strip()
    if stripped.startswith('"') and _depth < _MAX_NESTED_TEXT and _STRING.fullmatch(stripped):
        return _string_hidden(text, _depth)  # the JSON string JSON_EXTRACT returns for a nested document
    out: list[str] = []
    position = 0
    while (key := _MEMBER_KEY.search(text, position)) is not None:
        start = key.end()
        end = _value_end(text, start)
        value = text[start:end]
        out.append(text[position:start])
        if names_secret(_key_name(key.group(1))) and value not in ("", "null"):
            out.append(_HIDDEN)  # an unset secret (null) hides nothing
        elif value.startswith('"'):  # only a string with escaped quotes can hold JSON text
            nested = '\\"' in value and _depth < _MAX_NESTED_TEXT
            out.append(_string_hidden(value, _depth) if nested else value)
        else:
            end = start  # search inside the value: a nested object's members are members too
        position = end
    out.append(text[position:])
    return "".join(out)


def _key_name(raw: str) -> str:
    if "\\" not in raw:
        return raw
    try:
        name = json.loads(f'"{raw}"')
    except ValueError:  # a bad escape: judge the characters as written
        return raw
    return name if isinstance(name, str) else raw


def _value_end(text: str, start: int) -> int:
    """Where the value starting at `start` ends: a string, a bracketed structure (strings inside it
    skipped) or a scalar; the end of the text when the value was cut."""
    if start >= len(text):
        return start
    opening = text[start]
    if opening == '"':
        string = _STRING.match(text, start)
        return string.end() if string is not None else len(text)
    if opening not in "{[":
        scalar = _SCALAR.match(text, start)
        return scalar.end() if scalar is not None else start
    depth = 0
    index = start
    while index < len(text):
        char = text[index]
        if char == '"':
            string = _STRING.match(text, index)
            index = string.end() if string is not None else len(text)
            continue
        if char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
            if depth == 0:
                return index + 1
        index += 1
    return len(text)


def _string_hidden(token: str, depth: int) -> str:
    """A JSON string whose content is itself JSON text, with that text's secret members hidden; it is
    re-encoded only when something was hidden, so ordinary strings keep their exact spelling. A string
    cut before its closing quote is decoded as far as it goes and stays open."""
    stripped = token.strip()
    closed = len(stripped) > 1 and _STRING.fullmatch(stripped) is not None and stripped.endswith('"')
    if closed and not _ends_escaped(stripped):
        whole = stripped
    else:
        closed, whole = False, _without_partial_escape(stripped) + '"'
    try:
        value = json.loads(whole)
    except ValueError:
        return token
    if not isinstance(value, str):
        return token
    hidden = hide_secret_members(value, _depth=depth + 1)
    if hidden == value:
        return token
    encoded = json.dumps(hidden, ensure_ascii=False)
    return token.replace(stripped, encoded if closed else encoded[:-1], 1)


def _without_partial_escape(text: str) -> str:
    """An odd run of backslashes at the end (maybe with a `u` and up to three hex digits) is an escape
    the cut interrupted; an even run is escaped backslashes, which are complete."""
    trailing = _TRAILING_ESCAPE.search(text)
    if trailing is None or len(trailing.group(1)) % 2 == 0:
        return text
    return text[: trailing.end(1) - 1]


def _ends_escaped(string: str) -> bool:
    """`"abc\"` is not closed: its last quote is escaped (an odd run of backslashes before it)."""
    backslashes = len(string[:-1]) - len(string[:-1].rstrip("\\"))
    return backslashes % 2 == 1
