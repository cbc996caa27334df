"""Blank means blank: the fixed table of invisible characters against this Python's Unicode data."""

from __future__ import annotations

import sys
import unicodedata

import pytest

from agent.blank_text import BLANK_RANGES, is_blank

# Default_Ignorable_Code_Point characters that are neither whitespace, Cc nor Cf (DerivedCoreProperties).
DEFAULT_IGNORABLE_OTHER = {0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x3164, 0xFFA0}
DEFAULT_IGNORABLE_OTHER |= set(range(0x180B, 0x180E)) | {0x180F} | set(range(0xFE00, 0xFE10))
DEFAULT_IGNORABLE_OTHER |= set(range(0x2065, 0x2066)) | set(range(0xFFF0, 0xFFF9))
DEFAULT_IGNORABLE_OTHER |= set(range(0xE0000, 0xE1000))


def _in_table(code_point: int) -> bool:
    return any(lo <= code_point <= hi for lo, hi in BLANK_RANGES)


def _invisible(code_point: int) -> bool:
    ch = chr(code_point)
    category = unicodedata.category(ch)
    return ch.isspace() or category in ("Cc", "Cf") or code_point in DEFAULT_IGNORABLE_OTHER


def test_every_whitespace_control_and_format_character_is_in_the_table() -> None:
    missing = [
        f"U+{cp:04X}"
        for cp in range(sys.maxunicode + 1)
        if not 0xD800 <= cp <= 0xDFFF and _invisible(cp) and unicodedata.category(chr(cp)) != "Cn"
        if not _in_table(cp)
    ]
    assert missing == []


def test_the_table_holds_only_invisible_or_unassigned_characters() -> None:
    visible = [
        f"U+{cp:04X}"
        for lo, hi in BLANK_RANGES
        for cp in range(lo, hi + 1)
        if not _invisible(cp) and unicodedata.category(chr(cp)) != "Cn"
    ]
    assert visible == []


@pytest.mark.parametrize(
    "text",
    ["", " ", "\t\n\r", "\u3000", "\u200b", "\u200b\u200c\u200d", "\u2060\ufeff", "\u00ad", "\ufe0f",
     "\u3164", "\U000e0041", "\u202e\u2066", "\x00\x1b", "\x85\xa0"],
)  # fmt: skip
def test_invisible_text_is_blank(text: str) -> None:
    assert is_blank(text)


@pytest.mark.parametrize("text", ["a", " x ", "\u200b诊\u200b", "。", "-", "\U0001f525", "\u2800"])
def test_text_anyone_can_see_is_not_blank(text: str) -> None:
    assert not is_blank(text)
