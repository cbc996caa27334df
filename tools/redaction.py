"""One redaction step for every path out of the process: projections, error details, run events, audit
columns, log records and the screen.

Three layers, applied in this order so the most precise one wins:
1. exact configured secret values (the DSN password, API keys read from env), with their URL- and
   JSON-escaped spellings, because a secret we were told about must never depend on a pattern;
2. value patterns, by class of shape rather than by example, from two lists kept apart:
   - the maintained one: tokens that announce their issuer by a prefix, taken from gitleaks' rule file
     (`tools/secret_rules/gitleaks.toml`, MIT, a curated subset copied unchanged: see
     `tools.gitleaks_rules` for what is taken, what is not and why);
   - the project's own (`_OWN_SHAPE_RULES`, `_OWN_KEY_RULES` below), for what a scanner of source
     files does not cover in linear time or at all: private-key blocks (PEM, PGP, SSH2),
     `scheme://user:pass@` (also with a `/` in the password) and Go's `user:pass@tcp(`,
     `Authorization:` and `Cookie:` headers, connection strings (`Password=...;`, `AccountKey=...;`,
     SAS `sig=`), XML elements and `key=/value=` attributes named like a secret, command-line flags
     (`--password x`, `mysql -pX`, `curl -u user:pass`), a Docker config's `"auth"`, issuer prefixes
     with looser lengths than gitleaks' exact ones (a vendor that changes a token's length must not
     make it visible), and `key=value` pairs whatever the notation (`=`, `:`, `=>`, full-width
     `：`/`＝`; env, INI, YAML, JSON, JSON-in-JSON), whatever the quoting (`"..."`, `'...'`, backticks,
     `[...]`, `(...)`, `<...>`, 「...」), whatever the key's prefix and trailing qualifiers (`db_pass`,
     `auth_key`, `secret_key_base`, `password_hash`, `password_old`, `api_keys`) and in the languages
     operators write keys in (密码/密碼, 口令, 密钥/密鑰, 令牌, パスワード, 비밀번호, 암호, Passwort,
     contraseña, mot de passe, пароль, ...): the keys are those of `tools.secret_names`, the one
     vocabulary the key-name rules below use too; an unquoted value runs to the end
     of the value, past a `&` or `,` that does not start the next `key=`. A secret key followed only
     by whitespace is redacted when what follows looks like a credential (letters with digits), so
     "password rotation is due" stays readable;
3. key-name rules for structured data (dict keys, table columns, labels; `tools.secret_names`),
   because a value under ``"password"`` is secret whatever it looks like. A SQL result column is
   judged by what it selects, not by its alias (``SELECT password AS p``): see `tools.mysql.guard`.

Secret values, not the tool's own words: a `key: value` whose unquoted value is one of the words
systems write there instead of a secret (MySQL's `(using password: YES)`, `password: incorrect`,
`token: expired`, `true`, `not set`), a mask (`********`), a reference (`${DB_PASSWORD}`, `%PW%`,
`$DB_PASSWORD`), or a key that is the last part of a file path (`/srv/app/passwd: ...`) is left as
it is: each is a fact a diagnosis needs, and none is a credential (gitleaks' global allowlist and
detect-secrets' heuristic filters make the same cuts).

Every pattern starts at a literal anchor and uses bounded or possessive quantifiers, so the cost stays
linear in the input (tests/security measures it by the ratio of two input sizes): redaction runs on
untrusted backend text and must not become a denial of service. Rules run only when one of their
trigger words occurs in the lower-cased text, found in one pass of a prefix-tree regex. False positives
are measured on the bundled demo runbooks, log and database fixture, which must come out unchanged,
and on the corpus of ordinary log lines in tests/security/test_redaction_corpus.py.
"""

from __future__ import annotations

import functools
import json
import logging
import re
from collections.abc import Callable, Iterable
from enum import Enum
from typing import Any, cast
from urllib.parse import quote, quote_plus

from tools.gitleaks_rules import IssuerRule, issuer_rules
from tools.secret_names import SECRET_KEY_PATTERN, SECRET_KEY_TRIGGERS, names_secret, trie_pattern

REDACTED = "[REDACTED]"

_MARK = re.escape(REDACTED)
_NOT_MARK = rf"(?!{_MARK})"  # never re-redact the marker: keeps redaction idempotent

# --- key-name rules -------------------------------------------------------------------------------------

