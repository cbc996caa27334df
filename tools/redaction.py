"""One redaction step for every path out of the process: projections, error details, run events, audit
columns, log records and the screen.

Three layers, applied in this order so the most precise one wins:
1. exact configured secret values (the DSN password, API keys read from env), with their URL- and
   JSON-escaped spellings, because a secret we were told about must never depend on a pattern;
2. value patterns, by class of shape rather than by example:
   - tokens that announce their issuer by a prefix (cloud keys; GitHub, GitLab, Slack, npm, PyPI,
     Google, Stripe, OpenAI, Anthropic, Hugging Face, SendGrid, Shopify, DigitalOcean, Databricks,
     Grafana, Atlassian, Alibaba, age tokens), JWTs and PEM private keys;
   - credentials inside syntax: ``scheme://user:pass@``, ``Authorization:`` and ``Cookie:`` headers,
     connection strings (``Password=...;``, ``AccountKey=...;``, SAS ``sig=``), XML elements and
     ``key=/value=`` attributes named like a secret, command-line flags (``--password x``,
     ``mysql -pX``);
   - ``key=value`` pairs whatever the notation (``=``, ``:``, ``=>``, full-width ``：``/``＝``; env,
     INI, YAML, JSON, JSON-in-JSON), whatever the quoting (``"..."``, ``'...'``, backticks, ``[...]``,
     ``(...)``, ``<...>``, 「...」) and in the languages operators write keys in (密码, 口令, 密钥,
     令牌, パスワード, 비밀번호, Passwort, contraseña, пароль, ...); and a secret key followed only by
     whitespace when what follows looks like a credential (letters with digits or symbols), so
     "password rotation is due" stays readable;
3. key-name rules for structured data (dict keys, table columns, labels), because a value under
   ``"password"`` is secret whatever it looks like. A SQL result column is judged by what it selects,
   not by its alias (``SELECT password AS p``): see `tools.sql_guard`.

Why not a maintained rule set as is. gitleaks' rules (MIT) were the reference for the issuer prefixes
above, but its ~200 rules are Go RE2 patterns built for scanning source files: most are keyword-anchored
rules with a leading ``[\\w.-]{0,50}?``, an entropy threshold and allowlists, i.e. an engine, and
running them all on every event string would multiply our cost per string by two orders of magnitude.
detect-secrets (Apache-2.0) scans files line by line; its strongest detectors are high-entropy
string plugins, which would hide the request IDs, commit SHAs and digests a diagnosis needs. Both
were read for the classes they cover (keyword assignments in many notations, connection strings,
basic-auth URLs, vendor prefixes), which are implemented here as anchored patterns.

Every pattern starts at a literal anchor and uses bounded or possessive quantifiers, so the cost stays
linear in the input (tests/security measures it by the ratio of two input sizes): redaction runs on
untrusted backend text and must not become a denial of service. False positives are measured on the
bundled demo runbooks, log and database fixture, which must come out unchanged.
"""

from __future__ import annotations

import functools
import json
import logging
import re
from collections.abc import Callable, Iterable
from enum import Enum
from functools import lru_cache
from typing import Any
from urllib.parse import quote, quote_plus

REDACTED = "[REDACTED]"

_MARK = re.escape(REDACTED)
_NOT_MARK = rf"(?!{_MARK})"  # never re-redact the marker: keeps redaction idempotent

# --- key-name rules -------------------------------------------------------------------------------------

