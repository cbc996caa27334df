"""`diagnose`: headless runs, scenario listing and the console entry point (docs/architecture.md, "CLI").

Exit codes follow docs/architecture.md, "Execution result" (0 Draft, 10 controlled stop, 11 budget,
12 cancelled, 1 failed, 2 rejected); 3 means the run could not be set up (bad config, unknown
scenario, unusable audit file or input file) or the events file it was asked to write could not be
written (the result is still printed). Every input file is read bounded and every message passes
`neutralize`: a file's name or content never reaches the terminal raw. A closed stdout
(`| head -c1`) ends the command quietly with the run's own exit code.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from agent.input_files import (
    MIB,
    InputFileError,
    InputTooLarge,
    OversizedInput,
    decode_text,
    read_bounded,
    read_input_file,
)
from agent.scenario_folder import is_scenario_file_name, scenario_files
from console import telemetry
from console.errors import SetupError
from console.presentation import SETUP_ERROR
from console.safe_text import neutralize

if TYPE_CHECKING:
    from console.wiring import RunEnvironment
    from tools.run_events import EventSink, RunEvent

# Input files are read with a cap well above any sane budget (the use case applies the real limits
# and rejects an oversized query or previous turn by its own rules). Past the cap nothing more is
# read, and the run is rejected as too large all the same (exit 2, audited): `OversizedInput`.
MAX_INPUT_FILE_BYTES = MIB


def _parser() -> argparse.ArgumentParser:
    # Each command's own module defines its options: imported here, so a bare `diagnose` (which
    # builds no parser) opens the console without loading them.
    from console.audit_cli import add_audit_parser
    from console.demo_cli import add_demo_parser
    from console.eval_cli import add_eval_parser

    parser = argparse.ArgumentParser(
        prog="diagnose",
        description="Evidence-bound incident diagnosis console.",
        epilog="Without a command, or with only console options (diagnose --scenario NAME), "
        "the console opens: diagnose [--config F] [--scenario NAME|FILE] [--scenario-dir DIR].",
    )
    sub = parser.add_subparsers(dest="command")

    console = sub.add_parser("console", help="open the console (default)")
    console.add_argument("--config", type=Path, metavar="F", help=_CONFIG_HELP)
    console.add_argument("--scenario", metavar="NAME|FILE", help=_SCENARIO_HELP)
    console.add_argument("--scenario-dir", type=Path, metavar="DIR", help=_SCENARIO_DIR_HELP)

    run = sub.add_parser("run", help="one headless diagnosis run")
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
        type=Path,
        metavar="F",
        help="audit database file (default: [audit] path, else the user state dir)",
    )
    run.add_argument(
        "--events",
        metavar="F|-",
        help="write NDJSON run events to this file; '-' for stdout, which then carries only the events "
        "(the result goes to stderr)",
    )
    run.add_argument("--json", action="store_true", help="print the execution result as JSON")
    run.add_argument(
        "--trace-endpoint",
        type=_trace_endpoint,
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


_CONFIG_HELP = "TOML configuration file (default: $DIAGNOSE_CONFIG, else the embedded defaults)"
_SCENARIO_HELP = "built-in scenario name, a scenario file, or the name of a file of --scenario-dir"
_SCENARIO_DIR_HELP = "a folder of scenario files: listed in the picker, and named by --scenario NAME"
# `diagnose --scenario X` is the console with options, as `diagnose` alone is the console without.
_TOP_LEVEL_FLAGS = frozenset({"-h", "--help"})


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


def _trace_endpoint(value: str) -> str:
    from agent.settings import check_trace_endpoint

    try:
        return check_trace_endpoint(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _console_cap(value: str) -> int:
    if not (value.isascii() and value.isdigit() and len(value) <= 2 and 1 <= int(value) <= 64):
        raise argparse.ArgumentTypeError(f"not a number from 1 to 64: {neutralize(value, newlines=False)!r}")
    return int(value)


def _log_to_file() -> None:
    """Library logging (haystack, httpx, adapters) goes to a file, never over the terminal output.

    The log holds SQL text and tracebacks: its folder is owner-only and the file is created 0600.
    """
    import platformdirs

    from audit.files import open_private_append, private_state_dir

    try:
        log_dir = private_state_dir(platformdirs.user_state_path("diagnosis-console"), ours=True)
        stream = open_private_append(log_dir / "diagnose.log")
        handler: logging.Handler = logging.StreamHandler(stream)
    except OSError:
        handler = logging.NullHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(DeferredRedaction())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)
    # Warnings too: a library warns about a model reply's odd fields (pydantic about a usage count
    # that is text), which must not reach the terminal as it is.
    logging.captureWarnings(True)


class DeferredRedaction(logging.Filter):
    """The built-in redaction rules (`tools.redaction.NOOP`) on every log record, compiled at the first
    record rather than at startup: compiling them takes ~15 ms that the console's first frame, which
    logs nothing, need not wait for."""

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
    args = _arguments(sys.argv[1:] if argv is None else argv)
    command = args.command or "console"
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
        return asyncio.run(_run(args))
    except SetupError as exc:
        error(str(exc))
        return SETUP_ERROR
    except StdoutClosed as exc:
        return exc.exit_code
    except Exception as exc:
        # Named only once a command fails: `agent.events` loads the redaction rules, which a bare
        # `diagnose` would otherwise compile before the console's first frame.
        from agent.events import RequiredSinkFailed

        if not isinstance(exc, RequiredSinkFailed):
            raise
        error(f"the audit could not be written, so the run was stopped: {exc}")
        return SETUP_ERROR


def error(message: str) -> None:
    """`diagnose: <message>` on stderr: redacted, one line, nothing that can drive the terminal."""
    from tools.redaction import NOOP

    try:
        print(f"diagnose: {neutralize(NOOP.text(message), newlines=False)}", file=sys.stderr)
    except OSError:
        pass  # stderr is gone too: the exit code is all that is left


def warning(message: str) -> None:
    """`diagnose: warning: <message>` on stderr, as `error` prints: something the operator should know
    that does not stop the command."""
    error(f"warning: {message}")


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
        _silence_stdout()
        raise StdoutClosed(exit_code) from None


def _print_err(text: str) -> None:
    try:
        sys.stderr.write(text + "\n")
        sys.stderr.flush()
    except OSError:
        pass  # stderr is gone: the exit code is all that is left


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot fail on the closed pipe."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


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


def _check_scenarios(args: argparse.Namespace) -> None:
    """A scenario file named on the command line, or any file of `--scenario-dir`, that cannot be used
    stops the console before it starts (exit 3), naming the file and the key."""
    _scenario_from_folder(args)
    scenario = getattr(args, "scenario", None)
    folder = getattr(args, "scenario_dir", None)
    if scenario and not is_scenario_file_name(scenario) and not Path(scenario).exists():
        scenario = None  # a built-in name: package data, checked by the engine as it opens
    if not scenario and folder is None:
        return  # nothing to check: the console's first frame must not wait for the settings model
    from agent.scenarios import ScenarioError, load_scenario_file, resolve_scenario

    try:
        if scenario:
            resolve_scenario(scenario)
        if folder is not None:
            if not folder.is_dir():
                raise SetupError(f"--scenario-dir {folder} is not a folder")
            for path in scenario_files(folder):
                load_scenario_file(path)
    except ScenarioError as exc:
        raise SetupError(str(exc)) from None


def _console(args: argparse.Namespace) -> int:
    """Open the Textual console; it paints first and opens the run environment in the background."""
    _check_scenarios(args)
    from console.app import DiagnoseApp

    logging.captureWarnings(True)  # warnings go to the log file too, never over the screen
    # A bare `diagnose` parses no console options: the embedded defaults apply.
    app = DiagnoseApp(
        config=getattr(args, "config", None),
        scenario=getattr(args, "scenario", None),
        scenario_dir=getattr(args, "scenario_dir", None),
    )
    app.run()
    return app.return_code or 0


def _read_query(args: argparse.Namespace, scenario: Any) -> str | OversizedInput:
    if args.query is not None:
        return str(args.query)
    if args.query_file is not None:
        return _read_query_file(args.query_file)
    if scenario is not None:
        return str(scenario.query)
    raise SetupError("no query: pass --query, --query-file or a --scenario with a query")


def _read_query_file(path: Path) -> str | OversizedInput:
    """The query exactly as the file (or standard input, for `-`) holds it.

    Bytes are decoded as UTF-8 strictly and kept as they are: CRLF and CR are not turned into LF and
    a final newline stays part of the query (the query is never rewritten). Text that is not UTF-8
    cannot be passed on without rewriting it, so the run is refused before it starts. The read is
    bounded (a FIFO or a device is refused), like every input file's; a query past the cap is one the
    use case rejects as too large.
    """
    source = "standard input" if str(path) == "-" else f"query file {path}"
    try:
        if str(path) == "-":
            data = read_bounded(sys.stdin.buffer, what=source, limit=MAX_INPUT_FILE_BYTES)
        else:
            data = read_input_file(path, what="query file", limit=MAX_INPUT_FILE_BYTES)
    except InputTooLarge as exc:
        return OversizedInput.of(exc)
    except InputFileError as exc:
        raise SetupError(str(exc)) from None
    except OSError as exc:
        raise SetupError(f"cannot read {source}: {exc.strerror}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SetupError(
            f"{source} is not UTF-8 text (invalid byte at offset {exc.start}); "
            "the query is never rewritten, so save it as UTF-8"
        ) from None


def _read_previous_turn(path: Path | None, scenario: Any) -> Any:
    if path is None:
        return scenario.previous_turn if scenario is not None else None
    try:
        data = read_input_file(path, what="previous turn file", limit=MAX_INPUT_FILE_BYTES)
        text = decode_text(data, what=f"previous turn file {path}")
    except InputTooLarge as exc:
        return OversizedInput.of(exc)
    except InputFileError as exc:
        raise SetupError(str(exc)) from None
    try:
        return json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return text  # not JSON (or nested past any PreviousTurn): the use case rejects it as invalid


class _NdjsonSink:
    """`--events`: one JSON run event per line. A write failure (a full disk, a closed pipe) stops the
    stream but not the run; the command reports it after the result is printed."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.failure: OSError | None = None

    def __call__(self, event: RunEvent) -> None:
        if self.failure is not None:
            return
        line = json.dumps(event.to_wire(), ensure_ascii=False, separators=(",", ":"))
        try:
            self.stream.write(neutralize(line, form="json") + "\n")
            self.stream.flush()
        except OSError as exc:
            self.failure = exc

    def close(self) -> None:
        try:
            self.stream.close()
        except OSError as exc:
            self.failure = self.failure or exc


