"""`diagnose serve` wiring (the browser test drives it for real)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from console.commands.main import _parser
from console.commands.web_server import console_command, is_loopback


def test_serve_defaults_to_loopback() -> None:
    args = _parser().parse_args(["serve"])
    assert (args.host, args.port, args.config) == ("127.0.0.1", 8000, None)
    assert is_loopback("127.0.0.1")
    assert is_loopback("::1")
    assert is_loopback("localhost")
    assert not is_loopback("0.0.0.0")  # noqa: S104 - a string the test checks is not loopback
    assert not is_loopback("example.org")


def test_each_session_runs_the_console_with_this_interpreter(tmp_path: Path) -> None:
    config = tmp_path / "my config.toml"
    assert shlex.split(console_command(config)) == [
        sys.executable,
        "-m",
        "console",
        "console",
        "--config",
        str(config.resolve()),
    ]
    assert shlex.split(console_command(None)) == [sys.executable, "-m", "console", "console"]
