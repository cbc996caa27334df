"""A call's value or the error it raised, for properties whose every input ends one way or the other.

`pytest.raises` is for a call that must fail. A property ("a typed rejection or a valid value") takes
either; asserting on the error inside its `except` block hides which branch ran, so the checks read
the outcome instead: `isinstance(outcome, TheError)` picks the branch and narrows the type.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
E = TypeVar("E", bound=BaseException)


def returned_or_raised(call: Callable[[], T], error: type[E]) -> T | E:
    """What `call()` returns, or the `error` it raises (any other exception propagates)."""
    try:
        return call()
    except error as raised:
        return raised
