"""The maintained issuer rules (a curated subset of gitleaks' rule file): shipped with their licence,
translated from RE2 faithfully, each one hiding what it matches and each one linear in its input.

A rule's true positives are generated from the rule's own pattern (hypothesis `from_regex` on the
pattern as gitleaks wrote it), placed in a line that names one of the rule's keywords, so a rule that
compiles but never redacts, or a translation that narrows what a rule accepts, fails here.
"""

from __future__ import annotations

import re
import time
import tomllib
from importlib import resources

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tools.gitleaks_rules import _POSIX_CLASSES, _scope_inline_flags, issuer_rules, to_python
from tools.redaction import NOOP, REDACTED

RULE_DIR = resources.files("tools").joinpath("secret_rules")
ENTRIES = tomllib.loads(RULE_DIR.joinpath("gitleaks.toml").read_text(encoding="utf-8"))["rules"]
RULES = {rule.id: rule for rule in issuer_rules()}


def test_the_subset_ships_with_its_source_and_licence() -> None:
    header = RULE_DIR.joinpath("gitleaks.toml").read_text(encoding="utf-8").split("[[rules]]", 1)[0]
    assert "b58d3f102cf3a2c84cb7f923d05c25c9b1aed84b" in header
    assert "MIT" in header
    licence = RULE_DIR.joinpath("LICENSE.gitleaks").read_text(encoding="utf-8")
    assert licence.startswith("MIT License")
    assert "Zachary Rice" in licence
    assert len(ENTRIES) == len(RULES) >= 100
    for entry in ENTRIES:
        assert entry["keywords"], entry["id"]
        assert entry["regex"], entry["id"]
        assert "path" not in entry, entry["id"]
    # The examples come from the maintained rules, not from a hand-written copy of them.
    assert {"twilio-api-key", "vault-service-token", "vault-batch-token"} <= RULES.keys()


@pytest.mark.parametrize(
    ("re2", "python"),
    [
        (r"\b(p8e-(?i)[a-z0-9]{32})", r"(?:(?<=\\[nrt])|\b)(p8e-(?i:[a-z0-9]{32}))"),
        (r"a(?i)b|c", r"a(?i:b)|(?i:c)"),
        (r"(x(?i)y|z)w", r"(x(?i:y)|(?i:z))w"),
        (r"[(?i)]a", r"[(?i)]a"),
        (r"(?i)\bx", r"(?i)(?:(?<=\\[nrt])|\b)x"),
        (r"pat[[:alnum:]]{14}", r"pat[A-Za-z0-9]{14}"),
        (r"(sha256~[\w-]{43})(?:[^\w-]|\z)", r"(sha256~[\w-]{43})(?:[^\w-]|\Z)"),
        (r"""(pul-[a-f0-9]{40})(?:[\x60'"\s;]|\\[nr]|$)""", r"(pul-[a-f0-9]{40})(?![A-Za-z0-9])"),
    ],
)
def test_re2_spellings_are_translated(re2: str, python: str) -> None:
    assert to_python(re2) == python
    re.compile(python)


def test_a_mid_pattern_flag_keeps_re2_meaning() -> None:
    """RE2: `a(?i)b|c` is `a` then case-insensitive `b`, or a case-insensitive `c`."""
    pattern = re.compile(to_python(r"a(?i)b|c"))
    assert [bool(pattern.fullmatch(text)) for text in ("ab", "aB", "Ab", "c", "C")] == [
        True,
        True,
        False,
        True,
        True,
    ]


def _as_gitleaks_wrote_it(regex: str) -> re.Pattern[str]:
    """The rule's pattern with only the spellings Python needs changed (no widening)."""
    for posix, members in _POSIX_CLASSES.items():
        regex = regex.replace(posix, members)
    return re.compile(_scope_inline_flags(regex.replace(r"\z", r"\Z")), re.ASCII)


