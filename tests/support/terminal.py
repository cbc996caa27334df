"""`diagnose` on a real pseudo-terminal, for what only a terminal shows: the console starting, keys
reaching it, the line it leaves behind when it exits.

`in_terminal` gives the process a pty on the streams named (the others are pipes), feeds it keys,
and collects everything written to the pty until the process ends.
"""

from __future__ import annotations

import contextlib
import os
import pty
import re
import select
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
_ESCAPES = re.compile(r"\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)|[@-Z\\-_])")


@dataclass
class TerminalRun:
    code: int
    screen: str  # what reached the terminal, escape sequences removed
    stdout: str  # what went to a pipe instead, when stdout was not the terminal


def in_terminal(
    *argv: str | Path,
    streams: tuple[str, ...] = ("stdin", "stdout", "stderr"),
    keys: bytes = b"",
    key_every_s: float = 0.3,
    env: dict[str, str] | None = None,
    timeout_s: float = 60,
) -> TerminalRun:
    """Run `python -m console *argv` with a pty on `streams`; `keys` are typed again every
    `key_every_s` until it exits (a key sent before the screen that takes it is harmless)."""
    master, slave = pty.openpty()
    os.set_blocking(master, False)
    options: dict[str, object] = {name: slave for name in streams}
    for name in {"stdin", "stdout", "stderr"} - set(streams):
        options[name] = subprocess.DEVNULL if name == "stdin" else subprocess.PIPE
    proc = subprocess.Popen(  # type: ignore[call-overload]
        [sys.executable, "-m", "console", *map(str, argv)],
        cwd=REPO,
        env=env,
        start_new_session=True,  # the pty becomes its controlling terminal, as in a shell
        **options,
    )
    os.close(slave)
    seen = bytearray()
    deadline = time.monotonic() + timeout_s
    next_key = time.monotonic() + key_every_s
    try:
        while True:
            ready, _, _ = select.select([master], [], [], 0.05)
            chunk = b""
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: every end of the pty's other side is closed
                    chunk = b""
                seen += chunk
            if proc.poll() is not None and not chunk:
                break
            now = time.monotonic()
            if keys and now >= next_key and proc.poll() is None:
                with contextlib.suppress(OSError):
                    os.write(master, keys)
                next_key = now + key_every_s
            if now > deadline:
                proc.kill()
                raise AssertionError(
                    f"still running after {timeout_s} s; the terminal showed: {screen_text(seen)[-2000:]!r}"
                )
    finally:
        os.close(master)
    out = proc.stdout.read().decode() if proc.stdout is not None else ""
    return TerminalRun(proc.wait(), screen_text(seen), out)


def screen_text(raw: bytes | bytearray) -> str:
    return _ESCAPES.sub("", raw.decode("utf-8", errors="replace")).replace("\r", "")
