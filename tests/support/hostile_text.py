"""Strings a model or a file can hand the engine that ordinary text never holds, for property tests.

Lone surrogates (what a JSON `\\ud800` escape decodes to: no UTF-8 encoder takes them), NUL, C0 and C1
controls and terminal escape sequences, bidi overrides and isolates, invisible format characters, and
a string of a mebibyte. Every one must end in a typed outcome wherever the engine meets it.

Also the fixed hostile text the terminal tests feed the CLI and the console, a scenario that carries
it everywhere a run shows text, and `unsafe`, which judges what reached the terminal.
"""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from tests.support.resilience import scenario, tool_call

MEBIBYTE = 1024 * 1024
SAMPLES = (
    "\ud800",
    "a\udfffb",
    "\udbff\udc00",  # two halves of a pair as separate code points: still not UTF-8 text
    "\x00",
    "nul\x00in the middle",
    "\x1b[2J\x1b]0;title\x07",
    "\x9b31m",
    "\x85next line",
    "\u202etxt.exe",
    "\u2066isolate\u2069",
    "\u200b\ufeff\u00ad",
    "\r\n\t\x0b\x0c",
)

# Every code point class above, mixed with plain letters and CJK text.
_hostile_chars = st.characters(categories=["Cs", "Cc", "Cf", "Zl", "Zp"])
_plain_chars = st.sampled_from("az09-_:连接池")
mixed = st.text(alphabet=st.one_of(_hostile_chars, _plain_chars), min_size=1, max_size=24)
huge = st.sampled_from(["x", "\ud800", "连", "\x1b"]).map(
    lambda ch: ch * (MEBIBYTE // len(ch.encode("utf-8", "surrogatepass")))
)

hostile_strings = st.one_of(st.sampled_from(SAMPLES), mixed, huge)
"""One hostile string: a known sample, a random mix, or (rarely picked by shrinking) a mebibyte."""

small_hostile_strings = st.one_of(st.sampled_from(SAMPLES), mixed)
"""Hostile strings without the mebibyte ones, for places where size is checked before content."""


# What no path to a terminal may pass on raw: the console and CLI tests feed these and check with `unsafe`.
UNSAFE_CATEGORIES = {"Cc", "Cf", "Zl", "Zp", "Cs"}
BIDI = "\u202e\u2066\u2069\u202a"
INVISIBLE = "\u200b\u200d\u2060\ufeff\u00ad\U000e0041"
SEPARATORS = "\u2028\u2029\x85"
ESCAPES = "\x1b[2J\x1b]0;pwned\x07\x1b]8;;http://evil.example/\x1b\\link\x1b]8;;\x1b\\\x9b31m\r\x08"
HOSTILE = f"evil{BIDI}gnp.exe{INVISIBLE}{SEPARATORS}{ESCAPES}end"


def unsafe(text: str, *, allow_layout: bool = True) -> list[str]:
    """Characters of `text` a terminal must never receive raw (judged by unicodedata, independently)."""
    return [
        f"U+{ord(ch):04X}"
        for ch in text
        if unicodedata.category(ch) in UNSAFE_CATEGORIES and not (allow_layout and ch in "\n\t")
    ]


def draft_with(text: str) -> str:
    return json.dumps(
        {
            "conclusion": text,
            "analysis": [
                {"kind": "FINDING", "statement": text, "scope": text, "evidence": [f"call{BIDI}1"]},
            ],
            "action_plan": [text],
            "recommendations": [text],
            "limitations": {"checked_scope": [text], "missing_info": [text]},
        },
        ensure_ascii=False,
    )


def hostile_scenario(tmp_path: Path) -> Path:
    rounds: list[dict[str, Any]] = [
        {"tool_calls": [tool_call(f"call{BIDI}1", "lookup_knowledge", {"query": "连接池"})]},
        {"text": draft_with(HOSTILE)},
    ]
    path = tmp_path / "hostile.json"  # JSON escapes: YAML itself refuses some of these characters raw
    text = json.dumps(scenario(rounds, name="hostile-text"))  # YAML reads "\\U000e0041", not a surrogate pair
    path.write_text(text.replace("\\udb40\\udc41", "\\U000e0041"), encoding="utf-8")
    return path
