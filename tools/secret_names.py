"""The one vocabulary of secret NAMES: dict keys, table columns, labels, JSON members, SQL identifiers and
the keys of `key=value` text all say "this value is a secret" in the same words.

Two lists, one for the key-name rule and one for the text rule, drift apart: a SQL guard and a JSON
member rule that let `contrasena`, `mot_de_passe`, `password_old`, `db_pw`, `api_keys` and
`access_tokens` through while the text rule hides some of them (`SELECT *` shows their canaries, and
`WHERE contrasena LIKE 'a%'` answers guesses). So the words are data, stated once below, and both
rules are built from them:
- `names_secret(name)`: a name is split into words (snake, kebab, dotted, camel); trailing qualifiers
  that only say how the value is encoded (`_hash`, `_b64`, `2`) or which one it is (`_old`, `_new`,
  `_confirmation`) are dropped; the last word left is the head noun that says what the value IS. A
  head ending in a secret noun (`password`, `dbpassword`, `contraseña`, 密码), or its plural
  (`passwords`), is a secret, as are the short heads (`pwd`, `pw`, `pass`, `auth`, `bearer`), `key(s)`
  after a key qualifier (`api_keys`, `private_key`) and `tokens` after a token qualifier
  (`access_tokens`; a bare `tokens`, `max_tokens` or `prompt_tokens` counts tokens). Matching the head,
  not any word, keeps `password_expired`, `token_count` and `secret_name` (facts ABOUT a secret, which
  a diagnosis needs) readable.
- `SECRET_KEY_PATTERN`: the same keys as they appear in text, for `key=value` redaction: every head
  noun and plural, `<qualifier>[_-]key(s)`, `<qualifier>[_-]tokens`, the phrases, each optionally
  followed by up to two trailing qualifiers. It is found anywhere in a word (`db_password=` at
  `password`), so the prefix of a key is never needed.
Known differences, on purpose: in text the short heads `pw` and `pass` count only after a separator
or as a camel-case word (`db_pass=`, `dbPw=`: "bypass=1" and "tests pass=5" are no secrets), `cred`
only where a word starts, and `auth`, `bearer`, `authorization` and `cookie` are left to the rules
that know their shapes (`Authorization: Bearer x` keeps its scheme, a `Cookie:` header runs to the end
of its line, a Docker config's `"auth"`). Known false positives of the name rule: a column `pw` or
`pass` that holds something else (a power, a pass count), `*_tokens` after a qualifier (`id_tokens`
as a count) and `password_default` as a policy flag are hidden, and the SQL guard, which also
judges a lower-case identifier split once anywhere (`PASSWORDHASH` for `passwordHash`), refuses a
column that merely ends in a short head (`bypass`, `sacred`); a missed secret leaks, a hidden fact
costs a rename.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

# Head nouns: a name whose head word ENDS with one of these is a secret (`dbpassword`, `authtoken`).
# Chinese, Japanese and Korean are head-final too: 登录密码 is a password, 密码过期时间 is a time.
SECRET_NOUNS = (
    "password", "passwd", "passphrase", "secret", "token", "credential", "creds", "authorization",
    "cookie", "apikey", "privatekey", "accesskey", "secretkey", "accountkey", "passwort", "kennwort",
    "contraseña", "contrasena", "senha", "motdepasse", "пароль",
    "密码", "密碼", "口令", "密钥", "密鑰", "私钥", "私鑰", "令牌", "凭证", "凭据", "憑證", "憑據",
    "パスワード", "비밀번호", "패스워드", "암호",
)  # fmt: skip
# Nouns whose plural is also a set of secrets; `tokens` is not among them (usage counters say it).
PLURAL_NOUNS = frozenset(
    {"password", "passwd", "passphrase", "secret", "credential", "cookie", "apikey", "privatekey"}
    | {"accesskey", "secretkey", "accountkey", "contraseña", "contrasena", "senha"}
)
# Words too short to match as the end of a head word (`bypass`, `compass`): only the whole head.
SHORT_HEADS = frozenset({"pwd", "pw", "pass", "cred", "auth", "bearer"})
# Multi-word heads, word by word.
PHRASES = (("mot", "de", "passe"), ("shared", "access", "signature"))
# `key`/`keys` is a secret after one of these (detect-secrets' keyword list, Apache-2.0, was the
# reference for the ones after "app").
KEY_QUALIFIERS = frozenset(
    {"api", "access", "secret", "private", "signing", "encryption", "client", "app"}
    | {"auth", "service", "account", "db", "database", "priv", "master", "session", "license"}
)
# `tokens` is a set of secrets after one of these (and a count everywhere else).
TOKEN_QUALIFIERS = frozenset({"access", "refresh", "auth", "api", "bearer", "id", "session", "oauth", "csrf"})
# Trailing words that say how the value is encoded, or which of several it is: never what it IS.
TRAILING_QUALIFIERS = frozenset(
    {"value", "hash", "hashed", "digest", "plain", "plaintext", "raw", "encrypted", "enc", "b64", "base64"}
    | {"str", "string", "text", "bytes", "header", "base"}  # base: Rails' secret_key_base
    | {"old", "new", "prev", "previous", "current", "cur", "next", "orig", "original", "backup", "bak"}
    | {"tmp", "temp", "confirm", "confirmation", "verify", "retype", "repeat", "again", "legacy"}
    | {"default", "initial", "primary", "secondary", "alt"}
)
SENSITIVE_NAMES = frozenset({"authentication_string"})  # MySQL's mysql.user password hash column

_CHUNK = re.compile(r"[^\W_]+")
_CAMEL_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


def words(name: str) -> list[str]:
    """The lower-case words of a name: snake, kebab, dotted and camel case split; other scripts whole."""
    found: list[str] = []
    for chunk in _CHUNK.findall(name):
        found.extend(_CAMEL_WORD.findall(chunk) if chunk.isascii() else [chunk])
    return [word.lower() for word in found]


def names_secret(name: object) -> bool:
    """True when a key, column, label or JSON member NAMES a secret (the head-noun rule); any case."""
    return isinstance(name, str) and _is_secret_name(name)


@lru_cache(maxsize=4096)
def _is_secret_name(name: str) -> bool:
    split = words(name)
    if "_".join(split) in SENSITIVE_NAMES:
        return True
    while len(split) > 1:
        if len(split) > 2 and split[-2] + split[-1] in TRAILING_QUALIFIERS:
            del split[-2:]  # `b64`, `base64`: split into a word and a number
        elif split[-1] in TRAILING_QUALIFIERS or split[-1].isdigit():
            split.pop()
        else:
            break
    if not split:
        return False
    head = split[-1]
    before = split[-2] if len(split) > 1 else None
    if head in SHORT_HEADS or head.endswith(_HEAD_SUFFIXES):
        return True
    if any(tuple(split[-len(phrase) :]) == phrase for phrase in PHRASES):
        return True
    if head in ("key", "keys"):
        return before in KEY_QUALIFIERS
    if head == "tokens":
        return before in TOKEN_QUALIFIERS
    return head.endswith(_QUALIFIED_TOKENS)


_HEAD_SUFFIXES = (*SECRET_NOUNS, *(f"{noun}s" for noun in sorted(PLURAL_NOUNS)))
# `accesstokens` written as one word: the qualifier is inside the head.
_QUALIFIED_TOKENS = tuple(f"{qualifier}tokens" for qualifier in sorted(TOKEN_QUALIFIERS))


# --- the same words as keys in text ---------------------------------------------------------------------


def _joined(*parts: str) -> list[str]:
    """`parts` joined by each separator a key is written with (`api_key`, `api-key`, `api.key`, `apikey`)."""
    return [separator.join(parts) for separator in ("_", "-", ".", "")]


# Keys whose values have shapes of their own, which their own rules keep (`Authorization: Bearer x`
# keeps its scheme, a `Cookie:` header runs to the end of the line): not redacted as `key=value`.
_OWN_SHAPE_KEYS = frozenset({"authorization", "cookie"})


def _text_keys() -> list[str]:
    nouns = [noun for noun in SECRET_NOUNS if noun not in _OWN_SHAPE_KEYS]
    keys = [*nouns, *(f"{noun}s" for noun in PLURAL_NOUNS if noun not in _OWN_SHAPE_KEYS), "pwd"]
    for qualifier in KEY_QUALIFIERS:
        keys += _joined(qualifier, "key") + _joined(qualifier, "keys")
    for qualifier in TOKEN_QUALIFIERS:
        keys += _joined(qualifier, "tokens")
    for phrase in PHRASES:
        keys += [" ".join(phrase), *_joined(*phrase)]
    return keys


def trie_pattern(words_: Iterable[str]) -> str:
    """One regex for many literal words, as a prefix tree: Python's `re` tries an alternation's branches
    one by one at every position, so ~190 words in a flat list cost ~4x a tree of shared prefixes."""
    tree: dict[str, Any] = {}
    for word in words_:
        node = tree
        for char in word:
            node = node.setdefault(char, {})
        node[""] = {}

    def pattern(node: dict[str, Any]) -> str:
        branches = [re.escape(char) + pattern(child) for char, child in sorted(node.items()) if char]
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        return f"(?:{body})?" if "" in node else body

    return pattern(tree)


# `pw` and `pass` only after a separator or as a camel-case word (`db_pass`, `dbPw`; not `bypass`),
# `cred` where a word starts (not `sacred`).
# A word ends where no lower-case letter follows (an upper-case one starts the next camel-case word).
_WORD_END = "(?-i:(?![a-z]))"
_SHORT_TEXT_HEADS = rf"(?:(?<=[_.-])(?:pass|pw)|(?<=[a-z])(?-i:P)(?:ass|w)|(?<![a-z0-9])cred){_WORD_END}"
_TRAILING = rf"(?:[_.-]?(?:{trie_pattern(TRAILING_QUALIFIERS)}|\d{{1,3}}){_WORD_END}){{0,2}}"
SECRET_KEY_PATTERN = rf"(?:{trie_pattern(_text_keys())}|{_SHORT_TEXT_HEADS}){_TRAILING}"
"""A secret's key as it appears in text, to be used case-insensitively (`(?i)`)."""

# Lower-case words at least one of which occurs in any text the pattern matches (a rule runs only when
# one does): the tests check every generated key holds one.
SECRET_KEY_TRIGGERS = (
    "pass", "pw", "secret", "token", "cred", "key", "kennwort",
    "contrase", "mot de", "mot_de", "mot-de", "mot.de", "motde", "senha", "signature", "пароль",
    "密码", "密碼", "口令", "密钥", "密鑰", "私钥", "私鑰", "令牌", "凭证", "凭据", "憑證", "憑據",
    "パスワード", "비밀번호", "패스워드", "암호",
)  # fmt: skip
