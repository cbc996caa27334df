"""`diagnose run` on a terminal: while a model round waits, one status line on stderr says how long.

A model round is the long silence of a run (a slow local model; an endpoint that never answers, for
up to `[model] timeout_s`). Without a sign of life an operator cannot tell a slow model from a hung
command. The line is drawn only when stderr is a terminal, only once a round has waited a second,
rewritten in place every second and erased when the round ends, so nothing of it stays in the
output. (The console shows the same in its status bar: `running N s: model round R`.)
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TextIO

from console.safe_text import neutralize

if TYPE_CHECKING:
    from agent.events.run_events import RunEvent

ERASE_LINE = "\r\x1b[2K"
SHOW_AFTER_S = 1.0


class ModelWaitLine:
    """An event sink that knows whether a model round is waiting, and a ticker that says so."""

    def __init__(self, stream: TextIO, where: str, clock: Callable[[], float] = time.monotonic) -> None:
        self._stream = stream
        self._where = neutralize(where, newlines=False)
        self._clock = clock
        self._round: int | None = None
        self._since = 0.0
        self._shown = False

    def __call__(self, event: RunEvent) -> None:
        from agent.events.run_events import ModelRoundFinished, ModelRoundStarted, RunFinished

        if isinstance(event, ModelRoundStarted):
            self._round, self._since = event.round, self._clock()
        elif isinstance(event, ModelRoundFinished | RunFinished):  # the round returned, or the run ended
            self._round = None
            self.erase()

    async def tick(self) -> None:
        """Redraw every second until cancelled."""
        while True:
            await asyncio.sleep(1.0)
            self.draw()

    def draw(self) -> None:
        if self._round is None:
            return
        waited = self._clock() - self._since
        if waited < SHOW_AFTER_S:
            return
        waiting = f"model round {self._round}: waiting {waited:.0f} s for {self._where}"
        self._write(f"{ERASE_LINE}{waiting} · Ctrl-C cancels")
        self._shown = True

    def erase(self) -> None:
        if self._shown:
            self._write(ERASE_LINE)
            self._shown = False

    def _write(self, text: str) -> None:
        try:
            self._stream.write(text)
            self._stream.flush()
        except OSError:
            pass  # the terminal went away: the run goes on without its status line
