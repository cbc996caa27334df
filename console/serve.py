"""`diagnose serve`: the same console in a web browser, through textual-serve.

Every browser session starts its own `diagnose console` process (its own session and runs, one shared
audit file). The console runs tools against the configured backends and has no login of its own, so it
binds to 127.0.0.1 unless told otherwise.
"""

from __future__ import annotations

import ipaddress
import shlex
import sys
from pathlib import Path

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000


def console_command(config: Path | None) -> str:
    """The shell command textual-serve runs per session: this interpreter, so a venv install works."""
    parts = [sys.executable, "-m", "console", "console"]
    if config is not None:
        parts += ["--config", str(config.resolve())]
    return shlex.join(parts)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve(host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, config: Path | None = None) -> int:
    from textual_serve.server import Server

    if not is_loopback(host):
        print(
            f"diagnose serve: listening on {host}: anyone who can reach it can run the agent; "
            "put it behind authentication",
            file=sys.stderr,
        )
    Server(command=console_command(config), host=host, port=port, title="diagnose").serve()
    return 0
