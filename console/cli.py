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
import asyncio
import json
import logging
import os
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TextIO, TypeVar, overload

from agent.closest_name import did_you_mean
from agent.errors import DiagnoseError
from agent.input_files import (
    InputTooLarge,
    OversizedInput,
    decode_text,
    input_file_cap,
    read_bounded,
    read_input_file,
)
from agent.scenario_folder import is_scenario_file_name, scenario_files
from agent.vocabulary import INTERRUPTED, OUTPUT_ERROR, SETUP_ERROR, USAGE_ERROR, RunFailureCause
from console import telemetry
from console.errors import SetupError, error, reported, warning
from console.interrupts import Interrupts
from console.presentation import SCRIPTED_NOTICE, SCRIPTED_NOTICE_DETAIL, exit_code_help
from console.run_config import asks_for_more_than_defaults, resolve_run_config
from console.safe_text import neutralize
from console.standard_streams import GuardedStdout, OutputFailed, occupy_closed_descriptors, silence_stdout
from console.version import package_version

if TYPE_CHECKING:
    from agent.contracts import ExecutionResult
    from agent.run_events import EventSink, RunEvent
    from agent.use_case import DiagnosisUseCase
    from audit.output_files import OutputFile
    from console.wait_line import ModelWaitLine
    from console.wiring import RunEnvironment


def _parser() -> argparse.ArgumentParser:
    # Each command's own module defines its options: imported here, so a bare `diagnose` (which
    # builds no parser) opens the console without loading them.
    from console.audit_cli import add_audit_parser, trace_endpoint
    from console.demo_cli import add_demo_parser
    from console.eval_cli import add_eval_parser

    parser = CommandLineParser(
        prog="diagnose",
        description="Evidence-bound incident diagnosis console.",
        epilog="Without a command, or with only console options (diagnose --scenario NAME), "
        "the console opens: diagnose [--config F] [--scenario NAME|FILE] [--scenario-dir DIR]. "
        f"A command line that does not parse exits {USAGE_ERROR}; diagnose run --help lists every exit code.",
    )
    parser.add_argument("--version", action="version", version=f"diagnose {package_version()}")
    sub = parser.add_subparsers(dest="command")

    console = sub.add_parser("console", help="open the console (default)")
    console.add_argument("--config", type=Path, metavar="F", help=_CONFIG_HELP)
    console.add_argument("--scenario", metavar="NAME|FILE", help=_SCENARIO_HELP)
    console.add_argument("--scenario-dir", type=Path, metavar="DIR", help=_SCENARIO_DIR_HELP)

    run = sub.add_parser(
        "run",
        help="one headless diagnosis run",
        epilog=exit_code_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    query = run.add_mutually_exclusive_group()
    query.add_argument(
        "--query", metavar="TEXT", help="the incident query, kept exactly (default: the scenario's own query)"
    )
    query.add_argument(
        "--query-file",
        type=Path,
        metavar="F",
        help="UTF-8 file holding the query, kept exactly ('-' for stdin)",
    )
    run.add_argument(
        "--previous-turn", type=Path, metavar="F", help="JSON file with a PreviousTurn (a follow-up run)"
    )
    run.add_argument("--scenario", metavar="NAME|FILE", help=_SCENARIO_HELP)
    run.add_argument(
        "--scenario-dir", type=Path, metavar="DIR", help="a folder of scenario files --scenario NAME may name"
    )
    run.add_argument("--config", type=Path, metavar="F", help=_CONFIG_HELP)
    run.add_argument(
        "--audit-db",
        metavar="F|URL",
        help="audit database file, or sqlite:///F or mysql://user@host/db as [audit] url "
        "(default: [audit] url or path, else the user state dir)",
    )
    run.add_argument(
        "--events",
        metavar="F|-",
        help="write NDJSON run events to this file; '-' for stdout, which then carries only the events "
        "(the result goes to stderr)",
    )
    run.add_argument(
        "--force",
        action="store_true",
        help="replace an existing --events file (never the audit; the old file stays whole until the new "
        "one is complete)",
    )
    run.add_argument("--json", action="store_true", help="print the execution result as JSON")
    run.add_argument(
        "--trace-endpoint",
        type=trace_endpoint,
        metavar="URL",
        help="send this run as an OpenTelemetry trace to this OTLP/HTTP endpoint, e.g. "
        "http://localhost:4318/v1/traces (default: [telemetry.traces] endpoint; none: no trace)",
    )

    add_demo_parser(sub)
    add_audit_parser(sub)
    add_eval_parser(sub)

    scenarios = sub.add_parser("scenarios", help="list built-in scenarios")
    scenarios.add_argument("--json", action="store_true", help="name, title and description as JSON")

    serve = sub.add_parser("serve", help="the console in a web browser (textual-serve)")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=_port, default=8000, help="TCP port to listen on (default 8000)")
    serve.add_argument("--config", type=Path, metavar="F", help=_CONFIG_HELP)
    serve.add_argument("--public-url", help="the address browsers use, when a proxy stands in front")
    serve.add_argument(
        "--max-consoles",
        type=_console_cap,
        help="browser sessions served at once (default: [serve] max_consoles)",
    )
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


