"""`diagnose`: headless runs, scenario listing and the console entry point (DESIGN 3.8).

Exit codes follow DESIGN 3.5 (0 Draft, 10 controlled stop, 11 budget, 12 cancelled, 1 failed,
2 rejected); 3 means the run could not be set up (bad config, unknown scenario, unusable audit file).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from agent.events import RequiredSinkFailed
from console.audit_cli import add_audit_parser, run_audit_command
from console.demo_cli import add_demo_parser, run_demo_command
from console.errors import SetupError
from console.eval_cli import add_eval_parser, run_eval_command
from tools.redaction import NOOP

SETUP_ERROR = 3


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="diagnose", description="Evidence-bound incident diagnosis console."
    )
    sub = parser.add_subparsers(dest="command")

    console = sub.add_parser("console", help="open the console (default)")
    console.add_argument("--config", type=Path)
    console.add_argument("--scenario")
    console.add_argument("--scenario-dir", type=Path, help="a folder of scenario files for the picker")

    run = sub.add_parser("run", help="one headless diagnosis run")
    query = run.add_mutually_exclusive_group()
    query.add_argument("--query")
    query.add_argument(
        "--query-file", type=Path, help="UTF-8 file holding the query, kept exactly ('-' for stdin)"
    )
    run.add_argument("--previous-turn", type=Path, help="JSON file with a PreviousTurn")
    run.add_argument("--scenario", help="built-in scenario name or scenario file")
    run.add_argument("--config", type=Path)
    run.add_argument("--audit-db", type=Path)
    run.add_argument("--events", help="write NDJSON run events to this file ('-' for stdout)")
    run.add_argument("--json", action="store_true", help="print the execution result as JSON")

    add_demo_parser(sub)
    add_audit_parser(sub)
    add_eval_parser(sub)

    scenarios = sub.add_parser("scenarios", help="list built-in scenarios")
    scenarios.add_argument("--json", action="store_true")

    serve = sub.add_parser("serve", help="the console in a web browser (textual-serve)")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--config", type=Path)
    return parser


def _log_to_file() -> None:
    """Library logging (haystack, httpx, adapters) goes to a file, never over the terminal output."""
    import platformdirs

    log_dir = platformdirs.user_state_path("diagnosis-console")
    try:
        log_dir.mkdir(parents=True, exist_ok=True)
        handler: logging.Handler = logging.FileHandler(log_dir / "diagnose.log", encoding="utf-8")
    except OSError:
        handler = logging.NullHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(NOOP.logging_filter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    command = args.command or "console"
    _log_to_file()
    try:
        if command == "audit":
            return run_audit_command(args)
        if command == "scenarios":
            return _scenarios(args.json)
        if command == "demo":
            return run_demo_command(args)
        if command == "eval":
            return run_eval_command(args)
        if command == "console":
            return _console(args)
        if command == "serve":
            from console.serve import serve

            return serve(args.host, args.port, args.config)
        return asyncio.run(_run(args))
    except SetupError as exc:
        print(f"diagnose: {NOOP.text(str(exc))}", file=sys.stderr)
        return SETUP_ERROR
    except RequiredSinkFailed as exc:
        print(
            f"diagnose: the audit could not be written, so the run was stopped: {NOOP.text(str(exc))}",
            file=sys.stderr,
        )
        return SETUP_ERROR


def _scenarios(as_json: bool) -> int:
    from agent.scenarios import builtin_scenarios

    items = [{"name": s.name, "title": s.title, "description": s.description} for s in builtin_scenarios()]
    if as_json:
        print(json.dumps(items, ensure_ascii=False, indent=2))
    else:
        width = max(len(i["name"]) for i in items)
        for item in items:
            print(f"{item['name']:<{width}}  {item['title']}")
    return 0


def _console(args: argparse.Namespace) -> int:
    """Open the Textual console; it paints first and opens the run environment in the background."""
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


def _read_query(args: argparse.Namespace, scenario: Any) -> str:
    if args.query is not None:
        return str(args.query)
    if args.query_file is not None:
        return _read_query_file(args.query_file)
    if scenario is not None:
        return str(scenario.query)
    raise SetupError("no query: pass --query, --query-file or a --scenario with a query")


def _read_query_file(path: Path) -> str:
    """The query exactly as the file (or standard input, for `-`) holds it.

    Bytes are decoded as UTF-8 strictly and kept as they are: CRLF and CR are not turned into LF and
    a final newline stays part of the query (the query is never rewritten). Text that is not UTF-8
    cannot be passed on without rewriting it, so the run is refused before it starts.
    """
    source = "standard input" if str(path) == "-" else f"query file {path}"
    try:
        data = sys.stdin.buffer.read() if str(path) == "-" else Path(path).read_bytes()
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
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SetupError(f"cannot read previous turn file {path}: {exc}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text  # not JSON: the use case rejects it as PREVIOUS_TURN_INVALID


class _NdjsonSink:
    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def __call__(self, event: Any) -> None:
        self.stream.write(json.dumps(event, ensure_ascii=False, separators=(",", ":")) + "\n")
        self.stream.flush()


async def _run(args: argparse.Namespace) -> int:
    from agent.events import EventSink
    from console.wiring import open_run_environment

    env = open_run_environment(config=args.config, scenario=args.scenario, audit_db=args.audit_db)
    for handler in logging.getLogger().handlers:
        handler.addFilter(env.redactor.logging_filter())  # configured secret values, exactly
    query = _read_query(args, env.scenario)
    previous_turn = _read_previous_turn(args.previous_turn, env.scenario)

    events_stream: TextIO | None = None
    sinks: list[EventSink] = []
    if args.events:
        if args.events == "-":
            events_stream = sys.stdout
        else:
            try:
                events_stream = open(args.events, "w", encoding="utf-8")  # noqa: ASYNC230 - opened once before the run
            except OSError as exc:
                raise SetupError(f"cannot write events file {args.events}: {exc.strerror}") from None
        sinks.append(_NdjsonSink(events_stream))

    use_case = env.use_case(sinks=sinks)
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGINT, use_case.cancel)
    try:
        result = await use_case.execute(query, previous_turn)
    finally:
        loop.remove_signal_handler(signal.SIGINT)
        await env.aclose()
        if events_stream is not None and events_stream is not sys.stdout:
            events_stream.close()

    if args.json:
        print(json.dumps(env.redactor.value(result.to_json_dict()), ensure_ascii=False, indent=2))
    else:
        from console.render_text import render_result

        print(env.redactor.text(render_result(result, model_label=env.model_label)))
    return result.exit_code
