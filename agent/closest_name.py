"""The name an operator probably meant, for a message about a name that does not exist.

A mistyped scenario, option or configuration key is refused either way; naming the closest valid one
turns a lookup in the documentation into a retype. The match is difflib's ratio of common characters,
so a transposition (`qeury`) or a missing letter (`diagnosi`) finds its name and unrelated words find
none rather than a random one.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

# Below this similarity a suggestion is more likely to mislead than to help (difflib's default).
CUTOFF = 0.6


def closest_name(word: str, names: Iterable[str]) -> str | None:
    """The valid name most like `word`, or None when none is close."""
    matches = difflib.get_close_matches(word, list(names), n=1, cutoff=CUTOFF)
    return matches[0] if matches else None


def did_you_mean(word: str, names: Iterable[str]) -> str:
    """` (did you mean 'name'?)` to append to a message, or nothing when no name is close."""
    match = closest_name(word, names)
    return f" (did you mean {match!r}?)" if match is not None and match != word else ""
