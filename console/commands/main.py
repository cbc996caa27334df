"""`diagnose`: headless runs, scenario listing and the console entry point (docs/contracts.md, "CLI").

Exit codes follow docs/contracts.md, "Execution result" (0 Draft, 10 controlled stop, 11 budget,
12 cancelled, 1 failed, 2 rejected); 3 means the run could not be set up (bad config, unknown
scenario, unusable audit file or input file, an `--events` file that exists without `--force`) or the
events file it was asked to write could not be written (the result is still printed). Files are
written by one rule (audit.output_files: new, owner-only, replaced only with `--force`). Every input
file is read bounded and every message passes `neutralize`: a file's name or content never reaches
the terminal raw. A closed stdout (`| head -c1`) ends the command quietly with the run's own exit
code.
"""

from __future__ import annotations

import argparse
import logging
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NoReturn, TypeVar, overload

from agent.closest_name import did_you_mean
from agent.errors import DiagnoseError
from agent.vocabulary import INTERRUPTED, OUTPUT_ERROR, USAGE_ERROR
from console import telemetry
from console.commands.open_console import run_console_command
from console.commands.output import StdoutClosed
from console.errors import error, reported
from console.interrupts import Interrupts
from console.safe_text import neutralize
from console.standard_streams import GuardedStdout, OutputFailed, occupy_closed_descriptors, silence_stdout
from console.version import package_version

# What each command's parser sets as its `handler` default: the parsed arguments and the process's
# Ctrl-C handling in, the exit code out.
Handler = Callable[[argparse.Namespace, Interrupts], int]


def _parser() -> argparse.ArgumentParser:
    # Each command's own module defines its options and its handler: imported here, so a bare
    # `diagnose` (which builds no parser) opens the console without loading them.
    from console.commands.audit import add_audit_parser
    from console.commands.demo import add_demo_parser
    from console.commands.eval import add_eval_parser
    from console.commands.open_console import add_console_parser
    from console.commands.run import add_run_parser
    from console.commands.scenarios import add_scenarios_parser
    from console.commands.serve import add_serve_parser

    parser = CommandLineParser(
        prog="diagnose",
        description="Evidence-bound incident diagnosis console.",
        epilog="Without a command, or with only console options (diagnose --scenario NAME), "
        "the console opens: diagnose [--config F] [--scenario NAME|FILE] [--scenario-dir DIR]. "
        f"A command line that does not parse exits {USAGE_ERROR}; diagnose run --help lists every exit code.",
    )
    parser.add_argument("--version", action="version", version=f"diagnose {package_version()}")
    sub = parser.add_subparsers(dest="command")
    add_console_parser(sub)
    add_run_parser(sub)
    add_demo_parser(sub)
    add_audit_parser(sub)
    add_eval_parser(sub)
    add_scenarios_parser(sub)
    add_serve_parser(sub)
    return parser


_N = TypeVar("_N")
# argparse's words for a value outside an argument's choices (a command name, `--model`).
_INVALID_CHOICE = re.compile(r"invalid choice: '(?P<typed>[^']*)' \(choose from (?P<valid>[^)]*)\)")


class CommandLineParser(argparse.ArgumentParser):
    """argparse with usage errors on their own exit code (`USAGE_ERROR`), never a run outcome's: its
    default 2 is the code of a REJECTED run. The message may echo what was typed: it is neutralised.
    Subcommand parsers are of this class too (argparse makes them of the parent's class)."""

    def error(self, message: str) -> NoReturn:
        choice = _INVALID_CHOICE.search(message)  # a mistyped command or enumerated value
        if choice is not None:
            message += did_you_mean(choice["typed"], (c.strip("'\" ") for c in choice["valid"].split(",")))
        self.print_usage(sys.stderr)
        self.exit(USAGE_ERROR, f"{self.prog}: error: {neutralize(message, newlines=False)}\n")

    @overload
    def parse_known_args(
        self, args: Iterable[str] | None = None, namespace: None = None
    ) -> tuple[argparse.Namespace, list[str]]: ...
    @overload
    def parse_known_args(self, args: Iterable[str] | None, namespace: _N) -> tuple[_N, list[str]]: ...
    @overload
    def parse_known_args(self, *, namespace: _N) -> tuple[_N, list[str]]: ...

    def parse_known_args(
        self, args: Iterable[str] | None = None, namespace: Any = None
    ) -> tuple[Any, list[str]]:
        """Arguments a command does not know are refused by that command's parser, with its own usage
        (`diagnose run --qeury` shows `run`'s options, not the root's list of commands) and the
        option that was probably meant."""
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}{self._closest_option(extras)}")
        return parsed, extras

    def _closest_option(self, extras: list[str]) -> str:
        typed = next((arg.partition("=")[0] for arg in extras if arg.startswith("--")), None)
        options = [option for option in self._option_string_actions if option.startswith("--")]
        return did_you_mean(typed, options) if typed is not None else ""


