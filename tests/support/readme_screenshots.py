"""The README's screenshots, made the way the snapshot tests make theirs: pinned IDs, clock, timings,
cursor blink and terminal size, so the same code gives the same SVG.

    python -m tests.support.readme_screenshots        # rewrite docs/*.svg after an intended change

`tests/console/test_readme_screenshots.py` fails when the committed files differ from what this makes.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from textual.pilot import Pilot

from tests.support.console import make_app, run_to_end

DOCS = Path(__file__).parents[2] / "docs"


async def _draft_with_evidence(pilot: Pilot[Any]) -> None:
    """The evidence-backed Draft, with the cited log query open in the detail panel."""
    await run_to_end(pilot)
    app: Any = pilot.app
    view = app.investigate.run_view
    if not view.narrow:
        view.timeline.jump_to("call-2")
        view.show_detail(("call", "call-2"))
    await pilot.pause()


SHOTS: dict[str, tuple[tuple[int, int], Callable[[Pilot[Any]], Awaitable[None]]]] = {
    "console.svg": ((120, 40), _draft_with_evidence),
    "console-80x24.svg": ((80, 24), _draft_with_evidence),
}


def screenshot(name: str) -> str:
    """One README screenshot as SVG text (runs the console headless in its own event loop)."""
    size, before = SHOTS[name]
    with tempfile.TemporaryDirectory(prefix="readme-shot-") as tmp:
        app = make_app(Path(tmp), "evidence-backed-diagnosis")
        shots: list[str] = []

        async def auto_pilot(pilot: Pilot[Any]) -> None:
            await before(pilot)
            await pilot.pause()
            await pilot.wait_for_scheduled_animations()
            shots.append(app.export_screenshot(title="diagnose"))
            app.exit()

        app.run(headless=True, auto_pilot=auto_pilot, size=size)
    assert shots, "the console exited before the screenshot"
    return shots[0]


def main() -> int:
    for name in SHOTS:
        (DOCS / name).write_text(screenshot(name), encoding="utf-8")
        print(f"wrote docs/{name}")
    return 0


if __name__ == "__main__":
    asyncio.set_event_loop(asyncio.new_event_loop())
    sys.exit(main())
