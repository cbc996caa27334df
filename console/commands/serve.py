"""`diagnose serve`: the console in a web browser, through textual-serve (`console.commands.web_server`,
imported only when this command runs)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from console.commands.options import CONFIG_HELP
from console.safe_text import neutralize

if TYPE_CHECKING:
    from console.interrupts import Interrupts


def add_serve_parser(subparsers: Any) -> None:
    serve = subparsers.add_parser("serve", help="the console in a web browser (textual-serve)")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=_port, default=8000, help="TCP port to listen on (default 8000)")
    serve.add_argument("--config", type=Path, metavar="F", help=CONFIG_HELP)
    serve.add_argument("--public-url", help="the address browsers use, when a proxy stands in front")
    serve.add_argument(
        "--max-consoles",
        type=_console_cap,
        help="browser sessions served at once (default: [serve] max_consoles)",
    )
    serve.set_defaults(handler=run_serve_command)


def run_serve_command(args: argparse.Namespace, interrupts: Interrupts) -> int:
    from console.commands.web_server import serve

    return serve(args.host, args.port, args.config, args.max_consoles, args.public_url)


def _port(value: str) -> int:
    if not (value.isascii() and value.isdigit() and len(value) <= 5 and 1 <= int(value) <= 65535):
        raise argparse.ArgumentTypeError(f"not a TCP port: {neutralize(value, newlines=False)!r}")
    return int(value)


def _console_cap(value: str) -> int:
    if not (value.isascii() and value.isdigit() and len(value) <= 2 and 1 <= int(value) <= 64):
        raise argparse.ArgumentTypeError(f"not a number from 1 to 64: {neutralize(value, newlines=False)!r}")
    return int(value)