_CONFIG_HELP = "TOML configuration file (default: $DIAGNOSE_CONFIG, else the embedded defaults)"
_SCENARIO_HELP = "built-in scenario name, a scenario file, or the name of a file of --scenario-dir"
_SCENARIO_DIR_HELP = "a folder of scenario files: listed in the picker, and named by --scenario NAME"
# `diagnose --scenario X` is the console with options, as `diagnose` alone is the console without.
_TOP_LEVEL_FLAGS = frozenset({"-h", "--help", "--version"})


def _with_command(argv: Sequence[str]) -> list[str]:
    """Options without a command are the console's: insert the word the parser needs."""
    args = list(argv)
    if args and args[0].startswith("-") and args[0] not in _TOP_LEVEL_FLAGS:
        return ["console", *args]
    return args


def _port(value: str) -> int:
    if not (value.isascii() and value.isdigit() and len(value) <= 5 and 1 <= int(value) <= 65535):
        raise argparse.ArgumentTypeError(f"not a TCP port: {neutralize(value, newlines=False)!r}")
    return int(value)


def _console_cap(value: str) -> int:
    if not (value.isascii() and value.isdigit() and len(value) <= 2 and 1 <= int(value) <= 64):
        raise argparse.ArgumentTypeError(f"not a number from 1 to 64: {neutralize(value, newlines=False)!r}")
    return int(value)


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
        return argparse.Namespace(command=None)
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
        code = _command(command, args, interrupts)
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


def _command(command: str, args: argparse.Namespace, interrupts: Interrupts) -> int:
    telemetry.apply_opt_in(getattr(args, "config", None))  # before anything imports Haystack
    _log_to_file()
    try:
        if command == "audit":
            from console.audit_cli import run_audit_command

            return run_audit_command(args)
        if command == "scenarios":
            return _scenarios(args.json)
        if command == "demo":
            from console.demo_cli import run_demo_command

            return run_demo_command(args)
        if command == "eval":
            from console.eval_cli import run_eval_command

            return run_eval_command(args)
        if command == "console":
            return _console(args)
        if command == "serve":
            from console.serve import serve

            return serve(args.host, args.port, args.config, args.max_consoles, args.public_url)
        return asyncio.run(_run(args, interrupts))
    except DiagnoseError as exc:
        return reported(exc)
    except StdoutClosed as exc:
        return exc.exit_code


class StdoutClosed(Exception):
    """The reader of stdout went away (`| head -c1`): stop quietly, keeping the run's exit code."""

    def __init__(self, exit_code: int) -> None:
        super().__init__(exit_code)
        self.exit_code = exit_code


def _print_out(text: str, exit_code: int) -> None:
    try:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        silence_stdout()
        raise StdoutClosed(exit_code) from None