# The words that name a secret, for keys, columns, labels and `key=value` text alike, and how a name is
# judged (its head noun): tools.secret_names.


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
    if not names_secret(match.group("tag")) or match.group("body").strip() in ("", REDACTED):
        return match.group(0)
    return (
        match.string[match.start() : match.start("body")]
        + REDACTED
        + match.string[match.end("body") : match.end()]
    )


def _key_value_attrs(match: re.Match[str]) -> str:
    if not names_secret(match.group("name")) or match.group("value") in ("", REDACTED):
        return match.group(0)
    return match.group("lead") + REDACTED


# Words systems write where a secret's value would go: the secret is not there, and the word is what a
# diagnosis needs (MySQL's "(using password: YES)", "password: incorrect", "token: expired"). Only an
# UNQUOTED value equal to one of them is kept; "password: Expired1" or `password="yes"` is still hidden.
_NOT_A_SECRET = frozenset(
    {"yes", "no", "true", "false", "on", "off", "null", "none", "nil", "undefined", "n/a"}
    | {"empty", "blank", "unset", "set", "missing", "required", "optional", "present", "absent"}
    | {"provided", "supplied", "given", "hidden", "masked", "redacted", "omitted", "ok", "okay"}
    | {"valid", "invalid", "incorrect", "correct", "wrong", "bad", "mismatch", "unknown", "weak"}
    | {"expired", "expiring", "revoked", "rotated", "changed", "reset", "updated", "renewed", "refreshed"}
    | {"denied", "rejected", "accepted", "failed", "failure", "success", "succeeded"}
    | {"enabled", "disabled", "locked", "unlocked", "too", "not", "is", "are", "was", "were", "must"}
    # the first word of prose after a colon ("never a secret: only names and limits")
    | {"a", "an", "the", "only", "also", "any", "all", "never", "always", "see", "use", "from", "in", "of"}
    | {"for", "to", "with", "by", "via", "per", "if", "when", "and", "or", "then"}
    | {"错误", "無效", "无效", "过期", "已过期", "過期", "为空", "未设置", "틀림", "만료", "오류"}
)
# `********`, `xxxxxxxx`, `...`: a mask hides nothing; nor does a `%s` logged unformatted.
# `${DB_PASSWORD}`, `$DB_PASSWORD`, `%DB_PASSWORD%`: a reference names where the secret lives (an
# unbraced `$name` must be upper-case, so a password that merely starts with `$` is still hidden).
_MASK_OR_REFERENCE = re.compile(
    r"[*xX.#•-]{3,}+|\$\{[A-Za-z_][A-Za-z0-9_]{0,63}+\}|\$[A-Z_][A-Z0-9_]{0,63}+|%[A-Za-z_][A-Za-z0-9_]{0,63}+%"
    r"|%[-+# 0]?[bcdeEfFgGoOpqstTUvxX]"  # a format placeholder logged unformatted
)
_PATH_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")
_JSON_ESCAPE_LETTERS = frozenset("bfnrtu")


def _names_a_file(match: re.Match[str]) -> bool:
    """The key is the last part of a path (`/srv/app/passwd: ...`, `C:\\keys\\passwd: ...`): a file's
    name in a message, not a key=value pair. A backslash that starts a JSON escape (`...\\npassword=`,
    `\\tdb_pass:`) separates nothing: that key is a key."""
    text, index = match.string, match.start()
    stop = max(0, index - 64)
    while index > stop and text[index - 1] in _PATH_CHARS:
        index -= 1
    if index == 0 or text[index - 1] not in "/\\":
        return False
    if text[index - 1] == "\\" and text[index] in _JSON_ESCAPE_LETTERS:
        start = index - 1  # the run of backslashes before the key, looked at up to 64 back
        while start > max(0, index - 64) and text[start - 1] == "\\":
            start -= 1
        return (index - start) % 2 == 0  # an odd run ends in an escaping backslash
    return True


def _quoted_pair(match: re.Match[str]) -> str:
    """`password="..."`: keep key, separator and quotes; empty values stay empty (they hide nothing)."""
    group = match.lastgroup or 0
    start, end = match.span(group)  # the one value group that matched
    if start == end or REDACTED in match.group(0):  # empty, or redacted already (keeps this idempotent)
        return match.group(0)
    value = match.string[start:end]
    if (
        (group == "uq" and value.lower() in _NOT_A_SECRET)
        or _MASK_OR_REFERENCE.fullmatch(value)
        or _names_a_file(match)
    ):
        return match.group(0)
    return match.string[match.start() : start] + REDACTED + match.string[end : match.end()]


