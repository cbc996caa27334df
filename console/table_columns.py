"""Which columns of a table a window of a given width shows.

A table's columns have fixed widths (they never jump as pages arrive) and one flexible column takes the
rest of the window. At 80 columns the fixed ones alone would push the flexible one (and whatever
follows the widest) off the right edge, behind a horizontal scroll nobody finds; so a narrow window
leaves out the columns an operator can spare, in the order the table ranks them, and the line under
the table shows the highlighted row's left-out cells whole.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

MIN_FLEX_WIDTH = 12  # the flexible column's width below which a droppable column is left out
SCROLLBAR = 1  # the cell the table keeps free beside its last column


@dataclass(frozen=True)
class Column:
    label: str
    width: int  # cells; 0 for the flexible column
    drop: int = 0  # left out when narrow, the highest rank first; 0: always shown


def flexible_width(columns: Sequence[Column], shown: Sequence[int], width: int, padding: int) -> int:
    """What the flexible column gets when `shown` columns stand in a table `width` cells wide."""
    fixed = sum(columns[i].width + 2 * padding for i in shown if columns[i].width)
    return width - fixed - 2 * padding - SCROLLBAR


def shown_columns(columns: Sequence[Column], width: int, padding: int = 1) -> tuple[int, ...]:
    """The indices of the columns to show, in table order: every column if the flexible one keeps
    MIN_FLEX_WIDTH, else without the droppable ones, highest rank first, until it does (or none is left
    to drop: the table then scrolls sideways)."""
    shown = list(range(len(columns)))
    for rank in sorted({column.drop for column in columns if column.drop}, reverse=True):
        if flexible_width(columns, shown, width, padding) >= MIN_FLEX_WIDTH:
            break
        shown = [i for i in shown if columns[i].drop != rank]
    return tuple(shown)
