"""A paste as key events (a terminal without bracketed paste) into Textual's TextArea and into the
console's QueryBox, side by side.

    python -m tests.benchmarks.bench_query_paste [--sizes 1000 2000 5000] [--repeats 3]

Each sample posts `size` key events at once to an 80×24 app holding only the box (as the driver does
when one read of the terminal returns a whole paste), then waits until the box holds all of it. It
reports the time and the edits the box applied (each edit re-wraps the line and moves the cursor over
it) for both widgets, measured one after the other in the same process, and their ratio: a loaded
machine slows both alike, so the ratio is the figure to read.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any, ClassVar

from textual import events
from textual.app import App, ComposeResult
from textual.widgets import TextArea

from console.widgets.query_box import QueryBox
from tests.benchmarks.machine import hardware

LINE = "payment-service 2026-11-30 02:00 UTC 支付超时 HikariPool-1 connection timeout; "


class BoxApp(App[None]):
    CSS: ClassVar[str] = "#query { height: 4; }"

    def __init__(self, box: type[TextArea]) -> None:
        super().__init__()
        self.box = box

    def compose(self) -> ComposeResult:
        if self.box is QueryBox:
            yield QueryBox(id="query")
        else:
            yield TextArea(id="query", soft_wrap=True, tab_behavior="focus", show_line_numbers=False)


def key_of(character: str) -> events.Key:
    return events.Key("space" if character == " " else character, character)


async def sample(box: type[TextArea], size: int) -> tuple[float, int]:
    """(seconds until the whole paste is in, edits applied) for one paste of `size` characters."""
    text = (LINE * (size // len(LINE) + 1))[:size]
    app = BoxApp(box)
    async with app.run_test(size=(80, 24)) as pilot:
        area = app.query_one("#query", TextArea)
        area.focus()
        await pilot.pause()
        edits = [0]
        edit = area.edit

        def counting(*args: Any, **kwargs: Any) -> Any:
            edits[0] += 1
            return edit(*args, **kwargs)

        area.edit = counting  # type: ignore[method-assign]
        started = time.perf_counter()
        for character in text:
            app.post_message(key_of(character))
        while len(area.document.text) < size:  # noqa: ASYNC110 - polling, as a reader of the screen would
            await asyncio.sleep(0.005)
        elapsed = time.perf_counter() - started
        assert area.document.text == text
    return elapsed, edits[0]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 2000, 5000])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(hardware())
    print(f"{'chars':>6} {'TextArea s':>11} {'edits':>6} {'QueryBox s':>11} {'edits':>6} {'ratio':>7}")
    for size in args.sizes:
        plain: list[float] = []
        burst: list[float] = []
        edits = {TextArea: 0, QueryBox: 0}
        for _ in range(args.repeats):
            for box, times in ((TextArea, plain), (QueryBox, burst)):
                seconds, edits[box] = asyncio.run(sample(box, size))
                times.append(seconds)
        a, b = statistics.median(plain), statistics.median(burst)
        print(f"{size:>6} {a:>11.2f} {edits[TextArea]:>6} {b:>11.2f} {edits[QueryBox]:>6} {a / b:>6.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