class _Rule:
    """One of the project's own rules: its trigger words, its pattern and what replaces a match. The
    pattern is compiled the first time a trigger word occurs: most texts never need most rules, and
    compiling every rule up front would make the first redaction wait for all of them."""

    __slots__ = ("_compiled", "_source", "replace", "triggers")

    def __init__(
        self, triggers: tuple[str, ...], source: str | re.Pattern[str], replace: _Replace | str
    ) -> None:
        self.triggers = triggers
        self.replace = replace
        self._source = source
        self._compiled = source if isinstance(source, re.Pattern) else None

    @property
    def pattern(self) -> re.Pattern[str]:
        if self._compiled is None:
            self._compiled = re.compile(cast(str, self._source))
        return self._compiled

    def redact(self, text: str) -> str:
        return self.pattern.sub(self.replace, text)


class _MaintainedRule:
    """A gitleaks rule: its secret is hidden inside its match, unless the rule's allowlist spares it."""

    __slots__ = ("_rule", "triggers")

    def __init__(self, rule: IssuerRule) -> None:
        self._rule = rule
        self.triggers = rule.keywords

    def redact(self, text: str) -> str:
        return self._rule.pattern.sub(self._replace, text)

    def _replace(self, match: re.Match[str]) -> str:
        start, end = self._rule.secret_span(match)
        if end <= start or self._rule.allowed(match, match.string[start:end]):
            return match.group(0)
        return match.string[match.start() : start] + REDACTED + match.string[end : match.end()]


_TOKEN_CHARS = r"A-Za-z0-9_-"  # noqa: S105 - a character class, not a secret
# A token starts after anything but a token character, and right after a JSON-escaped \n, \r or \t.
_TOKEN_START = rf"(?:(?<=\\[nrt])|(?<![{_TOKEN_CHARS}]))"
# The words a secret's key ends with, and the qualifiers that keep it one (`password_hash`,
# `secret_key_base`, `password_old`, `password2`): the same vocabulary as the key-name rules.
_SECRET_WORDS = SECRET_KEY_PATTERN
_PAIR_KEY = _SECRET_WORDS
_PAIR_SEP = r"(?:\\?[\"'])?+[ \t]{0,3}+[:=：＝]>?[ \t]{0,3}+"
# The characters an unquoted value stops at; a `&` or `,` followed by more value (not by the next
# `key=`) is part of it: `password=p&ss,w0rd` is one secret.
_UNQUOTED = r"[^\s\"'\\,;&<>(){}\]]"
_UNQUOTED_VALUE = rf"(?:{_UNQUOTED}++|[&,]++(?![\w.-]{{1,60}}+[:=])(?={_UNQUOTED}))++"
# Issuer prefixes of tokens with lengths looser than gitleaks' exact ones (see the module docstring),
# and issuers gitleaks has no rule for (Stripe/Svix webhook secrets, short Vault tokens); the length
# after the prefix keeps ordinary words and IDs that share a prefix out.
_ISSUED_TOKEN = (
    r"(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?![A-Z0-9])"  # noqa: S105 - a regex of token shapes, not a secret
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
    r"|hv[sbr]\.[A-Za-z0-9_-]{24,}+|whsec_[A-Za-z0-9+/=]{20,}+"
)
# The tags and attributes of XML configuration (`<password>x</password>`, `<add key="DbPassword"
# value="x"/>`) are judged by the key-name rule.
_XML_ELEMENT = (
    r"<(?P<tag>[A-Za-z_][\w.:-]{0,60}+)(?P<attrs>\s[^<>]{0,300}+)?>(?P<body>[^<]{1,8192}+)</(?P=tag)>"
)
_KEY_VALUE_ATTRS = (
    r"""(?P<lead>\b(?:key|name)=(?P<q>["'])(?P<name>[^"'<>]{1,100}+)(?P=q)\s+value=(?P<q2>["']))"""
    r"""(?P<value>[^"'<>]{0,4096}+)"""
)

# Each rule runs only when one of its trigger words occurs in the lower-cased text: most text carries
# none of them, and a rule's regex scan costs far more than finding its words (see `_TRIGGER_SCAN`).
_SECRET_TRIGGERS = SECRET_KEY_TRIGGERS
_ISSUER_TRIGGERS = (
    "a3t", "akia", "asia", "abia", "acca", "gh", "github_pat_", "gl", "gr1348941", "npm_", "pypi-", "xox",
    "xapp-", "ya29.", "gocspx-", "k_live_", "k_test_", "sk-ant-", "hf_", "sg.", "shp", "_v1_", "dapi",
    "atatt3", "ltai", "age-secret-key-1", "hvs.", "hvb.", "hvr.", "whsec_",
)  # fmt: skip