# `diagnose --scenario X` is the console with options, as `diagnose` alone is the console without.
_TOP_LEVEL_FLAGS = frozenset({"-h", "--help", "--version"})


def _with_command(argv: Sequence[str]) -> list[str]:
    """Options without a command are the console's: insert the word the parser needs."""
    args = list(argv)
    if args and args[0].startswith("-") and args[0] not in _TOP_LEVEL_FLAGS:
        return ["console", *args]
    return args


def _log_to_file() -> None:
    """Library logging (haystack, httpx, adapters) goes to a file, never over the terminal output.

    The log holds SQL text and tracebacks: its folder is owner-only and the file is created 0600.
    Every record is redacted and written on one line without control characters (`console.log_records`).
    """
    import platformdirs

    from audit.files import open_private_append, private_state_dir
    from console.log_records import FORMAT, OneLineFormatter, route_every_record_to

    try:
        log_dir = private_state_dir(platformdirs.user_state_path("diagnosis-console"), ours=True)
        stream = open_private_append(log_dir / "diagnose.log")
        handler: logging.Handler = logging.StreamHandler(stream)
    except OSError:
        handler = logging.NullHandler()
    handler.setFormatter(OneLineFormatter(FORMAT))
    handler.addFilter(DeferredRedaction())
    route_every_record_to(handler)


class DeferredRedaction(logging.Filter):
    """The built-in redaction rules (`tools.redaction.NOOP`) on every log record, loaded at the first
    record rather than at startup: reading the maintained rule file and building the trigger scan takes
    tens of milliseconds that the console's first frame, which logs nothing, need not wait for."""

    def __init__(self) -> None:
        super().__init__()
        self._rules: logging.Filter | None = None

    def filter(self, record: logging.LogRecord) -> bool:
        if self._rules is None:
            from tools.redaction import NOOP

            self._rules = NOOP.logging_filter()
        return bool(self._rules.filter(record))


def _arguments(argv: Sequence[str]) -> argparse.Namespace:
    """The parsed command line; a bare `diagnose` is the console without options, and needs no parser
    (building it imports every command's module)."""
    if not argv:
        return argparse.Namespace(command=None, handler=run_console_command)
    return _parser().parse_args(_with_command(argv))


def main(argv: Sequence[str] | None = None) -> int:
    closed = occupy_closed_descriptors()  # before any file is opened: nothing may take their numbers
    interrupts = Interrupts()
    interrupts.install()
    stdout = sys.stdout
    command = "console"
    try:
        if 1 in closed:
            error("standard output is closed: nothing could be shown (redirect it to a file or /dev/null)")
            return OUTPUT_ERROR
        sys.stdout = GuardedStdout(stdout)
        args = _arguments(sys.argv[1:] if argv is None else argv)
        command = args.command or "console"
        if command in ("console", "serve"):
            sys.stdout = stdout  # Textual and aiohttp own the terminal, and Ctrl-C (a key in the console)
            interrupts.restore()
        code = _command(args, interrupts)
        try:
            sys.stdout.flush()  # a full disk must fail here, not in the interpreter's final flush
        except BrokenPipeError:
            silence_stdout()  # the reader left: the command ends with its own code
        return code
    except KeyboardInterrupt:
        error("interrupted before a run started: nothing was run" if command == "run" else "interrupted")
        return INTERRUPTED
    except OutputFailed as exc:
        silence_stdout()
        error(f"cannot write standard output: {exc}")
        return OUTPUT_ERROR
    finally:
        sys.stdout = stdout
        interrupts.restore()


def _command(args: argparse.Namespace, interrupts: Interrupts) -> int:
    telemetry.apply_opt_in(getattr(args, "config", None))  # before anything imports Haystack
    _log_to_file()
    handler: Handler = args.handler  # set by the command's parser (set_defaults)
    try:
        return handler(args, interrupts)
    except DiagnoseError as exc:
        return reported(exc)
    except StdoutClosed as exc:
        return exc.exit_code