# A name is split into words (snake, kebab, dotted, camel); its last word, after dropping qualifiers that
# only say how the value is encoded, is the noun that says what the value IS. Matching that head noun,
# not any word, is what keeps `password_expired`, `token_count` and `secret_name` (facts ABOUT a secret,
# useful in a diagnosis) visible while `db_password`, `access_token` and `passwordHash` are hidden.
_HEAD_SUFFIXES = (
    "password",
    "passwd",
    "passphrase",
    "secret",
    "secrets",
    "token",  # access_token, id_token, authtoken, csrftoken; never `tokens` (usage counters)
    "credential",
    "credentials",
    "authorization",
    "cookie",
    "cookies",
    "apikey",
    "privatekey",
    "accesskey",
    "secretkey",
    "accountkey",
    "passwort",
    "kennwort",
    "contraseña",
    "senha",
    "пароль",
    # Chinese, Japanese and Korean are head-final too: 登录密码 is a password, 密码过期时间 is a time.
    "密码",
    "口令",
    "密钥",
    "私钥",
    "令牌",
    "凭证",
    "凭据",
    "パスワード",
    "비밀번호",
)
_HEAD_WORDS = frozenset({"pwd", "pass", "auth", "bearer"})  # too short to match as a suffix
_KEY_QUALIFIERS = frozenset({"api", "access", "secret", "private", "signing", "encryption", "client", "app"})
_ENCODING_QUALIFIERS = frozenset(
    {"value", "hash", "hashed", "digest", "plain", "plaintext", "raw", "encrypted", "enc", "b64", "base64"}
    | {"str", "string", "text", "bytes", "header"}
)
_SENSITIVE_NAMES = frozenset({"authentication_string"})  # MySQL's mysql.user password hash column

_CHUNK = re.compile(r"[^\W_]+")
_CAMEL_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


def _words(name: str) -> list[str]:
    words: list[str] = []
    for chunk in _CHUNK.findall(name):
        words.extend(_CAMEL_WORD.findall(chunk) if chunk.isascii() else [chunk])
    return [word.lower() for word in words]


def _names_secret(name: object) -> bool:
    return isinstance(name, str) and _is_sensitive_name(name)


def names_secret(name: object) -> bool:
    """True when a key, column or label NAMES a secret (the head-noun rule above); case-insensitive."""
    return _names_secret(name)


@lru_cache(maxsize=4096)
def _is_sensitive_name(name: str) -> bool:
    words = _words(name)
    if "_".join(words) in _SENSITIVE_NAMES:
        return True
    while len(words) > 1 and (words[-1] in _ENCODING_QUALIFIERS or words[-1].isdigit()):
        words.pop()
    if not words:
        return False
    head = words[-1]
    if head in _HEAD_WORDS or head.endswith(_HEAD_SUFFIXES):
        return True
    return head == "key" and len(words) > 1 and words[-2] in _KEY_QUALIFIERS


# --- value patterns -------------------------------------------------------------------------------------

_Replace = Callable[[re.Match[str]], str]


def _keep_group(group: int) -> _Replace:
    """Keep the non-secret prefix (group `group`) and redact the rest of the match."""
    return lambda match: match.group(group) + REDACTED


def _url_credentials(match: re.Match[str]) -> str:
    return match.group(1) + REDACTED + "@"


def _pem(match: re.Match[str]) -> str:
    return match.group("begin") + REDACTED + (match.group("end") or "")


def _xml_element(match: re.Match[str]) -> str:
    if not _is_sensitive_name(match.group("tag")) or match.group("body").strip() in ("", REDACTED):
        return match.group(0)
    return (
        match.string[match.start() : match.start("body")]
        + REDACTED
        + match.string[match.end("body") : match.end()]
    )


def _key_value_attrs(match: re.Match[str]) -> str:
    if not _is_sensitive_name(match.group("name")) or match.group("value") in ("", REDACTED):
        return match.group(0)
    return match.group("lead") + REDACTED


def _quoted_pair(match: re.Match[str]) -> str:
    """`password="..."`: keep key, separator and quotes; empty values stay empty (they hide nothing)."""
    start, end = match.span(match.lastgroup or 0)  # the one value group that matched
    if start == end or REDACTED in match.group(0):  # empty, or redacted already (keeps this idempotent)
        return match.group(0)
    return match.string[match.start() : start] + REDACTED + match.string[end : match.end()]