_TEXT_CACHE_SIZE = 8192
_CACHEABLE_LEN = 256

# The project's own rules, in two runs: shapes that carry their own marker (key blocks, URLs, headers,
# token prefixes), then the rules that judge a value by the key or flag in front of it. The maintained
# issuer rules run between the two, so a precise rule of ours keeps more context (the Slack webhook's
# path, the scheme of an Authorization header) and `api_key=SK...` is hidden once, by its token rule.
_OWN_SHAPE_RULES: tuple[_Rule, ...] = (
    # Private keys: PEM (`-----BEGIN RSA PRIVATE KEY-----`), PGP armour (`... PRIVATE KEY BLOCK-----`)
    # and SSH2 (`---- BEGIN SSH2 ENCRYPTED PRIVATE KEY ----`). The body stops at the next run of four
    # dashes, so a missing END cannot make it quadratic, and a truncated key (error text cut short) is
    # still hidden.
    _Rule(
        ("private key",),
        (
            r"(?P<begin>-{4,5}+ ?BEGIN (?:[A-Z0-9]{1,20} ){0,3}PRIVATE KEY(?: BLOCK)? ?-{4,5}+)"
            r"(?:[^-]++|-(?!---))*+"
            r"(?P<end>-{4,5}+ ?END (?:[A-Z0-9]{1,20} ){0,3}PRIVATE KEY(?: BLOCK)? ?-{4,5}+)?"
        ),
        _pem,
    ),
    # scheme://user:pass@host — anchored on "://". A password without '/' may contain '@' (sloppy DSNs):
    # it is bounded rather than possessive and backtracks to the last '@' before the path. A password
    # with '/' runs to the first '@' (and never past a ':', so each scan ends before the next "://"),
    # unless what follows the ':' is a port and a path (`http://host:8080/a@b` holds no password).
    _Rule(
        ("://",),
        (
            rf"(://[^\s:/@?#\"'<>]{{0,256}}+:){_NOT_MARK}"
            rf"(?:[^\s/?#\"'<>]{{1,256}}@|(?![0-9]{{1,5}}+(?:[/?#]|$))[^\s?#\"'<>@:]{{1,256}}+@)"
        ),
        _url_credentials,
    ),
    # Go's MySQL driver DSN: `user:pass@tcp(host:3306)/db` (also unix and udp sockets).
    _Rule(
        ("@tcp(", "@unix(", "@udp("),
        rf"((?<![^\s\"'=(,;])[\w.-]{{1,64}}+:){_NOT_MARK}[^\s\"']{{1,256}}(?=@(?:tcp|unix|udp)\()",
        _keep_group(1),
    ),
    # Authorization / Proxy-Authorization headers, in header, key=value or JSON form; the scheme is kept.
    _Rule(
        ("authorization",),
        (
            rf"(?i)((?<![\w-])(?:proxy-)?authorization{_PAIR_SEP}(?:\\?[\"'])?+"
            rf"(?:(?:bearer|basic|digest|token|negotiate|ntlm|apikey)[ \t]+)?+){_NOT_MARK}[^\s\"'\\,;]++"
        ),
        _keep_group(1),
    ),
    _Rule(
        ("bearer",),
        rf"(?i)((?<![\w-])bearer[ \t]+){_NOT_MARK}[A-Za-z0-9._~+/=-]{{16,}}+",
        _keep_group(1),
    ),
    _Rule(_ISSUER_TRIGGERS, rf"{_TOKEN_START}(?:{_ISSUED_TOKEN})", REDACTED),
    _Rule(
        ("aiza",),
        rf"{_TOKEN_START}AIza[{_TOKEN_CHARS}]{{35}}(?![{_TOKEN_CHARS}])",
        REDACTED,
    ),
    _Rule(
        ("hooks.slack.com",),
        r"(hooks\.slack\.com/(?:services|workflows)/)[A-Za-z0-9/_-]{8,}+",
        _keep_group(1),
    ),
    # OpenAI-style keys: 20 alphanumerics right after the prefix, so pod names such as
    # `sk-worker-5d6f7c8b9-p2z6h` (hyphen-separated short words) are left alone; after a project,
    # service-account or admin prefix the key's own alphabet (`-` and `_` too) counts.
    _Rule(
        ("sk-",),
        (
            rf"{_TOKEN_START}sk-(?:(?:proj|svcacct|admin|ant-api\d\d)-[A-Za-z0-9_-]{{20}}|[A-Za-z0-9]{{20}})"
            r"[A-Za-z0-9_-]*+"
        ),
        REDACTED,
    ),
    _Rule(
        ("eyj",),
        rf"{_TOKEN_START}eyJ[{_TOKEN_CHARS}]{{7,}}+\.[{_TOKEN_CHARS}]{{10,}}+\.[{_TOKEN_CHARS}]*+",
        REDACTED,
    ),
)
_OWN_KEY_RULES: tuple[_Rule, ...] = (
    # Cookie / Set-Cookie headers: every name=value up to the end of the line (or the closing quote).
    _Rule(
        ("cookie",),
        rf"(?i)((?<![\w-])(?:set-)?cookie{_PAIR_SEP}(?:\\?[\"'])?+){_NOT_MARK}[^\r\n\"'\\]++",
        _keep_group(1),
    ),
    # A Docker config's `"auth": "<base64 of user:password>"` (config.json, a registry secret): only
    # quoted, because a bare `auth: ok` or `auth=scram-sha-256` is a status or a method, not a secret.
    _Rule(
        ("auth",),
        (
            r"((?<![\w-])\\?[\"']auth\\?[\"'][ \t]{0,3}+:[ \t]{0,3}+\\?[\"'])"
            rf"{_NOT_MARK}[A-Za-z0-9+/=_-]{{4,}}+"
        ),
        _keep_group(1),
    ),
    # Connection strings (ADO.NET, ODBC, Azure): `Password=p@ss word;` runs to the `;`, spaces included.
    _Rule(
        ("password", "pwd", "account", "shared"),
        (
            r"(?i)((?<![\w-])(?:password|pwd|account[ _]?key|shared[ _]?access[ _]?(?:key|signature))"
            rf"[ \t]*=[ \t]*){_NOT_MARK}([^;\r\n\"']{{1,256}}+)(?=;)"
        ),
        _keep_group(1),
    ),
    _Rule(
        ("sig=",),
        rf"((?<=[?&])sig=){_NOT_MARK}[^&\s\"'#]++",
        _keep_group(1),
    ),  # Azure SAS signature
    # Command lines: `--password x`, `--token=x`, and the MySQL clients' glued `-pSECRET`.
    _Rule(
        ("--",),
        (
            r"(?i)((?<![\w-])--(?:password|passwd|pass|pwd|secret|token|api-?key|client-secret|auth-token"
            rf"|access-token)(?:[ \t]++|=)){_NOT_MARK}(?!-)(?:'[^'\n]*+'?|\"[^\"\n]*+\"?|[^\s'\"]++)"
        ),
        _keep_group(1),
    ),
    _Rule(
        ("mysql", "mariadb"),
        (
            r"((?<![\w/-])(?:mysql|mariadb|mysqldump|mysqladmin|mysqlsh|mysqlimport)(?:\.exe)?"
            rf"(?:[ \t]++[^\s]++){{0,12}}?[ \t]++-p){_NOT_MARK}(?:'[^'\n]*+'?|\"[^\"\n]*+\"?|[^\s'\"]++)"
        ),
        _keep_group(1),
    ),
    # curl's `-u user:password` / `--user user:password` (also `-U` / `--proxy-user`): the user is kept.
    # Anchored on curl, because `--user 1000:1000` is a uid:gid for docker.
    _Rule(
        ("curl",),
        (
            r"((?<![\w/-])curl(?:\.exe)?(?:[ \t]++[^\s]++){0,12}?[ \t]++"
            r"(?:-[uU][ \t]*+|--(?:proxy-)?user(?:[ \t]++|=))(?P<q>['\"]?+)[^\s:'\"]{0,256}+:)"
            rf"{_NOT_MARK}(?:[^\s'\"]++|(?<=['\"])[^'\"\n]++)"
        ),
        _keep_group(1),
    ),
    _Rule(("</",), _XML_ELEMENT, _xml_element),
    _Rule(("value=",), _KEY_VALUE_ATTRS, _key_value_attrs),
    # key=value / key: value / "key": "value" (also JSON-in-JSON \"key\": \"value\"). The key must be
    # followed directly by the separator, so `tokens=`, `token_count:` and prose ("password rotation",
    # "检查 password 是否过期") never match; the prefix of the key (db_, aws_secret_, X-) is left as is.
    _Rule(
        _SECRET_TRIGGERS,
        (
            rf"(?i){_PAIR_KEY}{_PAIR_SEP}"
            r"(?:\"(?P<dq>(?:[^\"\\\n]++|\\.)*+)\"?"
            r"|\\\"(?P<eq>(?:[^\"\\\n]++|\\[^\"\n])*+)(?:\\\")?"
            r"|'(?P<sq>(?:[^'\\\n]++|\\.)*+)'?"
            rf"|`(?P<bq>[^`\n]*+)`?|{_NOT_MARK}\[(?P<kq>[^\]\n]*+)\]?|\((?P<pq>[^)\n]*+)\)?|<(?P<aq>[^>\n]*+)>?"
            r"|「(?P<cq>[^」\n]*+)」?|“(?P<wq>[^”\n]*+)”?"
            rf"|(?P<rq>\$\{{[A-Za-z_][A-Za-z0-9_]{{0,63}}+\}})|{_NOT_MARK}(?P<uq>{_UNQUOTED_VALUE}))"
        ),
        _quoted_pair,
    ),
    # A secret key followed only by whitespace (netrc, option dumps, log lines): the next word is taken
    # only when it looks like a credential (letters and digits, 6 to 256 characters, no parenthesis), so
    # "password rotation is due", `kubectl get secret db-creds` and `password VARCHAR(255)` stay readable.
    _Rule(
        _SECRET_TRIGGERS,
        (
            rf"(?i)((?<![A-Za-z0-9_-]){_SECRET_WORDS}[ \t]{{1,3}}+){_NOT_MARK}"
            r"(?=[^\s'\"<>,;()]{0,256}[A-Za-z])(?=[^\s'\"<>,;()]{0,256}[0-9])[^\s'\"<>,;()]{6,256}+"
            r"(?![^\s'\"<>,;()])"
        ),
        _keep_group(1),
    ),
)

