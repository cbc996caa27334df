"""`diagnose demo load-mysql`: load the bundled demo business database into a MariaDB/MySQL server.

The only write path of the package, for demos and trainers; the model can never reach it. It writes
(CREATE DATABASE, CREATE TABLE, INSERT), so it connects with an account given for that alone,
`--admin-dsn` (its password in the variable `--admin-password-env` names, never on the command line,
which other local users can read). The `[mysql]` account is the evidence account, read-only by
design (docs/query-mysql.md): it is never used here, and an `--admin-dsn` naming it
is refused. The database loaded is `--database`, else the admin DSN's, else `[mysql] dsn`'s, the one
the evidence account reads; system schemas are refused.

`diagnose demo model-server` (console.model_server) starts a local model server for trainers.
"""

from __future__ import annotations

import argparse
import asyncio
import os
from pathlib import Path
from typing import Any

from console.errors import SetupError, error
from console.presentation import counted

ADMIN_NEEDED = (
    "demo load-mysql writes, so it needs an account that may create a database and its tables: "
    "--admin-dsn mysql://admin@host:3306/database (its password in the variable --admin-password-env "
    "names); the [mysql] account is the read-only evidence account and is never used to write"
)


def add_demo_parser(subparsers: Any) -> None:
    demo = subparsers.add_parser("demo", help="demo data helpers")
    demo_sub = demo.add_subparsers(dest="demo_command", required=True)
    load = demo_sub.add_parser(
        "load-mysql", help="load the demo incident database, through an admin account (--admin-dsn)"
    )
    load.add_argument(
        "--admin-dsn",
        metavar="DSN",
        help="mysql://user@host:port[/database] of an account that may create the database and its "
        "tables (never the read-only [mysql] account)",
    )
    load.add_argument(
        "--admin-password-env", metavar="VAR", help="the environment variable holding that account's password"
    )
    load.add_argument("--config", type=Path, help="TOML configuration file (for [mysql])")
    load.add_argument(
        "--database", help="target database (default: the admin DSN's, else the [mysql] dsn's database)"
    )
    from console.model_server.command import add_model_server_parser

    add_model_server_parser(demo_sub)


_LOOPBACK = frozenset({"localhost", "127.0.0.1", "::1"})


def _account(target: Any) -> tuple[str, str, int]:
    """Who a DSN logs in as: user, server and port (the loopback's names are one server)."""
    host = "loopback" if target.host.lower() in _LOOPBACK else target.host.lower()
    return target.user, host, target.port


def run_demo_command(args: argparse.Namespace) -> int:
    if args.demo_command == "model-server":
        from console.model_server.command import run_model_server

        return run_model_server(args)
    return _load(args)


def _load(args: argparse.Namespace) -> int:
    from agent.secrets import build_redactor
    from agent.settings import load_settings
    from tools.mysql.adapter import load_demo_fixture, parse_dsn

    settings = load_settings(args.config)
    if not args.admin_dsn:
        raise SetupError(ADMIN_NEEDED)
    try:
        admin = parse_dsn(args.admin_dsn)
    except ValueError as exc:
        raise SetupError(f"--admin-dsn: {exc}") from None
    if admin.password is not None:
        raise SetupError(
            "--admin-dsn must not carry a password (a command line is visible to other local users): "
            "put it in an environment variable and name it with --admin-password-env"
        )
    evidence = None
    if settings.mysql.dsn:
        try:
            evidence = parse_dsn(settings.mysql.dsn)
        except ValueError:
            raise SetupError("[mysql] dsn is not a valid mysql://user@host:port/database URL") from None
    if evidence is not None and _account(admin) == _account(evidence):
        raise SetupError(f"--admin-dsn names the [mysql] evidence account {evidence.user!r}: {ADMIN_NEEDED}")
    if args.admin_password_env and args.admin_password_env == settings.mysql.password_env:
        raise SetupError(f"--admin-password-env names the [mysql] password variable: {ADMIN_NEEDED}")
    password = None
    if args.admin_password_env:
        password = os.environ.get(args.admin_password_env)
        if password is None:
            raise SetupError(f"--admin-password-env {args.admin_password_env}: that variable is not set")
    database = args.database or admin.database or (evidence.database if evidence is not None else None)
    if not database:
        raise SetupError("no database: pass --database, or name one in --admin-dsn or [mysql] dsn")
    redactor = build_redactor(settings)
    try:
        count = asyncio.run(load_demo_fixture(args.admin_dsn, password, database))
    except ValueError as exc:
        raise SetupError(str(exc)) from None
    except Exception as exc:  # the server's text may carry names, never the password (redacted anyway)
        text = redactor.text(str(exc))
        if password:
            text = text.replace(password, "[REDACTED]")
        error(f"loading the demo database failed: {text}")
        return 1
    print(
        f"loaded the demo incident database into {database!r} "
        f"({counted(count, 'statement')}) as {admin.user!r}"
    )
    if evidence is not None:
        print(
            "the [mysql] evidence account reads it once granted (and nothing else): "
            f"GRANT SELECT, SHOW VIEW ON `{database}`.* TO '{evidence.user}'@'%';"
        )
    return 0
