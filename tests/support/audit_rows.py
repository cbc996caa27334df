"""Audit rows built by hand, typed as the browser returns them (`audit.rows`).

A row the store reads has every column of its table; a test that only cares about a few gives those
and the rest are NULL (`interrupted` 0, as the schema defaults it). A column the table does not have is
refused, so a misspelt one fails the test instead of reading as NULL.
"""

from __future__ import annotations

from typing import Any, cast

from audit.rows import RunRow


def run_row(**columns: Any) -> RunRow:
    """A `runs` row: the given columns, every other one NULL (`interrupted` 0)."""
    unknown = set(columns) - set(RunRow.__annotations__)
    assert not unknown, f"runs has no column {sorted(unknown)}"
    return cast(RunRow, dict.fromkeys(RunRow.__annotations__) | {"interrupted": 0} | columns)
