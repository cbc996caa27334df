"""Another session's SQL as a digest: its shape without its literals, like the server's DIGEST_TEXT.

A statement in flight is someone else's data: `CREATE USER ... IDENTIFIED BY '...'`, `UPDATE users SET
email = '...'`. What an investigation needs is its shape (which table, which kind of statement), so
every literal (string, number, hex, bit, national string) becomes `?`, a list of them `(...)`, and
comments are dropped, as the server's own statement digests do.

Fail closed: text that cannot be tokenized (cut inside a string, as `trx_query` is at 1024 bytes) is
withheld whole, never shown in part. Where a string ends depends on the server's NO_BACKSLASH_ESCAPES
mode (`'a\\', 'b'` is one string or two), and a wrong guess would show a literal's words as if they were
SQL; so the text is read both ways and withheld unless both readings give the same digest.
"""

from __future__ import annotations

import re
from typing import ClassVar

from sqlglot import Token, TokenType
from sqlglot.dialects.mysql import MySQL

WITHHELD = "[statement withheld: not a readable SQL text]"

_LITERALS = frozenset(
    {
        TokenType.STRING, TokenType.NUMBER, TokenType.HEX_STRING, TokenType.BIT_STRING,
        TokenType.NATIONAL_STRING, TokenType.BYTE_STRING, TokenType.RAW_STRING, TokenType.HEREDOC_STRING,
        TokenType.UNICODE_STRING,
    }
)  # fmt: skip
# What may be shown as written: a word (keyword or name) or an operator; anything else becomes `?`.
_WORDS = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*(?:[ \t\r\n]+[A-Za-z_$][A-Za-z0-9_$]*)*", re.ASCII)
_OPERATOR = re.compile(r"[-+*/%=<>!~^&|.,;:()\[\]{}@?]{1,3}", re.ASCII)
_LIST = re.compile(r"\(\?(?:, \?)+\)")
_NO_SPACE_BEFORE = frozenset({",", ")", ".", ";"})
_NO_SPACE_AFTER = frozenset({"(", ".", "@"})


class _NoBackslashEscapes(MySQL.Tokenizer):
    """The server's reading under sql_mode NO_BACKSLASH_ESCAPES: only a doubled quote escapes one."""

    STRING_ESCAPES: ClassVar[list[str]] = ["'", '"']


def digest(text: str) -> str | None:
    """The digest of `text`, or None when it must be withheld."""
    readings = []
    for tokenizer in (MySQL.Tokenizer(), _NoBackslashEscapes()):
        try:
            tokens = tokenizer.tokenize(text)
        except Exception:  # any failure to read the text withholds it; the text is never logged
            return None
        readings.append(_render(text, tokens))
    first, second = readings
    return first if first == second else None


def digest_or_withheld(value: object) -> object:
    """A result cell of statement text: NULL stays NULL, text becomes its digest, anything else is hidden."""
    if value is None:
        return None
    if isinstance(value, str):
        shown = digest(value)
        return WITHHELD if shown is None else shown
    return WITHHELD


def _render(text: str, tokens: list[Token]) -> str:
    out: list[str] = []
    for token in tokens:
        piece = _shown(token, text[token.start : token.end + 1])
        if piece is None:
            continue
        if out and piece not in _NO_SPACE_BEFORE and out[-1] not in _NO_SPACE_AFTER:
            out.append(" ")
        out.append(piece)
    return _LIST.sub("(...)", "".join(out))


def _shown(token: Token, written: str) -> str | None:
    """The token as written (sqlglot's own text respells some keywords), or `?`."""
    kind = token.token_type
    if kind in _LITERALS:
        return "?"
    if kind == TokenType.INTRODUCER:  # `_utf8mb4'...'`: the string after it is the literal
        return None
    if kind == TokenType.IDENTIFIER:
        return "`" + token.text.replace("`", "``") + "`"
    if _WORDS.fullmatch(written):  # a keyword of several words (`PRIMARY KEY`) has one space
        return " ".join(written.split())
    if _OPERATOR.fullmatch(written):
        return written
    return "?"


_QUOTED = re.compile(r"'(?:[^'\\]|\\.|'')*'?|\"(?:[^\"\\]|\\.|\"\")*\"?", re.DOTALL)


def mask_quoted(message: str) -> str:
    """A server message with every quoted part replaced by `'?'`: `Duplicate entry 'alice@...' for key
    'email'` quotes the value it complains about; a quote left open masks to the end."""
    return _QUOTED.sub("'?'", message)