_TOKEN_CHARS = r"A-Za-z0-9_-"
_SECRET_WORDS = (
    r"pass(?:word|wd|phrase)|pwd|secret|token"
    r"|(?:api|access|secret|private|client|signing|account|shared[_-]?access)[_-]?key"
    r"|shared[_-]?access[_-]?signature|passwort|kennwort|contrase(?:ñ|n)a|mot[ _]de[ _]passe|senha|пароль"
    r"|密码|口令|密钥|私钥|令牌|凭证|凭据|パスワード|비밀번호"
)
_PAIR_KEY = _SECRET_WORDS
_PAIR_SEP = r"(?:\\?[\"'])?+[ \t]{0,3}+[:=：＝]>?[ \t]{0,3}+"
# Issuer prefixes of tokens (gitleaks' rules were the reference); the length after the prefix keeps
# ordinary words and IDs that share a prefix out.
_ISSUED_TOKEN = (
    r"(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?![A-Z0-9])"
    r"|gh[pousr]_[A-Za-z0-9]{36,}+|github_pat_[A-Za-z0-9_]{22,}+"
    r"|glpat-[A-Za-z0-9_-]{20,}+|gl(?:dt|rt|ptt|ft|imt|oas|cbt|soat|agent)-[A-Za-z0-9_-]{20,}+"
    r"|GR1348941[A-Za-z0-9_-]{20,}+"
    r"|npm_[A-Za-z0-9]{36}(?![A-Za-z0-9])|pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,}+"
    r"|xox[abposre]-[A-Za-z0-9-]{10,}+|xapp-[0-9]-[A-Za-z0-9-]{20,}+"
    r"|ya29\.[A-Za-z0-9_-]{20,}+|GOCSPX-[A-Za-z0-9_-]{28}"
    r"|[sr]k_(?:live|test)_[A-Za-z0-9]{10,}+"
    r"|sk-ant-(?:api|admin|sid)[0-9]{2}-[A-Za-z0-9_-]{20,}+"
    r"|hf_[A-Za-z]{34}(?![A-Za-z])|SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}"
    r"|shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}|do[opr]_v1_[a-f0-9]{64}|dapi[a-f0-9]{32}(?:-[0-9])?"
    r"|glc_[A-Za-z0-9+/]{32,}+={0,2}|glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}"
    r"|ATATT3[A-Za-z0-9_=-]{100,}+|LTAI[A-Za-z0-9]{20}(?![A-Za-z0-9])|AGE-SECRET-KEY-1[0-9A-Z]{58}"
)
# The tags and attributes of XML configuration (`<password>x</password>`, `<add key="DbPassword"
# value="x"/>`) are judged by the key-name rule.
_XML_ELEMENT = re.compile(
    r"<(?P<tag>[A-Za-z_][\w.:-]{0,60}+)(?P<attrs>\s[^<>]{0,300}+)?>(?P<body>[^<]{1,8192}+)</(?P=tag)>"
)
_KEY_VALUE_ATTRS = re.compile(
    r"""(?P<lead>\b(?:key|name)=(?P<q>["'])(?P<name>[^"'<>]{1,100}+)(?P=q)\s+value=(?P<q2>["']))(?P<value>[^"'<>]{0,4096}+)"""
)

# Each rule runs only when one of its trigger words occurs in the lower-cased text: a substring search
# is ~35x cheaper than a case-insensitive regex scan, and most text carries none of them.
_SECRET_TRIGGERS = (
    "pass", "pwd", "secret", "token", "key", "kennwort", "contrase", "mot de", "mot_de", "senha", "пароль",
    "密码", "口令", "密钥", "私钥", "令牌", "凭证", "凭据", "パスワード", "비밀번호",
)  # fmt: skip
_ISSUER_TRIGGERS = (
    "a3t", "akia", "asia", "abia", "acca", "gh", "github_pat_", "gl", "gr1348941", "npm_", "pypi-", "xox",
    "xapp-", "ya29.", "gocspx-", "k_live_", "k_test_", "sk-ant-", "hf_", "sg.", "shp", "_v1_", "dapi",
    "atatt3", "ltai", "age-secret-key-1",
)  # fmt: skip

