"""`diagnose console` (and a bare `diagnose`, or console options without a command): the Textual console."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent.vocabulary import SETUP_ERROR, USAGE_ERROR
from console.commands.options import CONFIG_HELP, SCENARIO_DIR_HELP, SCENARIO_HELP, scenario_from_folder
from console.errors import SetupError, error
from console.run_config import asks_for_more_than_defaults, resolve_run_config

if TYPE_CHECKING:
    from console.interrupts import Interrupts


def add_console_parser(subparsers: Any) -> None:
    console = subparsers.add_parser("console", help="open the console (default)")
    console.add_argument("--config", type=Path, metavar="F", help=CONFIG_HELP)
    console.add_argument("--scenario", metavar="NAME|FILE", help=SCENARIO_HELP)
    console.add_argument("--scenario-dir", type=Path, metavar="DIR", help=SCENARIO_DIR_HELP)
    console.set_defaults(handler=run_console_command)


def run_console_command(args: argparse.Namespace, interrupts: Interrupts) -> int:
    return _console(args)


def _check_console_setup(args: argparse.Namespace) -> None:
    """What `diagnose run` would refuse at setup, refused before the console's first frame (exit 3, the
    same line): the configuration, the scenario, the model settings, where the audit is, and a
    `--scenario-dir` that is not a folder. A file of that folder that does not load is no reason to
    refuse the others: the picker lists it, dimmed, with the reason (`console.screens.scenarios`).
    Opening the audit and the evidence sources needs the engine: that comes after the first frame
    (`console.screens.startup_failed`)."""
    scenario_from_folder(args)
    folder = getattr(args, "scenario_dir", None)
    config, scenario = getattr(args, "config", None), getattr(args, "scenario", None)
    if folder is not None and not folder.is_dir():
        raise SetupError(f"--scenario-dir {folder} is not a folder")
    if asks_for_more_than_defaults(config, scenario):
        resolve_run_config(config, scenario)


def console_terminal_problem() -> str | None:
    """Why the console cannot run here, if it cannot: it reads keys from standard input and draws on the
    terminal, so each standard stream must be one. Without (a pipe, a file, cron) Textual would write
    escape codes forever into whatever is there. Another Textual driver (textual-serve's, named by
    TEXTUAL_DRIVER) draws elsewhere and needs none."""
    if os.environ.get("TEXTUAL_DRIVER"):
        return None
    for name, stream in (("input", sys.stdin), ("output", sys.stdout), ("error", sys.stderr)):
        if stream is None or not stream.isatty():
            return (
                f"the console needs a terminal, and standard {name} is not one; "
                "for a run without a terminal use diagnose run (diagnose run --help)"
            )
    return None


def _console(args: argparse.Namespace) -> int:
    """Open the Textual console; it paints first and opens the run environment in the background."""
    _check_console_setup(args)
    problem = console_terminal_problem()
    if problem is not None:
        error(problem)
        return USAGE_ERROR
    from console.app import DiagnoseApp

    # A bare `diagnose` parses no console options: the embedded defaults apply.
    app = DiagnoseApp(
        config=getattr(args, "config", None),
        scenario=getattr(args, "scenario", None),
        scenario_dir=getattr(args, "scenario_dir", None),
    )
    app.run()
    if app.startup_error is not None:  # the console was blocked, and said why: the terminal keeps it
        error(app.startup_error)
        return SETUP_ERROR
    return app.return_code or 0
