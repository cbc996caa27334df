r"""The issuer-token rules the redactor takes from gitleaks' maintained rule file.

`tools/secret_rules/gitleaks.toml` is a curated subset of gitleaks' `config/gitleaks.toml` (MIT, the
commit and the selection are in its header), copied entry by entry unchanged so that updating it is a
copy, not a rewrite. Vendors add and change token formats every month; a maintained list of their
prefixes catches what a hand-written one forgets (Twilio's `SK...`, Vault's `hvs.`, Doppler, Postman,
PlanetScale ...). What gitleaks builds around the rules for scanning files (entropy thresholds,
path allowlists, the Go engine) is not reproduced: a redactor hides a value of the issuer's shape
whatever its randomness.

gitleaks compiles its patterns with Go's RE2; Python's `re` differs in three spellings the file uses,
translated here mechanically: a flag group such as `(?i)` in the middle of a pattern (RE2 applies it to
the rest of the enclosing group; Python only accepts it at the very start, so it becomes a scoped
`(?i:...)` up to the group's end or its next `|`), POSIX classes inside brackets (`[[:alnum:]]`), and
`\z`. Patterns are compiled with `re.ASCII`, because RE2's `\w`, `\d`, `\s` and `\b` are ASCII.

Two more translations widen where a token is recognised, because gitleaks reads source files and a
redactor reads logs and JSON: most rules end a token with `(?:[\x60'"\s;]|\\[nr]|$)` (a quote,
whitespace, `;`, an escaped `\n`/`\r` or the end), which misses `pul-...)`, `SK...,` and a token
before `\"` in a JSON-escaped string; that ending is read as "no letter or digit follows". And a rule
that starts with `\b` also starts right after an escaped `\n`, `\r` or `\t` (`"...\nPMAK-..."` in
JSON).

Every rule starts at a literal or a bounded class, and `tests/security/test_gitleaks_rules.py` measures
each one for linear cost on adversarial input, as the project's own rules are.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from functools import cache, cached_property
from pathlib import Path
from typing import Any

RULE_DIR = "secret_rules"
RULE_FILE = "gitleaks.toml"

_POSIX_CLASSES = {
    "[:alnum:]": "A-Za-z0-9",
    "[:alpha:]": "A-Za-z",
    "[:digit:]": "0-9",
    "[:lower:]": "a-z",
    "[:upper:]": "A-Z",
    "[:xdigit:]": "0-9A-Fa-f",
    "[:space:]": r"\t\n\v\f\r ",
    "[:word:]": r"\w",
}
_FLAG_GROUP = re.compile(r"\(\?([a-zA-Z]+)\)")
_TOKEN_END = r"""(?:[\x60'"\s;]|\\[nr]|$)"""  # noqa: S105 - a regex fragment, not a secret
_WORD_START = re.compile(r"^((?:\(\?i\))?)\\b")
# After a JSON-escaped newline, return or tab, as after a space.
TOKEN_START = r"(?:(?<=\\[nrt])|\b)"  # noqa: S105 - a regex fragment, not a secret
_GLOBAL_FLAGS = re.compile(r"^\(\?[a-zA-Z]+\)")
_TAIL = "rest_of_token"
_TOKEN_CHAR = "[A-Za-z0-9+/=_-]"  # noqa: S105 - a regex fragment, not a secret


@dataclass(frozen=True)
class IssuerRule:
    """One gitleaks rule: it runs only when one of its keywords occurs in the lower-cased text, and is
    compiled then, the first time (most never are: compiling all of them would triple the time the
    redaction rules take to load)."""

    id: str
    keywords: tuple[str, ...]
    regex: str  # as the rule file spells it (RE2)
    secret_group: int
    allowlist_regexes: tuple[tuple[str, tuple[str, ...]], ...]  # (target, RE2 patterns)

    @cached_property
    def pattern(self) -> re.Pattern[str]:
        """The translated rule, followed by the rest of the token it starts (see `secret_span`)."""
        source = to_python(self.regex)
        flags = _GLOBAL_FLAGS.match(source)
        head, body = (flags.group(0), source[flags.end() :]) if flags else ("", source)
        return re.compile(f"{head}(?:{body})(?P<{_TAIL}>{_TOKEN_CHAR}*+)", re.ASCII)

    @cached_property
    def allowlists(self) -> tuple[tuple[str, tuple[re.Pattern[str], ...]], ...]:
        return tuple(
            (target, tuple(re.compile(to_python(regex), re.ASCII) for regex in regexes))
            for target, regexes in self.allowlist_regexes
        )

    def secret_span(self, match: re.Match[str]) -> tuple[int, int]:
        """What to hide: the rule's secretGroup; without one, its first non-empty group when the rest of
        the match is only delimiters (`"TOKEN"`, `=TOKEN,`), else the whole match. gitleaks reports the
        first non-empty group, which for a few rules is a fragment (a Teams webhook's `abcd-`). A secret
        that ends where the rule's match ends runs on to the end of its token: some rules match only a
        token's fixed beginning (Bedrock's `bedrock-api-key-YmVkcm9jay5hbWF6b25hd3MuY29t`), and hiding
        that beginning alone would leave the secret part on show."""
        tail = match.start(_TAIL)
        span = match.start(), tail
        if self.secret_group:
            span = match.span(self.secret_group)
        else:
            tail_index = self.pattern.groupindex[_TAIL]
            for index in range(1, tail_index):
                start, end = match.span(index)
                if end > start:
                    rest = match.string[match.start() : start] + match.string[end:tail]
                    if not any(char.isalnum() for char in rest):
                        span = start, end
                    break
        return (span[0], match.end()) if span[1] == tail else span

    def allowed(self, match: re.Match[str], secret: str) -> bool:
        """A `regexes` allowlist (target: the secret, the match or the line) spares this match."""
        for target, patterns in self.allowlists:
            text = secret if target == "secret" else match.group(0) if target == "match" else _line(match)
            if any(pattern.search(text) for pattern in patterns):
                return True
        return False


def _line(match: re.Match[str]) -> str:
    text, start, end = match.string, match.start(), match.end()
    return text[text.rfind("\n", 0, start) + 1 : (text.find("\n", end) + 1 or len(text) + 1) - 1]


def to_python(pattern: str) -> str:
    """An RE2 pattern from the rule file, spelled for Python's `re` (see the module docstring)."""
    pattern = pattern.replace(r"\z", r"\Z").replace(_TOKEN_END, "(?![A-Za-z0-9])")
    pattern = _WORD_START.sub(lambda match: match.group(1) + TOKEN_START, pattern)
    for posix, members in _POSIX_CLASSES.items():
        pattern = pattern.replace(posix, members)
    return _scope_inline_flags(pattern)


def _scope_inline_flags(pattern: str) -> str:
    """`a(?i)b|c` → `a(?i:b)|(?i:c)`: a mid-pattern flag group applies up to its group's end."""
    out: list[str] = []
    open_flags: list[tuple[int, str]] = []  # (depth, flags) of the scoped groups we opened
    depth = 0
    index = 0
    in_class = False
    while index < len(pattern):
        char = pattern[index]
        if char == "\\":
            out.append(pattern[index : index + 2])
            index += 2
            continue
        if in_class:
            in_class = char != "]"
            out.append(char)
            index += 1
            continue
        if char == "[":
            in_class = True
            out.append(char)
            # a `]` right after `[` or `[^` is a member, not the end of the class
            if pattern.startswith("^]", index + 1):
                out.append("^]")
                index += 2
            elif pattern.startswith("]", index + 1):
                out.append("]")
                index += 1
            index += 1
            continue
        flag = _FLAG_GROUP.match(pattern, index)
        if flag and (index > 0 or depth > 0):
            out.append(f"(?{flag.group(1)}:")
            open_flags.append((depth, flag.group(1)))
            index = flag.end()
            continue
        if char == "(":
            depth += 1
        elif char in ")|":
            closing = [flags for level, flags in open_flags if level == depth]
            out.append(")" * len(closing))
            if char == ")":
                open_flags = [(level, flags) for level, flags in open_flags if level != depth]
                depth -= 1
            else:
                out.append("|")
                out.extend(f"(?{flags}:" for flags in closing)
                index += 1
                continue
        out.append(char)
        index += 1
    out.append(")" * sum(1 for level, _ in open_flags if level == 0))
    return "".join(out)


def _rule(entry: dict[str, Any]) -> IssuerRule:
    allowlists = tuple(
        (str(allowlist.get("regexTarget", "secret")), tuple(map(str, allowlist["regexes"])))
        for allowlist in entry.get("allowlists") or ()
        if allowlist.get("regexes")
    )
    return IssuerRule(
        id=str(entry["id"]),
        keywords=tuple(str(keyword).lower() for keyword in entry.get("keywords") or ()),
        regex=str(entry["regex"]),
        secret_group=int(entry.get("secretGroup", 0)),
        allowlist_regexes=allowlists,
    )


@cache
def issuer_rules() -> tuple[IssuerRule, ...]:
    """The rules of the shipped subset, read once per process (each compiles on first use)."""
    text = (Path(__file__).parent / RULE_DIR / RULE_FILE).read_text(encoding="utf-8")
    return tuple(_rule(entry) for entry in tomllib.loads(text)["rules"])