_TEXT_CACHE_SIZE = 8192
_CACHEABLE_LEN = 256

_PATTERNS: tuple[tuple[tuple[str, ...], re.Pattern[str], _Replace | str], ...] = (
    # PEM private keys; the body stops at the next "-----" so a missing END cannot make it quadratic,
    # and a truncated key (error text cut short) is still hidden.
    (
        ("private key-----",),
        re.compile(
            r"(?P<begin>-----BEGIN (?:[A-Z0-9]{1,20} ){0,3}PRIVATE KEY-----)(?:[^-]++|-(?!----))*+"
            r"(?P<end>-----END (?:[A-Z0-9]{1,20} ){0,3}PRIVATE KEY-----)?"
        ),
        _pem,
    ),
    # scheme://user:pass@host — anchored on "://"; the password may contain '@' (sloppy DSNs), so it is
    # bounded rather than possessive and backtracks to the last '@' before the path.
    (
        ("://",),
        re.compile(rf"(://[^\s:/@?#\"'<>]{{0,256}}+:){_NOT_MARK}[^\s/?#\"'<>]{{1,256}}@"),
        _url_credentials,
    ),
    # Authorization / Proxy-Authorization headers, in header, key=value or JSON form; the scheme is kept.
    (
        ("authorization",),
        re.compile(
            rf"(?i)((?<![\w-])(?:proxy-)?authorization{_PAIR_SEP}(?:\\?[\"'])?+"
            rf"(?:(?:bearer|basic|digest|token|negotiate|ntlm|apikey)[ \t]+)?+){_NOT_MARK}[^\s\"'\\,;]++"
        ),
        _keep_group(1),
    ),
    (
        ("bearer",),
        re.compile(rf"(?i)((?<![\w-])bearer[ \t]+){_NOT_MARK}[A-Za-z0-9._~+/=-]{{16,}}+"),
        _keep_group(1),
    ),
    (_ISSUER_TRIGGERS, re.compile(rf"(?<![A-Za-z0-9_-])(?:{_ISSUED_TOKEN})"), REDACTED),
    (
        ("aiza",),
        re.compile(rf"(?<![{_TOKEN_CHARS}])AIza[{_TOKEN_CHARS}]{{35}}(?![{_TOKEN_CHARS}])"),
        REDACTED,
    ),
    (
        ("hooks.slack.com",),
        re.compile(r"(hooks\.slack\.com/(?:services|workflows)/)[A-Za-z0-9/_-]{8,}+"),
        _keep_group(1),
    ),
    # OpenAI-style keys: 20 alphanumerics right after the prefix, so pod names such as
    # `sk-worker-5d6f7c8b9-p2z6h` (hyphen-separated short words) are left alone.
    (
        ("sk-",),
        re.compile(
            r"(?<![A-Za-z0-9_-])sk-(?:proj-|svcacct-|admin-|ant-api\d\d-)?+[A-Za-z0-9]{20}[A-Za-z0-9_-]*+"
        ),
        REDACTED,
    ),
    (
        ("eyj",),
        re.compile(
            rf"(?<![{_TOKEN_CHARS}])eyJ[{_TOKEN_CHARS}]{{7,}}+\.[{_TOKEN_CHARS}]{{10,}}+\.[{_TOKEN_CHARS}]*+"
        ),
        REDACTED,
    ),
    # Cookie / Set-Cookie headers: every name=value up to the end of the line (or the closing quote).
    (
        ("cookie",),
        re.compile(rf"(?i)((?<![\w-])(?:set-)?cookie{_PAIR_SEP}(?:\\?[\"'])?+){_NOT_MARK}[^\r\n\"'\\]++"),
        _keep_group(1),
    ),
    # Connection strings (ADO.NET, ODBC, Azure): `Password=p@ss word;` runs to the `;`, spaces included.
    (
        ("password", "pwd", "account", "shared"),
        re.compile(
            r"(?i)((?<![\w-])(?:password|pwd|account[ _]?key|shared[ _]?access[ _]?(?:key|signature))"
            rf"[ \t]*=[ \t]*){_NOT_MARK}([^;\r\n\"']{{1,256}}+)(?=;)"
        ),
        _keep_group(1),
    ),
    (
        ("sig=",),
        re.compile(rf"((?<=[?&])sig=){_NOT_MARK}[^&\s\"'#]++"),
        _keep_group(1),
    ),  # Azure SAS signature
    # Command lines: `--password x`, `--token=x`, and the MySQL clients' glued `-pSECRET`.
    (
        ("--",),
        re.compile(
            r"(?i)((?<![\w-])--(?:password|passwd|pass|pwd|secret|token|api-?key|client-secret|auth-token"
            rf"|access-token)(?:[ \t]++|=)){_NOT_MARK}(?!-)(?:'[^'\n]*+'?|\"[^\"\n]*+\"?|[^\s'\"]++)"
        ),
        _keep_group(1),
    ),
    (
        ("mysql", "mariadb"),
        re.compile(
            r"((?<![\w/-])(?:mysql|mariadb|mysqldump|mysqladmin|mysqlsh|mysqlimport)(?:\.exe)?"
            rf"(?:[ \t]++[^\s]++){{0,12}}?[ \t]++-p){_NOT_MARK}(?:'[^'\n]*+'?|\"[^\"\n]*+\"?|[^\s'\"]++)"
        ),
        _keep_group(1),
    ),
    (("</",), _XML_ELEMENT, _xml_element),
    (("value=",), _KEY_VALUE_ATTRS, _key_value_attrs),
    # key=value / key: value / "key": "value" (also JSON-in-JSON \"key\": \"value\"). The key must be
    # followed directly by the separator, so `tokens=`, `token_count:` and prose ("password rotation",
    # "检查 password 是否过期") never match; the prefix of the key (db_, aws_secret_, X-) is left as is.
    (
        _SECRET_TRIGGERS,
        re.compile(
            rf"(?i)(?:{_PAIR_KEY}){_PAIR_SEP}"
            r"(?:\"(?P<dq>(?:[^\"\\\n]++|\\.)*+)\"?"
            r"|\\\"(?P<eq>(?:[^\"\\\n]++|\\[^\"\n])*+)(?:\\\")?"
            r"|'(?P<sq>(?:[^'\\\n]++|\\.)*+)'?"
            rf"|`(?P<bq>[^`\n]*+)`?|{_NOT_MARK}\[(?P<kq>[^\]\n]*+)\]?|\((?P<pq>[^)\n]*+)\)?|<(?P<aq>[^>\n]*+)>?"
            r"|「(?P<cq>[^」\n]*+)」?|“(?P<wq>[^”\n]*+)”?"
            rf"|{_NOT_MARK}(?P<uq>[^\s\"'\\,;&<>(){{}}\]]++))"
        ),
        _quoted_pair,
    ),
    # A secret key followed only by whitespace (netrc, option dumps, log lines): the next word is taken
    # only when it looks like a credential (letters with digits or symbols, 6 to 256 characters), so
    # "password rotation is due" and "bearer token missing" stay readable.
    (
        _SECRET_TRIGGERS,
        re.compile(
            rf"(?i)((?<![A-Za-z0-9_-])(?:{_SECRET_WORDS})[ \t]{{1,3}}+){_NOT_MARK}"
            r"(?=[^\s]{0,256}[A-Za-z])(?=[^\s]{0,256}[0-9!#$%&*+/=?@^_~.-])[^\s'\"<>,;]{6,256}+(?![^\s'\"<>,;])"
        ),
        _keep_group(1),
    ),
)


