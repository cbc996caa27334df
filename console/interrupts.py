"""What Ctrl-C does at each moment of a `diagnose` command (docs/contracts.md, "CLI").

Python's own SIGINT handler raises `KeyboardInterrupt` wherever the interpreter happens to be (in an
import, in the middle of setting up the audit), and `asyncio.run` swaps it for one that cancels the
main task, so what Ctrl-C did depended on the moment, and early on it was a traceback. A command
instead installs one handler for its whole life, and each phase says what Ctrl-C means now:

- before a run exists (imports, configuration, opening the audit, reading the query) it stops the
  command: `KeyboardInterrupt`, which `main` turns into one line and the exit code of a cancel;
- while the run goes it cancels the run for real (audited CANCELLED, exit 12);
- once the run has ended its result stands: Ctrl-C is ignored while it is closed and printed.

The handler never touches the event loop's own signal machinery, so `asyncio.run` leaves it in place.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any


def _ignore() -> None:
    """Ctrl-C after the run ended: the result is already decided."""


class Interrupts:
    """SIGINT for one command; `during` and `settled` say what it means from now on."""

    def __init__(self) -> None:
        self._action: Callable[[], None] | None = None  # None: stop the command
        self._previous: Any = None
        self._installed = False

    def install(self) -> None:
        """Take SIGINT over (only the main thread may; elsewhere, as in some tests, nothing changes).
        A SIGINT the parent ignores (a background job, `nohup`) stays ignored, as Python leaves it."""
        if threading.current_thread() is not threading.main_thread() or self._installed:
            return
        if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
            return
        self._previous = signal.signal(signal.SIGINT, self._handle)
        self._installed = True

    def restore(self) -> None:
        """Give SIGINT back (the console and `serve` handle it themselves; in-process callers get theirs)."""
        if self._installed:
            signal.signal(signal.SIGINT, self._previous)
            self._installed = False

    def during(self, action: Callable[[], None]) -> None:
        """From now on Ctrl-C calls `action` (in the main thread, between two bytecodes: `action` must
        only schedule work, e.g. `loop.call_soon_threadsafe`)."""
        self._action = action

    def settled(self) -> None:
        """The run has ended: its result stands, whatever Ctrl-C comes now."""
        self._action = _ignore

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self._action is None:
            raise KeyboardInterrupt
        self._action()
