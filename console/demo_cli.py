"""`diagnose demo load-mysql`: load the bundled demo business database into the configured MariaDB/MySQL.

The only write path of the package, for demos and trainers; it targets `[mysql] dsn` (or --database)
and refuses system schemas. The model can never reach it.

`diagnose demo model-server` (console.model_server) starts a local model server for trainers.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any


def add_demo_parser(subparsers: Any) -> None:
    demo = subparsers.add_parser("demo", help="demo data helpers")
    demo_sub = demo.add_subparsers(dest="demo_command", required=True)
    load = demo_sub.add_parser("load-mysql", help="load the demo incident database into [mysql] dsn")
    load.add_argument("--config", type=Path, help="TOML configuration file (for [mysql])")
    load.add_argument("--database", help="target database (default: the DSN's database)")
    from console.model_server.command import add_model_server_parser

    add_model_server_parser(demo_sub)


def run_demo_command(args: argparse.Namespace) -> int:
    if args.demo_command == "model-server":
        from console.model_server.command import run_model_server

        return run_model_server(args)
    from agent.evidence import mysql_password
    from agent.secrets import build_redactor
    from agent.settings import ConfigError, load_settings
    from tools.mysql import load_demo_fixture, parse_dsn

    try:
        settings = load_settings(args.config)
    except ConfigError as exc:
        print(f"diagnose: {exc}", file=sys.stderr)
        return 3
    if not settings.mysql.dsn:
        print("diagnose: [mysql] dsn is not configured (config file or DIAGNOSE_MYSQL__DSN)", file=sys.stderr)
        return 3
    try:
        database = args.database or parse_dsn(settings.mysql.dsn).database
    except ValueError:
        print("diagnose: [mysql] dsn is not a valid mysql://user@host:port/database URL", file=sys.stderr)
        return 3
    if not database:
        print("diagnose: no database: pass --database or put one in the DSN", file=sys.stderr)
        return 3
    redactor = build_redactor(settings)
    try:
        count = asyncio.run(load_demo_fixture(settings.mysql.dsn, mysql_password(settings), database))
    except Exception as exc:  # the server's text may carry names, never the password (redacted anyway)
        print(f"diagnose: loading the demo database failed: {redactor.text(str(exc))}", file=sys.stderr)
        return 1
    print(f"loaded the demo incident database into {database!r} ({count} statements)")
    return 0