# Every rule's trigger words in one alternation (longest first): text that contains none of them (ids,
# numbers, most log lines) skips the per-rule tests at once; the rules themselves are unchanged.
_ANY_TRIGGER = re.compile(
    "|".join(
        map(re.escape, sorted({t for triggers, _, _ in _PATTERNS for t in triggers}, key=len, reverse=True))
    )
)


# --- the redactor ---------------------------------------------------------------------------------------


class Redactor:
    """Immutable, shareable redaction policy: configured secret values plus the built-in rules."""

    def __init__(self, secret_values: Iterable[str] = (), *, min_secret_len: int = 4) -> None:
        """Values shorter than `min_secret_len` are ignored: replacing every "abc" would shred normal text."""
        self._secret_values = tuple(value for value in secret_values if isinstance(value, str))
        self._min_secret_len = min_secret_len
        spellings = {
            spelling
            for value in self._secret_values
            for spelling in _spellings(value)
            if len(spelling.strip()) >= min_secret_len
        }
        # Longest first so a secret that contains another is replaced whole; the marker comes first so a
        # secret can never match inside an earlier replacement.
        ordered = sorted(spellings, key=lambda s: (-len(s), s))
        self._exact = re.compile("|".join([_MARK, *map(re.escape, ordered)])) if ordered else None
        # Events repeat the same short strings (ids, statuses, tool names) thousands of times; the result
        # is a pure function of the input, so a bounded cache removes most of the regex work.
        self._cached_text = functools.lru_cache(maxsize=_TEXT_CACHE_SIZE)(self._redact_text)

    def with_secrets(self, *values: str) -> Redactor:
        """A new redactor that also hides `values` (secrets learnt after start-up, e.g. a resolved DSN)."""
        return Redactor((*self._secret_values, *values), min_secret_len=self._min_secret_len)

    def holds_secret(self, value: str) -> bool:
        """True when `value` contains a configured secret value (any spelling the exact layer hides).

        For identifiers, which are kept exact and so never pass through `text`: one that holds a
        secret must not be used at all."""
        return self._exact is not None and any(m.group() != REDACTED for m in self._exact.finditer(value))

    def text(self, value: str) -> str:
        """Exact secrets first, then value patterns; surrounding text is kept."""
        if len(value) <= _CACHEABLE_LEN:
            return self._cached_text(value)
        return self._redact_text(value)

    def _redact_text(self, value: str) -> str:
        if self._exact is not None:
            value = self._exact.sub(REDACTED, value)
        lowered = value.lower()
        if _ANY_TRIGGER.search(lowered) is None:  # most text: one scan instead of a test per rule
            return value
        for triggers, pattern, replace in _PATTERNS:
            if any(trigger in lowered for trigger in triggers):
                value = pattern.sub(replace, value)
        return value

    def value(self, obj: Any) -> Any:
        """Redact a JSON-like structure into new objects (the input is never mutated).

        Strings go through `text`; values under a sensitive key (dict key, table column, or the `value`
        of a `{"name": ..., "value": ...}` pair such as a Kubernetes env entry) are replaced whatever their
        type; `None` stays `None`, because an unset secret hides nothing and "unset" helps a diagnosis.
        """
        if type(obj) is str:
            return self.text(obj)
        if isinstance(obj, str):
            # A StrEnum member is one of the project's own words (a status, a code), never a secret.
            return obj if isinstance(obj, Enum) else self.text(obj)
        if isinstance(obj, dict):
            return self._mapping(obj)
        if isinstance(obj, list):
            return [self.value(item) for item in obj]
        if isinstance(obj, tuple):
            return tuple(self.value(item) for item in obj)
        return obj

    def is_sensitive_key(self, name: str) -> bool:
        """True when a key, column or label NAMES a secret (the head-noun rule above); case-insensitive."""
        return _names_secret(name)

    def logging_filter(self) -> logging.Filter:
        """A filter for log HANDLERS (logger filters miss records propagated from child loggers)."""
        return _RedactingFilter(self)

    def _field(self, name: Any, value: Any) -> Any:
        if value is not None and _names_secret(name):
            return REDACTED
        return self.value(value)

    def _mapping(self, obj: dict[Any, Any]) -> dict[Any, Any]:
        pair_name = obj.get("name", obj.get("key"))
        hide_value = "value" in obj and _names_secret(pair_name)
        columns = obj.get("columns")
        is_table = isinstance(columns, list | tuple) and isinstance(obj.get("rows"), list | tuple)
        out: dict[Any, Any] = {}
        for key, item in obj.items():
            new_key = self.text(key) if isinstance(key, str) else key
            if hide_value and key == "value" and item is not None:
                out[new_key] = REDACTED
            elif is_table and key == "rows":
                out[new_key] = self._table_rows(columns, item)
            else:
                out[new_key] = self._field(key, item)
        return out

    def _table_rows(self, columns: Any, rows: Any) -> Any:
        """`{"columns": [...], "rows": [[...]]}`: a cell is as secret as its column's name says."""
        names = [column.get("name") if isinstance(column, dict) else column for column in columns]
        hidden = {index for index, name in enumerate(names) if _names_secret(name)}

        value, text = self.value, self.text

        def row(cells: Any) -> Any:
            if not isinstance(cells, list | tuple):
                return value(cells)
            # The per-cell decision is a set lookup and a type test: numbers and NULLs (most cells) cost
            # no call at all, text goes straight to `text`.
            new = [
                (None if cell is None else REDACTED)
                if index in hidden
                else text(cell)
                if type(cell) is str
                else cell
                if cell is None or type(cell) in _PLAIN_SCALARS
                else value(cell)
                for index, cell in enumerate(cells)
            ]
            return tuple(new) if isinstance(cells, tuple) else new

        redacted = [row(cells) for cells in rows]
        return tuple(redacted) if isinstance(rows, tuple) else redacted