@pytest.mark.parametrize("entry", ENTRIES, ids=[entry["id"] for entry in ENTRIES])
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_rule_hides_what_it_matches(entry: dict[str, object], data: st.DataObject) -> None:
    original = _as_gitleaks_wrote_it(str(entry["regex"]))
    rule = RULES[str(entry["id"])]
    found = data.draw(st.from_regex(original, fullmatch=True), label="match")
    match = rule.pattern.match(found)  # the translated rule accepts what gitleaks' accepts
    assert match is not None
    start, end = rule.secret_span(match)
    secret = found[start:end]
    if rule.allowed(match, secret) or not secret.strip():
        return
    # A rule runs when one of its keywords is in the text (gitleaks' semantics): some tokens do not
    # carry theirs (Airtable's `pat...`, Facebook's digits), so the line names the issuer.
    keyword = entry["keywords"][0]  # type: ignore[index]
    redacted = NOOP.text(f"{keyword} seen {found} here")
    assert secret not in redacted, (secret, redacted)
    assert REDACTED in redacted, (secret, redacted)


def test_a_rule_that_matches_a_token_s_beginning_hides_the_whole_token() -> None:
    """gitleaks' short-lived Bedrock key rule matches only the key's constant beginning."""
    key = "bedrock-api-key-YmVkcm9jay5hbWF6b25hd3MuY29t" + "L2FjdGlvbj1DYWxsV2l0aEJlYXJlclRva2Vu" + "Jlg9QW16"
    assert NOOP.text(f"using {key} now") == f"using {REDACTED} now"


def _adversarial_unit(entry: dict[str, object]) -> str:
    """The rule's keywords as written and in capitals, each followed by runs of what most token classes
    accept: the inputs that make a pattern start many matches and extend each one as far as it can."""
    keywords = [str(keyword) for keyword in entry["keywords"]]  # type: ignore[attr-defined]
    fillers = ("0" * 24, "a1" * 12 + "-", "A" * 20 + ".", "/+=" * 4)
    return "".join(k + f for k in keywords + [k.upper() for k in keywords] for f in fillers) + " "


def _best_cpu_seconds(pattern: re.Pattern[str], *texts: str) -> list[float]:
    best = [float("inf")] * len(texts)
    for _ in range(3):
        for index, text in enumerate(texts):
            started = time.process_time()
            pattern.sub("", text)
            best[index] = min(best[index], time.process_time() - started)
    return best


def test_every_rule_costs_linear_time() -> None:
    """10x the input costs ~10x when linear and ~100x when quadratic; the bound sits between (a ratio of
    two sizes measured side by side, so a busy machine slows both alike)."""
    slow = []
    for entry in ENTRIES:
        unit = _adversarial_unit(entry)
        small = (unit * (20_000 // len(unit) + 1))[:20_000]
        large = (unit * (200_000 // len(unit) + 1))[:200_000]
        small_s, large_s = _best_cpu_seconds(RULES[str(entry["id"])].pattern, small, large)
        ratio = large_s / max(small_s, 1e-5)
        if ratio > 30:
            slow.append(f"{entry['id']}: {ratio:.0f}x")
    assert slow == []


@pytest.mark.long
@pytest.mark.parametrize("entry", ENTRIES, ids=[entry["id"] for entry in ENTRIES])
@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_rule_costs_linear_time_on_its_own_tokens(
    entry: dict[str, object], data: st.DataObject
) -> None:
    """A true positive of the rule, whole and cut short by one and by three characters, repeated
    without a separator: each start of a match runs as far as it can before failing."""
    token = data.draw(st.from_regex(_as_gitleaks_wrote_it(str(entry["regex"])), fullmatch=True))
    keyword = str(entry["keywords"][0])  # type: ignore[index]
    for unit in (token, token[:-1], token[:-3], keyword + token[:-1]):
        if not unit.strip():
            continue
        small = (unit * (20_000 // len(unit) + 1))[:20_000]
        large = (unit * (200_000 // len(unit) + 1))[:200_000]
        small_s, large_s = _best_cpu_seconds(RULES[str(entry["id"])].pattern, small, large)
        assert large_s / max(small_s, 1e-5) < 30, (unit[:40], small_s, large_s)
