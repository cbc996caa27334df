"""`diagnose audit ...`: browse, export and prune the audit database from a terminal.
(docs/contracts.md, "CLI")

Every subcommand finds the file the way a run does (`--audit-db` F or URL, else `[audit] url` or
`path` of the configuration, else the user state directory) and never creates one: reading a file
that does not exist is an error. Exit codes: 0 done, 1 the requested run does not exist, 2 bad
arguments (also: an `--output` file that exists without `--force`, a prune that is neither on a
terminal nor confirmed by `--yes`), 3 the audit or the configuration cannot be used.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from agent.errors import DiagnoseError
from agent.vocabulary import INTERRUPTED_RUN, NOT_FOUND, SETUP_ERROR, USAGE_ERROR, InvocationStatus, Outcome
from console.errors import AUDIT_COMMAND, SetupError, error, reported
from console.presentation import counted
from console.safe_text import neutralize
from tools.vocabulary import ErrorCode

if TYPE_CHECKING:  # `diagnose` builds this parser on every start: sqlite-utils loads only for `audit`
    from audit.browse import AuditBrowser, Page, Row, RunTimeline
    from audit.common import PruneReport
    from audit.location import AuditLocation
    from audit.port import AuditBackend
    from audit.rows import InvocationRow, ModelRoundRow, ProtocolEventRow, RunRow


_AGE = re.compile(r"^\s*(\d{1,12})\s*([a-z]+)\s*$", re.IGNORECASE)
_MAX_AGE = timedelta(days=36_500)
MAX_PAGE_SIZE = 10_000
# One spelling per unit, none shared: `m` (minutes or months?) is refused rather than guessed.
AGE_UNITS = {
    "s": timedelta(seconds=1),
    "min": timedelta(minutes=1),
    "h": timedelta(hours=1),
    "d": timedelta(days=1),
    "w": timedelta(weeks=1),
    "mo": timedelta(days=30),
    "y": timedelta(days=365),
}
AGE_EXAMPLES = "30d, 12h, 6mo, 2w, 90s or 45min"
_PREVIEW = 96


def parse_age(value: str) -> timedelta:
    """An age such as 30d, 12h, 6mo (a month is 30 days), 2w, 90s, 45min or 1y; at most a century, so
    `now - age` is always a date. A bare `m` is refused: it reads as minutes to some and months to others,
    and prune deletes by it."""
    match = _AGE.match(value)
    if not match:
        raise argparse.ArgumentTypeError(f"not an age like {AGE_EXAMPLES}: {_clean(value)!r}")
    amount, unit = int(match.group(1)), match.group(2).lower()
    if unit == "m":
        raise argparse.ArgumentTypeError(
            f"{_clean(value)!r} is ambiguous: write {amount}min for minutes or {amount}mo for months"
        )
    if unit not in AGE_UNITS:
        raise argparse.ArgumentTypeError(
            f"unknown unit {_clean(unit)!r} in {_clean(value)!r}; use s, min, h, d, w, mo or y"
        )
    if amount > _MAX_AGE // AGE_UNITS[unit]:
        raise argparse.ArgumentTypeError(f"an age of at most {_MAX_AGE.days} days: {_clean(value)!r}")
    return amount * AGE_UNITS[unit]


def _time_arg(value: str) -> str:
    """An ISO-8601 date/time, or an age (`2h`: two hours ago)."""
    from audit.browse import normalize_time
    from audit.common import audit_timestamp

    if _AGE.match(value):
        return audit_timestamp(datetime.now(UTC) - parse_age(value))
    try:
        return normalize_time(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{exc}; or an age like 2h") from None


def trace_endpoint(value: str) -> str:
    """An OTLP/HTTP endpoint as an argparse type: `diagnose run` and `diagnose audit export` alike."""
    from agent.settings import check_trace_endpoint

    try:
        return check_trace_endpoint(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _page_size(value: str) -> int:
    try:
        number = int(value) if len(value) <= 12 else 0
    except ValueError:
        number = 0
    if not 1 <= number <= MAX_PAGE_SIZE:
        raise argparse.ArgumentTypeError(f"not a number from 1 to {MAX_PAGE_SIZE}: {_clean(value)!r}")
    return number


def _one_of(what: str, values: Callable[[], list[str]], case: Callable[[str], str]) -> Callable[[str], str]:
    """An argparse type for an enumerated filter: a value outside the vocabulary is a usage error (exit
    2) listing the valid ones, never a silent "(none)". Case is forgiven (`error` is ERROR)."""

    def parse(value: str) -> str:
        valid = values()
        if case(value) in valid:
            return case(value)
        raise argparse.ArgumentTypeError(f"unknown {what} {_clean(value)!r}; valid: {', '.join(valid)}")

    parse.__name__ = what  # argparse names the type in its own messages
    return parse


def _tools() -> list[str]:
    from tools.definitions import TOOL_NAMES

    return [str(name) for name in TOOL_NAMES]


def _statuses() -> list[str]:
    return [str(s) for s in InvocationStatus]


def _error_codes() -> list[str]:
    return [str(c) for c in ErrorCode]


def _outcomes() -> list[str]:
    return [*(str(o) for o in Outcome), INTERRUPTED_RUN]


def add_audit_parser(subparsers: Any) -> None:
    """Adds `audit` and its subcommands to the `diagnose` parser's subparsers."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--audit-db",
        metavar="F|URL",
        help="audit database file, or sqlite:///F or mysql://user@host/db (default: [audit] url or path)",
    )
    common.add_argument("--config", type=Path, help="configuration file (for [audit] path)")

    audit = subparsers.add_parser("audit", help="browse, export and prune the audit database")
    sub = audit.add_subparsers(dest="audit_command", metavar="COMMAND", required=True)

    runs = sub.add_parser("runs", parents=[common], help="runs, newest first")
    runs.add_argument("--session", help="only this session")
    runs.add_argument(
        "--outcome",
        type=_one_of("outcome", _outcomes, str.upper),
        help="only this outcome (DRAFT, CONTROLLED_STOP, ..., or INTERRUPTED)",
    )
    runs.add_argument("--search", help="text in the run's query or its invocations")
    _paging(runs)

    show = sub.add_parser("show", parents=[common], help="one run's timeline: rounds, invocations, events")
    show.add_argument("run_id", metavar="RUN_ID")
    show.add_argument("--json", action="store_true", help="machine-readable timeline")

    inv = sub.add_parser("invocations", parents=[common], help="tool invocations, newest first")
    inv.add_argument("--run", help="only this run")
    inv.add_argument("--session", help="only this session")
    inv.add_argument(
        "--tool", type=_one_of("tool", _tools, str.lower), help="lookup_knowledge, query_logs or query_mysql"
    )
    inv.add_argument(
        "--status",
        type=_one_of("status", _statuses, str.upper),
        help="STARTED, FOUND, EMPTY, ERROR, CANCELLED or INTERRUPTED",
    )
    inv.add_argument(
        "--error-code",
        type=_one_of("error code", _error_codes, str.upper),
        help="e.g. TIMEOUT, UNAVAILABLE, POLICY_REJECTED",
    )
    inv.add_argument("--since", type=_time_arg, help="started at or after (ISO-8601, or an age like 2h)")
    inv.add_argument("--until", type=_time_arg, help="started before (ISO-8601, or an age like 2h)")
    inv.add_argument("--search", help="text in the input, the projection or the run's query")
    _paging(inv)

    export = sub.add_parser("export", parents=[common], help="stream the audit as JSON lines, newest first")
    export.add_argument("--format", choices=["jsonl"], default="jsonl", help="jsonl: one JSON object a line")
    export.add_argument(
        "--per",
        choices=["invocation", "run"],
        default="invocation",
        help="one line per invocation (default) or per run with its timeline",
    )
    where = export.add_mutually_exclusive_group()
    where.add_argument("--output", type=Path, help="file to write (a new file, owner-only; default stdout)")
    where.add_argument(
        "--otlp",
        type=trace_endpoint,
        metavar="URL",
        help="send runs as OpenTelemetry traces to this OTLP/HTTP endpoint instead "
        "(e.g. http://localhost:4318/v1/traces; [telemetry.traces] sets headers and content capture)",
    )
    export.add_argument(
        "--run",
        action="append",
        metavar="RUN_ID",
        help="with --otlp: only this run (repeat for more; default: every finished run)",
    )
    export.add_argument(
        "--force",
        action="store_true",
        help="replace an existing --output file (never the audit; the old file stays whole until the new "
        "one is complete)",
    )

    copy = sub.add_parser(
        "copy", help="copy finished runs between audits (idempotent: run it again to resume)"
    )
    copy.add_argument(
        "--from", dest="source", required=True, metavar="URL", help="sqlite:///F, mysql://... or F"
    )
    copy.add_argument(
        "--to", dest="target", required=True, metavar="URL", help="sqlite:///F, mysql://... or F"
    )
    copy.add_argument("--from-password-env", metavar="VAR", help="password variable of --from (mysql)")
    copy.add_argument("--to-password-env", metavar="VAR", help="password variable of --to (mysql)")
    copy.add_argument("--config", type=Path, help="configuration file (the evidence account to refuse)")

    prune = sub.add_parser(
        "prune",
        parents=[common],
        help="delete runs finished longer ago than AGE (shows what first; asks unless --yes)",
    )
    prune.add_argument(
        "--older-than",
        type=parse_age,
        required=True,
        metavar="AGE",
        help=f"e.g. {AGE_EXAMPLES} (a month is 30 days; a bare m is refused as ambiguous)",
    )
    prune.add_argument(
        "--dry-run", action="store_true", help="count what would be deleted, and the cutoff; delete nothing"
    )
    prune.add_argument(
        "--yes", action="store_true", help="delete without asking (needed when not on a terminal)"
    )
    prune.add_argument("--vacuum", action="store_true", help="then give the space back (rebuilds search)")


