"""Retrying an audit operation with jittered, doubling backoff until a deadline.

Both stores wait this way for what passes on its own: the file for another process's write lock, the
server for a deadlock, a lock wait timeout or a lost connection. Each store decides which failures are
worth another attempt, and what it raises when it gives up.

The server's retry backs off from 50 ms, doubling to 2 s, within a 30 s deadline; its read timeout is
a third of that deadline. Maintenance (migration steps, prune batches, OPTIMIZE TABLE) runs on a
connection of its own with a 30 s read timeout, as it legitimately takes long.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
E = TypeVar("E", bound=Exception)


def retry_with_backoff(
    action: Callable[[], T],
    *,
    retry_on: type[E] | tuple[type[E], ...],
    on_failure: Callable[[E, bool], BaseException | None],
    deadline_s: float,
    first_delay_s: float,
    max_delay_s: float,
) -> T:
    """`action`, attempted again after each failure of a `retry_on` type that `on_failure` lets pass.

    `on_failure(error, out_of_time)` returns what to raise (the error itself to raise it as it is,
    or another one, chained to it), or None once the next attempt may start. `out_of_time`: the
    deadline, counted from the first attempt, has passed. Waits start at `first_delay_s`, double up
    to `max_delay_s`, and are jittered to between half and all of that, so writers that collided
    once do not collide again in step.
    """
    deadline = time.monotonic() + deadline_s
    delay = first_delay_s
    while True:
        try:
            return action()
        except retry_on as exc:
            stop = on_failure(exc, time.monotonic() >= deadline)
            if stop is exc:
                raise
            if stop is not None:
                raise stop from exc
        time.sleep(delay * random.uniform(0.5, 1.0))  # noqa: S311 - retry jitter, not a secret
        delay = min(delay * 2, max_delay_s)
