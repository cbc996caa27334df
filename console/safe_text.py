"""Text from files, web pages, databases and the model is data: it must never drive the terminal.

`neutralize` is the one function every path to a terminal goes through: the plain result of
`diagnose run`, `--json` / `--events -` output, the `diagnose audit` commands (every column, also of a
tampered audit file), error messages, and the console, whose widgets build Rich `Text` objects (so
markup is never parsed) and whose every painted line passes through it once more as a last line of
defence for widgets we do not own (toasts, inputs, tables: see `console.app.TerminalSafeFilter`).

Neutralised, whatever their source:
- C0 and C1 control characters and DEL: ESC starts CSI/OSC/DCS sequences (clear screen, window title,
  OSC 8 hyperlinks, OSC 52 clipboard writes), CR/BS/VT/FF rewrite what was already shown;
- bidi embeddings, overrides and isolates (U+202A–U+202E, U+2066–U+2069) and marks, which make text
  read differently than it is stored (the "Trojan Source" trick);
- line and paragraph separators (U+2028/U+2029), which split a line for some readers only;
- zero-width and other invisible format characters (U+200B–U+200F, U+2060–U+2064, U+FEFF, soft hyphen,
  Unicode tag characters used to smuggle hidden instructions), i.e. every character of Unicode
  category Cf, plus lone surrogates, which cannot even be encoded for output.
A newline and a tab are kept where the output is multi-line text; everywhere else they are escaped too.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from rich.cells import cell_len

Form = Literal["visible", "json", "blank"]

# Categories Cc (controls), Cf (format), Zl, Zp and Cs (surrogates), spelled out so the check is one
# regex search; tests/security compares it with `unicodedata` over every code point. The Cf ranges
# include those added after Unicode 14 (U+13439–U+1343F) so a newer Python changes nothing.
_OTHER_UNSAFE = (
    "\x7f-\x9f"
    "\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890-\u0891\u08e2\u180e"
    "\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb"
    "\ud800-\udfff"
    "\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
    "\U000e0001\U000e0020-\U000e007f"
)
_UNSAFE = re.compile(f"[\x00-\x1f{_OTHER_UNSAFE}]")
_UNSAFE_EXCEPT_LAYOUT = re.compile(f"[\x00-\x08\x0b-\x1f{_OTHER_UNSAFE}]")


def _visible(ch: str) -> str:
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def _json(ch: str) -> str:
    """A JSON string escape: the text stays valid JSON that decodes to the same value."""
    code = ord(ch)
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def _blank(ch: str) -> str:
    return " " * cell_len(ch)


_REPLACE = {"visible": _visible, "json": _json, "blank": _blank}


def neutralize(text: str, *, newlines: bool = True, form: Form = "visible") -> str:
    """`text` with every unsafe character replaced; unchanged (the same object) when there is none.

    `newlines=True` keeps `\\n` and `\\t` (multi-line output); `False` escapes them too (one line per
    record, a table cell). `form` says how a character is shown: "visible" as `\\x1b` / `\\u202e`,
    "json" as a JSON string escape (use on serialized JSON: it stays valid and decodes to the same
    value), "blank" as spaces of the character's width (a painted line whose layout is already fixed).
    """
    pattern = _UNSAFE_EXCEPT_LAYOUT if newlines else _UNSAFE
    if pattern.search(text) is None:
        return text
    replace = _REPLACE[form]
    return pattern.sub(lambda match: replace(match.group()), text)


def neutralize_values(obj: Any) -> Any:
    """`neutralize` applied to every string (keys included) of a JSON-like value (a Draft, a result)."""
    if isinstance(obj, str):
        return neutralize(obj)
    if isinstance(obj, dict):
        return {neutralize_values(key): neutralize_values(value) for key, value in obj.items()}
    if isinstance(obj, list | tuple):
        return [neutralize_values(item) for item in obj]
    return obj
