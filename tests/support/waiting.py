"""Waiting for something a test cannot await directly: poll it, and fail loudly when it never holds.

A polling loop that simply ends when its time is up lets the test go on from a state it never
reached: it then fails somewhere unrelated, or passes without having tested what it says. Every
wait in the suite goes through `wait_until`, which names what it waited for when it gives up.
`tests.support.console.wait_until` is the same wait between the frames of a Textual pilot.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any


async def wait_until(
    condition: Callable[[], object],
    what: str,
    *,
    timeout_s: float = 30.0,
    interval_s: float = 0.01,
    pause: Callable[[float], Awaitable[Any]] = asyncio.sleep,
) -> None:
    """Poll `condition` every `interval_s` (through `pause`) until it holds; after `timeout_s`, fail
    with an AssertionError naming `what`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not condition():
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        await pause(interval_s)