# Values `value` returns unchanged: only a call's worth of work to skip.
_PLAIN_SCALARS = frozenset({int, float, bool})


def _spellings(value: str) -> set[str]:
    """How a configured secret shows up in text: as is, trimmed, URL-encoded, JSON-escaped."""
    spellings: set[str] = set()
    for base in {value, value.strip()}:  # env values often carry a trailing newline the backend never saw
        spellings |= {base, quote(base, safe=""), quote(base), quote_plus(base)}
        spellings |= {json.dumps(base)[1:-1], json.dumps(base, ensure_ascii=False)[1:-1]}
    return spellings


_STANDARD_RECORD_KEYS = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
}
_EXCEPTION_FORMATTER = logging.Formatter()


class _RedactingFilter(logging.Filter):
    """Redacts a record in place before any handler formats it, so no log sink ever sees a secret."""

    def __init__(self, redactor: Redactor) -> None:
        super().__init__()
        self._redactor = redactor

    def filter(self, record: logging.LogRecord) -> bool:
        text = self._redactor.text
        try:
            message = record.getMessage()
        except Exception:  # a broken %-format must not let its arguments through unredacted
            message = f"{record.msg!s} {record.args!r}"
        record.msg, record.args = text(message), None
        if record.exc_info:
            exc_text = record.exc_text or _EXCEPTION_FORMATTER.formatException(record.exc_info)
            # Drop exc_info so no handler re-renders the raw traceback; Formatter prints exc_text instead.
            record.exc_text, record.exc_info = text(exc_text), None
        elif record.exc_text:
            record.exc_text = text(record.exc_text)
        if record.stack_info:
            record.stack_info = text(record.stack_info)
        for key in vars(record).keys() - _STANDARD_RECORD_KEYS:  # `extra=` fields reach JSON formatters
            setattr(record, key, self._redactor._field(key, getattr(record, key)))
        return True


NOOP = Redactor()
"""No configured secrets. Patterns and key-name rules still apply: there is deliberately no "off" switch."""