def _print_err(text: str) -> None:
    if sys.stderr is None:
        return
    try:
        sys.stderr.write(text + "\n")
        sys.stderr.flush()
    except OSError:
        pass  # stderr is gone: the exit code is all that is left


def _scenarios(as_json: bool) -> int:
    from agent.scenarios import builtin_scenarios

    items = [{"name": s.name, "title": s.title, "description": s.description} for s in builtin_scenarios()]
    if as_json:
        _print_out(neutralize(json.dumps(items, ensure_ascii=False, indent=2), form="json"), 0)
    else:
        width = max(len(i["name"]) for i in items)
        lines = [f"{item['name']:<{width}}  {item['title']}" for item in items]
        _print_out(neutralize("\n".join(lines)), 0)
    return 0


def _scenario_from_folder(args: argparse.Namespace) -> None:
    """`--scenario NAME` with `--scenario-dir DIR`: a file of DIR whose scenario is named NAME (or whose
    file name is NAME.yaml) is the one meant, before a built-in of that name, since the picker lists it.
    The argument is replaced by that file's path."""
    scenario, folder = getattr(args, "scenario", None), getattr(args, "scenario_dir", None)
    if not scenario or folder is None or is_scenario_file_name(scenario):
        return
    if not folder.is_dir():
        raise SetupError(f"--scenario-dir {folder} is not a folder")
    from agent.scenarios import ScenarioError, load_scenario_file

    for path in scenario_files(folder):
        try:
            named = path.stem == scenario or load_scenario_file(path).name == scenario
        except ScenarioError:
            named = False  # reported by the check of the whole folder
        if named:
            args.scenario = str(path)
            return


def _check_console_setup(args: argparse.Namespace) -> None:
    """What `diagnose run` would refuse at setup, refused before the console's first frame (exit 3, the
    same line): the configuration, the scenario, the model settings, where the audit is, and a
    `--scenario-dir` that is not a folder. A file of that folder that does not load is no reason to
    refuse the others: the picker lists it, dimmed, with the reason (`console.screens.scenarios`).
    Opening the audit and the evidence sources needs the engine: that comes after the first frame
    (`console.screens.startup_failed`)."""
    _scenario_from_folder(args)
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


def _read_query(args: argparse.Namespace, scenario: Any, limit: int) -> str | OversizedInput:
    if args.query is not None:
        return str(args.query)
    if args.query_file is not None:
        return _read_query_file(args.query_file, limit)
    if scenario is not None:
        return str(scenario.query)
    raise SetupError("no query: pass --query, --query-file or a --scenario with a query")


def _read_query_file(path: Path, limit: int) -> str | OversizedInput:
    """The query exactly as the file (or standard input, for `-`) holds it.

    Bytes are decoded as UTF-8 strictly and kept as they are: CRLF and CR are not turned into LF and
    a final newline stays part of the query (the query is never rewritten). Text that is not UTF-8
    cannot be passed on without rewriting it, so the run is refused before it starts. The read is
    bounded (a FIFO or a device is refused), like every input file's, by a cap that follows the
    configured limit (`input_file_cap`); a query past the cap is one the use case rejects as too large.
    """
    source = "standard input" if str(path) == "-" else f"query file {path}"
    try:
        if str(path) == "-":
            if sys.stdin is None:  # closed at start (`<&-`): there is no query to read
                raise SetupError("standard input is closed: there is no query to read (--query-file -)")
            data = read_bounded(sys.stdin.buffer, what=source, limit=input_file_cap(limit))
        else:
            data = read_input_file(path, what="query file", limit=input_file_cap(limit))
    except InputTooLarge as exc:
        return OversizedInput.of(exc)
    except OSError as exc:
        raise SetupError(f"cannot read {source}: {exc.strerror}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SetupError(
            f"{source} is not UTF-8 text (invalid byte at offset {exc.start}); "
            "the query is never rewritten, so save it as UTF-8"
        ) from None


