"""How many examples a property runs: one test, two budgets, chosen by the Hypothesis settings profile.

tests/conftest.py registers the `long` profile next to Hypothesis' own `default`. `pytest` runs
`default`; `pytest --hypothesis-profile long` is a fuzzing session: every property whose examples are
costly runs the larger budget it names with `examples(default, long=...)` (instead of a second, copied
`_long` test with a bigger number), and a property that names no budget runs the profile's own.
"""

from __future__ import annotations

from hypothesis import settings

LONG = "long"


def long_profile() -> bool:
    """Whether this session runs the `long` profile (a `--hypothesis-verbosity` or `--hypothesis-explain`
    option loads a copy of it named `long-with-...`)."""
    return settings.get_current_profile_name().partition("-with-")[0] == LONG


def examples(default: int, *, long: int) -> int:
    """`max_examples` for a property: `default` in the default run, `long` under the `long` profile.

    Read when the test module is imported, which is after the profile was loaded."""
    return long if long_profile() else default
