"""Console startup: process start to the first painted frame of `diagnose`, against a minimal Textual app.

    python -m tests.benchmarks.bench_console_startup [--repeats 15] [--warmup 2] [--base DIR]

The console promises its first frame at once, with the engine (Haystack) loading only afterwards. This
measures it the way an operator sees it: each sample is a fresh `python` process, so interpreter start,
imports, CSS parsing, compose and the first compositor pass all count.

- diagnose: the real entry point, `console.cli.main([])` (what the `diagnose` script runs), headless.
- minimal: a Textual `App` with one `Static`, headless (the floor any Textual app pays).
- python: `python -c pass` (the interpreter's own start, for reference).
- base (with `--base DIR`): `diagnose` from another checkout, e.g. a `git worktree add` copy of the
  commit before a change, run in the same loop: the before/after figures come from the same minutes.

Every child writes and reads its bytecode under one cache folder of the run (`PYTHONPYCACHEPREFIX`), so
after the warm-up rounds every side starts from compiled modules, as an installed console does, even
where the environment sets `PYTHONDONTWRITEBYTECODE` (otherwise the project's own modules would be
compiled from source in every process while Textual's come precompiled).

A small wrapper in the child patches `App._display`, which Textual calls with each frame it paints: on
the first one it records `time.perf_counter()` (CLOCK_MONOTONIC, comparable across processes) and whether
`haystack` is imported, writes both to a file and exits the app. The parent takes `perf_counter()` just
before starting the process. Runs are interleaved (diagnose, minimal, python, ...); medians are
reported with the ratio diagnose / minimal (target: within 1.5x), and with `--base` the ratio diagnose /
base. Exit 1 if the target is missed or Haystack was imported before the first frame.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.benchmarks.machine import hardware

TARGET_RATIO = 1.5
REPO = Path(__file__).resolve().parents[2]

FIRST_FRAME_HOOK = """
import json, sys, time
from textual.app import App

_out = sys.argv[1]
_display = App._display
_seen = []

def _first_frame(self, screen, renderable):
    _display(self, screen, renderable)
    # The first frame of a screen with content: Textual may paint its empty default screen before the
    # app's own screen (DiagnoseApp switches to its "investigate" mode) is mounted.
    if renderable is not None and not _seen and screen.children:
        _seen.append(time.perf_counter())
        with open(_out, "w") as f:
            json.dump({"t": _seen[0], "haystack": "haystack" in sys.modules}, f)
        self.call_later(self.exit)

App._display = _first_frame
_run = App.run
App.run = lambda self, *a, **kw: _run(self, *a, **{**kw, "headless": True})
"""

CHILDREN = {
    # Headless, it needs no terminal: the check that refuses a console without one is told so.
    "diagnose": FIRST_FRAME_HOOK
    + "import console.commands.open_console\n"
    + "console.commands.open_console.console_terminal_problem = lambda: None\n"
    + "from console.cli import main\nmain([])\n",
    "minimal": FIRST_FRAME_HOOK
    + "from textual.widgets import Static\n"
    + "class Minimal(App):\n"
    + "    def compose(self):\n"
    + "        yield Static('hello')\n"
    + "Minimal().run()\n",
    "python": "import json, sys, time\n"
    + "json.dump({'t': time.perf_counter(), 'haystack': False}, open(sys.argv[1], 'w'))\n",
}


def sample(kind: str, workdir: Path, repo: Path = REPO) -> tuple[float, bool]:
    """One fresh process: seconds from spawn to its first painted frame, and whether Haystack was loaded."""
    out = workdir / f"{kind}.json"
    out.unlink(missing_ok=True)
    env = {
        **os.environ,
        "XDG_STATE_HOME": str(workdir / "state"),
        "PYTHONPATH": str(repo),
        "PYTHONPYCACHEPREFIX": str(workdir / "bytecode"),
    }
    env = {k: v for k, v in env.items() if not k.startswith("DIAGNOSE_") and k != "PYTHONDONTWRITEBYTECODE"}
    child = CHILDREN["diagnose" if kind == "base" else kind]
    start = time.perf_counter()
    run = subprocess.run(
        [sys.executable, "-c", child, str(out)],
        cwd=workdir,
        env=env,
        check=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        timeout=60,
    )
    if run.stderr.strip():
        raise RuntimeError(f"{kind} wrote to stderr:\n{run.stderr.decode(errors='replace')[-3000:]}")
    record = json.loads(out.read_text())
    return record["t"] - start, bool(record["haystack"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument(
        "--base", type=Path, metavar="DIR", help="another checkout whose `diagnose` runs in the same loop"
    )
    args = parser.parse_args(argv)

    kinds = [*CHILDREN, *(["base"] if args.base else [])]
    times: dict[str, list[float]] = {kind: [] for kind in kinds}
    haystack_at_first_frame = False
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp:
        workdir = Path(tmp)
        for i in range(args.warmup + args.repeats):
            for kind in kinds:
                seconds, haystack = sample(kind, workdir, args.base.resolve() if kind == "base" else REPO)
                haystack_at_first_frame |= kind == "diagnose" and haystack
                if i >= args.warmup:
                    times[kind].append(seconds)

    medians = {kind: statistics.median(values) for kind, values in times.items()}
    ratio = medians["diagnose"] / medians["minimal"]
    print(f"machine: {hardware()}, textual {__import__('textual').__version__}")
    print(f"{args.repeats} interleaved fresh processes each ({args.warmup} warm-up rounds dropped)")
    for kind, values in times.items():
        print(
            f"  {kind:<9} median {medians[kind] * 1000:7.1f} ms   "
            f"min {min(values) * 1000:7.1f} ms   max {max(values) * 1000:7.1f} ms"
        )
    print(f"ratio diagnose / minimal: {ratio:.2f} (target <= {TARGET_RATIO})")
    if args.base:
        print(
            f"ratio base / minimal: {medians['base'] / medians['minimal']:.2f}; "
            f"diagnose / base: {medians['diagnose'] / medians['base']:.2f}"
        )
    print(f"haystack imported at the first frame: {'YES' if haystack_at_first_frame else 'no'}")
    ok = ratio <= TARGET_RATIO and not haystack_at_first_frame
    print("target met" if ok else "TARGET MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