def _paging(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--limit", type=_page_size, default=50, help="rows per page (default 50)")
    parser.add_argument("--cursor", help="continue after a previous page (printed at its end)")
    parser.add_argument("--json", action="store_true", help='{"rows": [...], "next_cursor": ...}')


def run_audit_command(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Runs one parsed `diagnose audit` command; returns the exit code."""
    from audit.browse import AuditBrowser
    from audit.factory import open_audit_store
    from audit.location import SqliteLocation

    out = out or sys.stdout
    if args.audit_command == "copy":
        from console.audit_copy import run_copy_command

        return run_copy_command(args, out)
    try:
        location = _resolve_location(args)
        args.location = location
        if isinstance(location, SqliteLocation) and not location.path.is_file():
            raise SetupError(f"no audit database at {location.path}")
        with open_audit_store(location) as store:
            for line in store.open_warnings:
                _error(f"warning: {line}")
            return _dispatch(args, AuditBrowser(store), store, out)
    except DiagnoseError as exc:  # before ValueError: an unusable audit location is both
        return reported(exc, command=AUDIT_COMMAND)
    except ValueError as exc:  # a cursor or time that does not parse
        _error(str(exc))
        return USAGE_ERROR
    except BrokenPipeError:  # `diagnose audit export | head`: the reader has seen enough
        # Keeps the interpreter's final flush from failing on the closed pipe.
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _error(message: str) -> None:
    error(message, command=AUDIT_COMMAND)


def _resolve_location(args: argparse.Namespace) -> AuditLocation:
    """Exactly as console.wiring resolves it for a run; a plain `--audit-db` file needs no configuration."""
    from audit.location import SqliteLocation, parse_audit_argument

    if args.audit_db is not None:
        location = parse_audit_argument(args.audit_db, what="--audit-db")
        if isinstance(location, SqliteLocation):
            return location
    from agent.secrets import build_redactor, redact_logs
    from agent.settings import load_settings
    from console.audit_target import audit_location

    settings = load_settings(args.config)
    redact_logs(build_redactor(settings))  # a server's messages may echo what it was sent
    return audit_location(settings, args.audit_db)


def _dispatch(args: argparse.Namespace, browser: AuditBrowser, store: AuditBackend, out: TextIO) -> int:
    from audit.browse import InvocationFilter
    from audit.export import timeline_for_json

    command = args.audit_command
    if command == "runs":
        runs = browser.runs(
            limit=args.limit,
            cursor=args.cursor,
            session_id=args.session,
            outcome=args.outcome,
            text=args.search,
        )
        _print_page(runs, args.json, _RUN_HEADER, _run_line, out)
    elif command == "invocations":
        flt = InvocationFilter(
            run_id=args.run,
            session_id=args.session,
            tool=args.tool,
            status=args.status,
            error_code=args.error_code,
            since=args.since,
            until=args.until,
            text=args.search,
        )
        invocations = browser.invocations(flt, limit=args.limit, cursor=args.cursor)
        _print_page(invocations, args.json, _INVOCATION_HEADER, _invocation_line, out)
    elif command == "show":
        timeline = browser.timeline(args.run_id)
        if timeline is None:
            raise DiagnoseError(f"no run {args.run_id!r} in {store.location}", exit_code=NOT_FOUND)
        if args.json:
            _write_json(timeline_for_json(timeline), out)
        else:
            _print_timeline(timeline, out)
    elif command == "export":
        return _export(args, browser, store, out)
    elif command == "prune":
        return _prune(args, browser, store, out)
    return 0


def _export(args: argparse.Namespace, browser: AuditBrowser, store: AuditBackend, out: TextIO) -> int:
    from audit.export import export_jsonl

    if args.otlp is not None:
        return _export_traces(args, browser, store)
    if args.run:
        raise DiagnoseError("--run selects the runs --otlp sends", exit_code=USAGE_ERROR)
    if args.output is None:
        export_jsonl(browser, _JsonLinesForTerminal(out), per=args.per)
        return 0
    from audit.location import local_files
    from audit.output_files import OutputExistsError, OutputFile

    # The export holds the same operator data as the audit: a new owner-only file, never through a
    # link; an existing one only with --force, and never the audit being exported.
    try:
        output = OutputFile(args.output, force=args.force, protected=local_files(args.location))
    except OutputExistsError:
        raise DiagnoseError(
            f"{args.output} already exists; --force replaces it", exit_code=USAGE_ERROR
        ) from None
    except OSError as exc:
        raise SetupError(f"cannot write {args.output}: {exc.strerror or exc}") from None
    with output as stream:
        lines = export_jsonl(browser, stream, per=args.per)
    print(f"exported {counted(lines, args.per)} to {args.output}", file=sys.stderr)
    return 0


def _export_traces(args: argparse.Namespace, browser: AuditBrowser, store: AuditBackend) -> int:
    """`--otlp URL`: audited runs as traces (docs/contracts.md, "Traces"). Exit 1 when a named run
    is not in the audit, 3 when the endpoint did not take every run (or traces cannot be sent)."""
    from agent.secrets import build_redactor, redact_logs
    from agent.settings import load_settings
    from audit.export import iter_runs
    from console.traces import require_sdk, trace_target

    settings = load_settings(args.config)
    traces = settings.telemetry.traces
    target = trace_target(traces, args.otlp)
    require_sdk()
    redactor = build_redactor(settings)
    redact_logs(redactor)
    from console.traces.backfill import AuditedRunTraces

    run_ids = args.run or (run["run_id"] for run in iter_runs(browser))
    sender = AuditedRunTraces(traces, target, redactor)
    try:
        report = sender.send(browser, run_ids)
    finally:
        sender.close()
    for run_id in report.missing:
        _error(f"no run {run_id!r} in {store.location}")
    if args.run:
        for run_id in report.running:
            _error(f"run {run_id!r} has not finished: not sent")
    runs = len(report.sent)
    print(
        f"sent {counted(runs, 'run')} ({counted(report.spans, 'span')}) to {_clean(target.endpoint)}",
        file=sys.stderr,
    )
    if report.refused:
        _error(f"the trace endpoint did not accept {counted(len(report.refused), 'run')} (see the log)")
        return SETUP_ERROR
    return NOT_FOUND if report.missing or (args.run and report.running) else 0


def _prune(args: argparse.Namespace, browser: AuditBrowser, store: AuditBackend, out: TextIO) -> int:
    """Show what goes (runs and rows finished before the cutoff), ask on a terminal unless --yes, then
    delete exactly that: the preview and the deletion share one cutoff."""
    from audit.common import audit_timestamp

    now = datetime.now(UTC)
    plan = browser.prunable(audit_timestamp(now - args.older_than))
    what = f"{_pruned_rows(plan)} from {_clean(store.location)}"
    if args.dry_run:
        out.write(f"would prune {what}\n")
        return 0
    if not args.yes:
        if not sys.stdin.isatty():
            raise DiagnoseError(
                f"prune would delete {what}: pass --yes to confirm (or --dry-run to only count)",
                exit_code=USAGE_ERROR,
            )
        if not _confirm(f"delete {what}? [y/N] "):
            out.write("nothing pruned\n")
            return 0
    report = store.prune(args.older_than, now=now)
    if args.vacuum:
        store.vacuum()
    out.write(f"pruned {_pruned_rows(report)}\n")
    return 0


def _pruned_rows(report: PruneReport) -> str:
    """What a prune takes (or would take): the preview and the result say it alike."""
    return (
        f"{counted(report.runs, 'run')} finished before {report.cutoff} "
        f"({counted(report.model_rounds, 'model round')}, {counted(report.invocations, 'invocation')}, "
        f"{counted(report.protocol_events, 'protocol event')})"
    )


def _confirm(question: str) -> bool:
    """Ask on the terminal (stderr: stdout may be a pipe); only y or yes agrees."""
    sys.stderr.write(question)
    sys.stderr.flush()
    return sys.stdin.readline().strip().lower() in ("y", "yes")


# --- terminal rendering ------------------------------------------------------------------------------
# Every value printed here comes from the audit file, which anyone who can write it may have tampered
# with: each one is shown through `neutralize` as text, whatever its stored type.


def _clean(value: Any) -> str:
    return neutralize("-" if value is None else str(value), newlines=False)


def _preview(value: Any, width: int = _PREVIEW) -> str:
    text = "" if value is None else _clean(value)
    return text if len(text) <= width else text[: width - 1] + "…"


def _run_state(run: RunRow) -> str:
    if run["interrupted"]:
        return f"{INTERRUPTED_RUN} (closed by crash recovery)"
    if run["finished_at"] is None:
        return "RUNNING"
    return f"{_clean(run['outcome'])} / {_clean(run['stop_reason'])}"


def _run_line(run: RunRow) -> str:
    when = run["started_at"] or run["finished_at"] or ""
    return (
        f"{_preview(when, 27):<27}  {_clean(run['run_id']):<18} {_preview(_run_state(run), 44):<44} "
        f"{_preview(run['model_calls'], 5):>5} {_preview(run['total_tokens'], 7):>7}  "
        f"{_preview(run['query'], 60)}"
    )


def _invocation_line(row: InvocationRow) -> str:
    duration = "-" if row["duration_ms"] is None else f"{_clean(row['duration_ms'])}ms"
    return (
        f"{_preview(row['started_at'], 27):<27}  {_clean(row['run_id']):<18} "
        f"{_preview(row['tool_call_id'], 10):<10} {_preview(row['tool'], 16):<16} "
        f"{_preview(row['status'], 11):<11} {_preview(row['error_code'] or '-', 16):<16} "
        f"{_preview(row['evaluation'] or '-', 8):<8} {_preview(duration, 8):>8}  "
        f"{_preview(row['input_json'], 60)}"
    )


_RUN_HEADER = f"{'STARTED':<27}  {'RUN':<18} {'OUTCOME / STOP REASON':<44} {'CALLS':>5} {'TOKENS':>7}  QUERY"
_INVOCATION_HEADER = (
    f"{'STARTED':<27}  {'RUN':<18} {'CALL':<10} {'TOOL':<16} {'STATUS':<11} {'ERROR':<16} {'EVAL':<8} "
    f"{'TIME':>8}  INPUT"
)


def _print_page(page: Page[Row], as_json: bool, header: str, line: Callable[[Row], str], out: TextIO) -> None:
    if as_json:
        from audit.export import row_for_json

        rows = [row_for_json(row) for row in page.rows]
        _write_json({"rows": rows, "next_cursor": page.next_cursor}, out)
        return
    if not page.rows:
        out.write("(none)\n")
        return
    out.write(header + "\n")
    for row in page.rows:
        out.write(line(row) + "\n")
    if page.next_cursor:
        # A hint for the reader, not a row: on stderr, so `| wc -l` or `| cut` see only the data.
        print(f"-- more: --cursor {_clean(page.next_cursor)}", file=sys.stderr)


class _JsonLinesForTerminal(io.TextIOBase):
    """JSON lines bound for stdout: string escapes for unsafe characters, the same values once decoded."""

    def __init__(self, out: TextIO) -> None:
        self._out = out

    def write(self, text: str) -> int:
        self._out.write(neutralize(text, form="json"))
        return len(text)

    def flush(self) -> None:
        self._out.flush()


def _write_json(value: Any, out: TextIO) -> None:
    """Pretty JSON whose strings cannot drive the terminal; it still decodes to the same values."""
    out.write(neutralize(json.dumps(value, ensure_ascii=False, indent=2), form="json") + "\n")


def _call_ids(stored: Any) -> str:
    try:
        ids = json.loads(stored) if isinstance(stored, str) else []
    except ValueError:
        return _clean(stored)
    return ", ".join(_clean(item) for item in ids) if isinstance(ids, list) else _clean(stored)


def _result_lines(run: RunRow) -> list[str]:
    """The run's Draft (or why there is none), from the result the audit stored: what `diagnose run`
    printed, in the same words. The stored JSON may have been edited: any shape is shown, never
    trusted, and every value passes the neutraliser (a newline in a value cannot forge a line)."""
    from console.render_text import draft_lines, failure_lines

    try:
        stored = run["result_json"]
        result = json.loads(stored) if isinstance(stored, str) else None
    except (ValueError, RecursionError):
        result = None
    if not isinstance(result, dict):
        if run["interrupted"]:
            return ["Draft: none (the run was interrupted)"]
        if run["finished_at"] is None:
            return ["Draft: none yet (the run is still going)"]
        return ["Draft: not recorded"]
    draft = result.get("draft")
    lines: list[str] = []
    if isinstance(draft, dict):
        lines += ["Draft:", *(f"  {line}" for line in draft_lines(draft, show=_clean))]
    else:
        lines.append(f"Draft: none ({_run_state(run)})")
    failure = result.get("failure")
    if isinstance(failure, dict):
        lines += failure_lines(failure, show=_clean)
    return lines


def _print_timeline(timeline: RunTimeline, out: TextIO) -> None:
    run = timeline.run
    usage = ""
    if run["model_calls"] is not None:
        usage = (
            f"{counted(_clean(run['model_calls']), 'model call')}, "
            f"{counted(_clean(run['total_tokens']), 'token')} "
            f"({_clean(run['prompt_tokens'])} prompt + {_clean(run['completion_tokens'])} completion)"
        )
    from console.run_setup import run_setup_text

    model, limits = run_setup_text(run)
    header = [
        ("run", f"{_clean(run['run_id'])}   session {_clean(run['session_id'])}"),
        ("query", _clean(run["query"] or "")),
        ("model", model),
        ("limits", limits),
        ("result", _run_state(run)),
        ("started", _clean(run["started_at"])),
        ("finished", _clean(run["finished_at"])),
        ("usage", usage or "-"),
    ]
    for label, value in header:
        out.write(f"{label:<9} {value}\n")
    out.write("\n")
    for line in _result_lines(run):
        out.write(line + "\n")
    out.write("\n")
    if not timeline.entries:
        out.write("(no model rounds, invocations or protocol events)\n")
    for entry in timeline.entries:
        stamp = _clean(entry.at)
        at = stamp[11:23] if len(stamp) >= 23 else stamp
        if entry.kind == "model_round":
            _print_round(at, entry.data, out)
        elif entry.kind == "invocation":
            _print_invocation(at, entry.data, out)
        else:
            _print_protocol_event(at, entry.data, out)


def _print_round(at: str, data: ModelRoundRow, out: TextIO) -> None:
    ids = _call_ids(data["tool_call_ids"]) if data["tool_call_ids"] else ""
    parts = [
        f"{'~' if data['usage_estimated'] else ''}"
        f"{_clean(data['prompt_tokens'] or 0)}+{_clean(data['completion_tokens'] or 0)}"
        " tokens",
        f"{_clean(data['duration_ms'])} ms" if data["duration_ms"] is not None else "",
        f"calls {ids}" if ids else "",
        "text" if data["has_text"] else "",
    ]
    out.write(f"{at}  round {_clean(data['round']):<6} {'  '.join(p for p in parts if p)}\n")


def _print_invocation(at: str, data: InvocationRow, out: TextIO) -> None:
    error = f" {_clean(data['error_code'])}" if data["error_code"] else ""
    reason = f" ({_clean(data['reason'])})" if data["reason"] else ""
    duration = f"  {_clean(data['duration_ms'])} ms" if data["duration_ms"] is not None else ""
    evaluation = f"  evaluation {_clean(data['evaluation'])}" if data["evaluation"] else ""
    call = _preview(data["tool_call_id"], 12)
    out.write(
        f"{at}  {call:<12} {_clean(data['tool'])} {_clean(data['status'])}"
        f"{error}{reason}{duration}{evaluation}\n"
    )
    out.write(f"{'':14}input      {_preview(data['input_json'], 200)}\n")
    if data["projection_json"]:
        out.write(f"{'':14}projection {_preview(data['projection_json'], 200)}\n")


def _print_protocol_event(at: str, data: ProtocolEventRow, out: TextIO) -> None:
    call = f" {_clean(data['tool_call_id'])}" if data["tool_call_id"] else ""
    detail = data["detail_json"]
    detail_text = f"  {_preview(detail, 160)}" if detail and detail != "{}" else ""
    out.write(f"{at}  protocol     {_clean(data['code'])}{call}{detail_text}\n")
