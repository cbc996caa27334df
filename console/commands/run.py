"""`diagnose run`: one headless diagnosis run (docs/contracts.md, "CLI").

The query comes from `--query`, `--query-file` or the scenario, read exactly; the result is printed as
text or JSON and the process exits with the outcome's code (docs/contracts.md, "Execution result").
`--events` writes the run events as NDJSON to a file or, with `-`, to standard output, which then carries
only the events.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from agent.input_files import (
    InputTooLarge,
    OversizedInput,
    decode_text,
    input_file_cap,
    read_bounded,
    read_input_file,
)
from agent.vocabulary import SETUP_ERROR, RunFailureCause
from console.commands.audit import trace_endpoint
from console.commands.options import CONFIG_HELP, SCENARIO_HELP, scenario_from_folder
from console.commands.output import print_err, print_out
from console.errors import SetupError, error, warning
from console.presentation import SCRIPTED_NOTICE, SCRIPTED_NOTICE_DETAIL, exit_code_help
from console.safe_text import neutralize
from console.standard_streams import OutputFailed, silence_stdout

if TYPE_CHECKING:
    from agent.contracts import ExecutionResult
    from agent.events.run_events import EventSink, RunEvent
    from agent.use_case import DiagnosisUseCase
    from audit.output_files import OutputFile
    from console.commands.wait_line import ModelWaitLine
    from console.interrupts import Interrupts
    from console.wiring import RunEnvironment


def add_run_parser(subparsers: Any) -> None:
    run = subparsers.add_parser(
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
    run.add_argument("--scenario", metavar="NAME|FILE", help=SCENARIO_HELP)
    run.add_argument(
        "--scenario-dir", type=Path, metavar="DIR", help="a folder of scenario files --scenario NAME may name"
    )
    run.add_argument("--config", type=Path, metavar="F", help=CONFIG_HELP)
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
    run.set_defaults(handler=run_command)


def run_command(args: argparse.Namespace, interrupts: Interrupts) -> int:
    return asyncio.run(_run(args, interrupts))


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
    """On a terminal, a line on stderr while a model round waits (`console.commands.wait_line`)."""
    if sys.stderr is None or not sys.stderr.isatty():
        return None
    from agent.model.failure import model_endpoint
    from console.commands.wait_line import ModelWaitLine

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
    scenario_from_folder(args)
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
    from agent.events.redaction import redact_result

    if args.json:
        return neutralize(
            json.dumps(redact_result(env.redactor, result.to_json_dict()), ensure_ascii=False, indent=2),
            form="json",
        )
    from console.commands.render_text import render_result

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
        print_err(text)  # stdout carries exactly one format: the NDJSON events
        if events.failure is None:
            return result.exit_code
        silence_stdout()
        raise events.failure if isinstance(events.failure, OutputFailed) else OutputFailed(events.failure)
    print_out(text, result.exit_code)
    if events is not None and events.failure is not None:
        error(
            f"the events file {args.events} could not be written: {events.failure.strerror or events.failure}"
        )
        return SETUP_ERROR
    return result.exit_code