def _read_previous_turn(path: Path | None, scenario: Any, limit: int) -> Any:
    if path is None:
        return scenario.previous_turn if scenario is not None else None
    try:
        data = read_input_file(path, what="previous turn file", limit=input_file_cap(limit))
        text = decode_text(data, what=f"previous turn file {path}")
    except InputTooLarge as exc:
        return OversizedInput.of(exc)
    try:
        return json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return text  # not JSON (or nested past any PreviousTurn): the use case rejects it as invalid


def _model_wait_line(env: RunEnvironment) -> ModelWaitLine | None:
    """On a terminal, a line on stderr while a model round waits (`console.wait_line`)."""
    if sys.stderr is None or not sys.stderr.isatty():
        return None
    from agent.model_failure import model_endpoint
    from console.wait_line import ModelWaitLine

    return ModelWaitLine(sys.stderr, env.redactor.text(model_endpoint(env.settings.model) or env.model_label))


class _NdjsonSink:
    """`--events`: one JSON run event per line. A write failure (a full disk, a closed pipe) stops the
    stream; the command reports it after the result is printed. On standard output the events are
    what the command was asked for, so a stdout that fails also stops the run: `on_failure` cancels
    it (called again with each later event, since the run may not be cancellable yet)."""

    def __init__(
        self, stream: TextIO, file: OutputFile | None = None, on_failure: Callable[[], None] | None = None
    ) -> None:
        self.stream = stream
        self.file = file  # None: stdout, which is not ours to close
        self.failure: OSError | OutputFailed | None = None
        self._on_failure = on_failure

    def __call__(self, event: RunEvent) -> None:
        if self.failure is None:
            line = json.dumps(event.to_wire(), ensure_ascii=False, separators=(",", ":"))
            try:
                self.stream.write(neutralize(line, form="json") + "\n")
                self.stream.flush()
            except (OSError, OutputFailed) as exc:
                self.failure = exc
        if self.failure is not None and self._on_failure is not None:
            self._on_failure()

    @property
    def reader_left(self) -> bool:
        return isinstance(self.failure, BrokenPipeError)

    def discard(self) -> None:
        if self.file is not None:
            self.file.discard()

    def close(self) -> None:
        if self.file is None:
            return
        try:
            self.file.commit()
        except OSError as exc:
            self.failure = self.failure or exc


def _events_file(path: Path, *, force: bool, protected: Sequence[Path]) -> _NdjsonSink:
    """The `--events` file: created new and owner-only (audit.output_files); an existing file is
    replaced only with `--force`, and never the audit."""
    from audit.output_files import OutputExistsError, OutputFile

    try:
        file = OutputFile(path, force=force, protected=protected)
    except OutputExistsError:
        raise SetupError(f"events file {path} already exists; --force replaces it") from None
    except OSError as exc:
        raise SetupError(f"cannot write events file {path}: {exc.strerror or exc}") from None
    return _NdjsonSink(file.stream, file)


async def _run(args: argparse.Namespace, interrupts: Interrupts) -> int:
    from console.wiring import open_run_environment

    # Until the run starts, Ctrl-C stops the command (`Interrupts`): no run exists yet.
    _scenario_from_folder(args)
    env = open_run_environment(
        config=args.config, scenario=args.scenario, audit_db=args.audit_db, trace_endpoint=args.trace_endpoint
    )
    try:
        return await _run_in(env, args, interrupts)
    finally:
        # After the result is printed (or the run failed): the wait for the trace endpoint is bounded
        # and never delays what the operator reads (docs/contracts.md, "Traces").
        env.close_traces()


def _open_events(
    env: RunEnvironment, args: argparse.Namespace, cancel_soon: Callable[[], None]
) -> _NdjsonSink | None:
    """The `--events` sink: stdout (`-`) or a file of its own; the audit is closed when the file cannot be."""
    if not args.events:
        return None
    if args.events == "-":
        return _NdjsonSink(sys.stdout, on_failure=cancel_soon)
    try:
        return _events_file(Path(args.events), force=args.force, protected=env.audit_files)
    except SetupError:
        env.audit.close()
        raise


