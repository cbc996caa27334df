"""Strings a model or a file can hand the engine that ordinary text never holds, for property tests.

Lone surrogates (what a JSON `\\ud800` escape decodes to: no UTF-8 encoder takes them), NUL, C0 and C1
controls and terminal escape sequences, bidi overrides and isolates, invisible format characters, and
a string of a mebibyte. Every one must end in a typed outcome wherever the engine meets it.
"""

from __future__ import annotations

from hypothesis import strategies as st

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
