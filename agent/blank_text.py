"""Blank means blank: text made only of characters nobody can read says nothing.

`str.strip()` removes whitespace but keeps format and zero-width characters, so a statement of
U+200B or U+2060 passed as "non-blank" although it shows as nothing. Blank here is every character
that renders as nothing or only moves the cursor: whitespace, control characters (Cc), format
characters (Cf) and Unicode's default-ignorable code points (variation selectors, Hangul fillers,
tag characters). The table is fixed, not computed from `unicodedata` at import (a full scan costs
half a second); tests/agent/test_blank_text.py checks it against the running Python's Unicode data.

The same table is the character class of the Draft schema's `pattern` (agent/draft/rules.py), so
the schema sent to a model server and the parser call the same strings blank.
"""

from __future__ import annotations

import re

# Inclusive code point ranges: whitespace, Cc, Cf and Default_Ignorable_Code_Point (Unicode 14+).
BLANK_RANGES: tuple[tuple[int, int], ...] = (
    (0x0000, 0x0020),
    (0x007F, 0x00A0),
    (0x00AD, 0x00AD),
    (0x034F, 0x034F),
    (0x0600, 0x0605),
    (0x061C, 0x061C),
    (0x06DD, 0x06DD),
    (0x070F, 0x070F),
    (0x0890, 0x0891),
    (0x08E2, 0x08E2),
    (0x115F, 0x1160),
    (0x1680, 0x1680),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x2000, 0x200F),
    (0x2028, 0x202F),
    (0x205F, 0x206F),
    (0x3000, 0x3000),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0),
    (0xFFF0, 0xFFFB),
    (0x110BD, 0x110BD),
    (0x110CD, 0x110CD),
    (0x13430, 0x1343F),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
)


def regex_escape(code_point: int) -> str:
    """`\\uXXXX` or `\\UXXXXXXXX`: understood alike by Python's `re` and llama.cpp's schema grammar."""
    return f"\\u{code_point:04X}" if code_point <= 0xFFFF else f"\\U{code_point:08X}"


def class_body(ranges: tuple[tuple[int, int], ...]) -> str:
    """The inside of a regex character class (`[...]`) for these ranges, escapes only."""
    return "".join(
        regex_escape(lo) if lo == hi else f"{regex_escape(lo)}-{regex_escape(hi)}" for lo, hi in ranges
    )


BLANK_CLASS = class_body(BLANK_RANGES)
_ONLY_BLANK = re.compile(f"[{BLANK_CLASS}]*")


def is_blank(text: str) -> bool:
    """True if `text` holds no character a reader could see."""
    return _ONLY_BLANK.fullmatch(text) is not None