def _result_text(env: RunEnvironment, args: argparse.Namespace, result: ExecutionResult) -> str:
    """The result as printed: JSON (`--json`) or text. Redacted like the events, with the tool call IDs
    (citations, checks) exact."""
    from agent.event_redaction import redact_result

    if args.json:
        return neutralize(
            json.dumps(redact_result(env.redactor, result.to_json_dict()), ensure_ascii=False, indent=2),
            form="json",
        )
    from console.render_text import render_result

    return render_result(
        result,
        model_label=env.model_label,
        redact=env.redactor.text,
        model_timeout_s=env.settings.model.timeout_s,
    )


async def _run_in(env: RunEnvironment, args: argparse.Namespace, interrupts: Interrupts) -> int:
    from agent.secrets import redact_logs

    try:
        redact_logs(env.redactor)
        for line in (*env.audit.open_warnings, *env.warnings):
            warning(line)
        # Input files are read up to a cap that follows the configured limits; past it nothing more is
        # read, and the run is rejected as too large all the same (exit 2, audited): `OversizedInput`.
        budget = env.settings.budget
        query = _read_query(args, env.scenario, budget.max_query_bytes)
        previous_turn = _read_previous_turn(args.previous_turn, env.scenario, budget.max_previous_turn_bytes)
        if isinstance(query, str) and env.replays_a_script_for(query, previous_turn):
            warning(f"{SCRIPTED_NOTICE}: {SCRIPTED_NOTICE_DETAIL}")
    except BaseException:
        env.audit.close()
        raise

    loop = asyncio.get_running_loop()
    use_case: DiagnosisUseCase | None = None

    def cancel_soon() -> None:
        if use_case is not None:
            loop.call_soon_threadsafe(use_case.cancel)

    events = _open_events(env, args, cancel_soon)
    sinks: list[EventSink] = [events] if events is not None else []

    wait_line = _model_wait_line(env)
    if wait_line is not None:
        sinks.append(wait_line)
    try:
        use_case = env.use_case(sinks=sinks)
    except BaseException:
        if events is not None:
            events.discard()  # no run: an events file of nothing is not left behind
        raise
    interrupts.during(cancel_soon)  # Ctrl-C now cancels the run: audited CANCELLED, exit 12
    ticker = asyncio.create_task(wait_line.tick()) if wait_line is not None else None
    try:
        result = await use_case.execute(query, previous_turn)
    finally:
        interrupts.settled()  # the result stands: Ctrl-C no longer changes it
        if ticker is not None and wait_line is not None:
            ticker.cancel()
            wait_line.erase()
        await env.aclose(traces=False)
        if events is not None:
            events.close()

    return _report(env, args, result, events)


def _report(
    env: RunEnvironment, args: argparse.Namespace, result: ExecutionResult, events: _NdjsonSink | None
) -> int:
    """Print the finished run's result (stderr when stdout carries the events) and give the exit code."""
    text = _result_text(env, args, result)
    if result.failure is not None and result.failure.cause == RunFailureCause.AUDIT_WRITE_FAILED:
        # The result says FAILED; the operator also learns why in the words every audit error uses.
        error(f"the audit could not be written, so the run was stopped: {result.failure.detail}")
    if events is not None and events.stream is sys.stdout:
        if events.reader_left:  # it has what it wanted (the run was cancelled for it): end quietly
            silence_stdout()
            return result.exit_code
        _print_err(text)  # stdout carries exactly one format: the NDJSON events
        if events.failure is None:
            return result.exit_code
        silence_stdout()
        raise events.failure if isinstance(events.failure, OutputFailed) else OutputFailed(events.failure)
    _print_out(text, result.exit_code)
    if events is not None and events.failure is not None:
        error(
            f"the events file {args.events} could not be written: {events.failure.strerror or events.failure}"
        )
        return SETUP_ERROR
    return result.exit_code