_RULES: tuple[_Rule | _MaintainedRule, ...] = (
    *_OWN_SHAPE_RULES,
    *map(_MaintainedRule, issuer_rules()),
    *_OWN_KEY_RULES,
)


_TRIGGERS = frozenset(trigger for rule in _RULES for trigger in rule.triggers)
# Every trigger word that starts at some position (the lookahead makes the matches overlap), in one scan.
_TRIGGER_SCAN = re.compile(f"(?=({trie_pattern(_TRIGGERS)}))")
# A trigger found at a position implies every trigger it contains ("sk-ant-" implies "sk-").
_IMPLIED: dict[str, frozenset[str]] = {
    found: frozenset(trigger for trigger in _TRIGGERS if trigger in found) for found in _TRIGGERS
}


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

    def prefix(self, value: str, max_chars: int) -> str:
        """At most `max_chars` characters of `value`, redacted BEFORE it is cut when it must be cut.

        Every value cut to a display size goes through here (log messages and labels, runbook snippets,
        MySQL cells and column names, an echoed tool name): cut first, a credential across the cut
        loses the context its rule needs (`mysql://app:Sup3rS3c`, no `@`; half a configured secret) and
        its first half is shown. A value that fits is returned as it is: the redaction step after the
        adapter sees it whole."""
        if len(value) <= max_chars:
            return value
        return self.text(value)[:max_chars]

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
        found = _TRIGGER_SCAN.findall(value.lower())
        if not found:  # most text: one scan, no rule
            return value
        present = frozenset().union(*map(_IMPLIED.__getitem__, set(found)))
        for rule in _RULES:
            if not present.isdisjoint(rule.triggers):
                value = rule.redact(value)
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
        """True when a key, column or label NAMES a secret (`tools.secret_names`); case-insensitive."""
        return names_secret(name)

    def logging_filter(self) -> logging.Filter:
        """A filter for log HANDLERS (logger filters miss records propagated from child loggers)."""
        return _RedactingFilter(self)

    def _field(self, name: Any, value: Any) -> Any:
        if value is not None and names_secret(name):
            return REDACTED
        return self.value(value)

    def _mapping(self, obj: dict[Any, Any]) -> dict[Any, Any]:
        pair_name = obj.get("name", obj.get("key"))
        hide_value = "value" in obj and names_secret(pair_name)
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
        hidden = {index for index, name in enumerate(names) if names_secret(name)}

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