async def _run(args: argparse.Namespace) -> int:
    from console.wiring import open_run_environment

    _scenario_from_folder(args)
    env = open_run_environment(
        config=args.config, scenario=args.scenario, audit_db=args.audit_db, trace_endpoint=args.trace_endpoint
    )
    try:
        return await _run_in(env, args)
    finally:
        # After the result is printed (or the run failed): the wait for the trace endpoint is bounded
        # and never delays what the operator reads (docs/architecture.md, "Traces").
        env.close_traces()


async def _run_in(env: RunEnvironment, args: argparse.Namespace) -> int:
    from agent.secrets import redact_logs

    redact_logs(env.redactor)
    for line in (*env.audit.open_warnings, *env.warnings):
        warning(line)
    query = _read_query(args, env.scenario)
    previous_turn = _read_previous_turn(args.previous_turn, env.scenario)

    events: _NdjsonSink | None = None
    sinks: list[EventSink] = []
    if args.events:
        if args.events == "-":
            events = _NdjsonSink(sys.stdout)
        else:
            try:
                events = _NdjsonSink(open(args.events, "w", encoding="utf-8"))  # noqa: ASYNC230 - opened once before the run
            except OSError as exc:
                raise SetupError(f"cannot write events file {args.events}: {exc.strerror}") from None
        sinks.append(events)

    use_case = env.use_case(sinks=sinks)
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGINT, use_case.cancel)
    try:
        result = await use_case.execute(query, previous_turn)
    finally:
        loop.remove_signal_handler(signal.SIGINT)
        await env.aclose(traces=False)
        if events is not None and events.stream is not sys.stdout:
            events.close()

    # Redacted like the events, with the tool call IDs (citations, checks) exact.
    from agent.event_redaction import redact_result

    if args.json:
        text = neutralize(
            json.dumps(redact_result(env.redactor, result.to_json_dict()), ensure_ascii=False, indent=2),
            form="json",
        )
    else:
        from console.render_text import render_result

        text = render_result(result, model_label=env.model_label, redact=env.redactor.text)
    if events is not None and events.stream is sys.stdout:
        if events.failure is not None:
            _silence_stdout()  # stdout itself is closed: nothing more can be shown
            raise StdoutClosed(result.exit_code)
        _print_err(text)  # stdout carries exactly one format: the NDJSON events
        return result.exit_code
    _print_out(text, result.exit_code)
    if events is not None and events.failure is not None:
        error(
            f"the events file {args.events} could not be written: {events.failure.strerror or events.failure}"
        )
        return SETUP_ERROR
    return result.exit_code
