"""`diagnose audit ...`: browse, export and prune the audit database from a terminal (DESIGN 3.8).

Every subcommand finds the file the way a run does (`--audit-db`, else `[audit] path` of the
configuration, else the user state directory) and never creates one: reading a file that does not
exist is an error. Exit codes: 0 done, 1 the requested run does not exist, 2 bad arguments,
3 the audit or the configuration cannot be used.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:  # `diagnose` builds this parser on every start: sqlite-utils loads only for `audit`
    from audit import AuditStore
    from audit.browse import AuditBrowser, Page, RunTimeline

NOT_FOUND = 1
USAGE_ERROR = 2
SETUP_ERROR = 3

_AGE = re.compile(r"^\s*(\d+)\s*([dhm])\s*$")
_AGE_UNITS = {"d": "days", "h": "hours", "m": "minutes"}
# Control characters in stored text (model or tool output) must not drive the operator's terminal.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_PREVIEW = 96


class _AuditCommandError(Exception):
    def __init__(self, message: str, code: int = SETUP_ERROR) -> None:
        super().__init__(message)
        self.code = code


def parse_age(value: str) -> timedelta:
    """`30d`, `12h`, `90m`."""
    match = _AGE.match(value)
    if not match:
        raise argparse.ArgumentTypeError(f"not an age like 30d, 12h or 90m: {value!r}")
    return timedelta(**{_AGE_UNITS[match.group(2)]: int(match.group(1))})


def _time_arg(value: str) -> str:
    """An ISO-8601 date/time, or an age (`2h`: two hours ago)."""
    from audit.browse import normalize_time
    from audit.store import audit_timestamp

    if _AGE.match(value):
        return audit_timestamp(datetime.now(UTC) - parse_age(value))
    try:
        return normalize_time(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{exc}; or an age like 2h") from None


def _positive(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"not a positive number: {value!r}")
    return number


def add_audit_parser(subparsers: Any) -> None:
    """Adds `audit` and its subcommands to the `diagnose` parser's subparsers."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--audit-db", type=Path, help="audit database file (default: [audit] path)")
    common.add_argument("--config", type=Path, help="configuration file (for [audit] path)")

    audit = subparsers.add_parser("audit", help="browse, export and prune the audit database")
    sub = audit.add_subparsers(dest="audit_command", metavar="COMMAND", required=True)

    runs = sub.add_parser("runs", parents=[common], help="runs, newest first")
    runs.add_argument("--session", help="only this session")
    runs.add_argument("--outcome", help="only this outcome (DRAFT, CONTROLLED_STOP, ..., or INTERRUPTED)")
    runs.add_argument("--search", help="text in the run's query or its invocations")
    _paging(runs)

    show = sub.add_parser("show", parents=[common], help="one run's timeline: rounds, invocations, events")
    show.add_argument("run_id", metavar="RUN_ID")
    show.add_argument("--json", action="store_true", help="machine-readable timeline")

    inv = sub.add_parser("invocations", parents=[common], help="tool invocations, newest first")
    inv.add_argument("--run", help="only this run")
    inv.add_argument("--session", help="only this session")
    inv.add_argument("--tool", help="lookup_knowledge, query_logs or query_mysql")
    inv.add_argument("--status", help="STARTED, FOUND, EMPTY, ERROR, CANCELLED or INTERRUPTED")
    inv.add_argument("--error-code", help="e.g. TIMEOUT, UNAVAILABLE, POLICY_REJECTED")
    inv.add_argument("--since", type=_time_arg, help="started at or after (ISO-8601, or an age like 2h)")
    inv.add_argument("--until", type=_time_arg, help="started before (ISO-8601, or an age like 2h)")
    inv.add_argument("--search", help="text in the input, the projection or the run's query")
    _paging(inv)

    export = sub.add_parser("export", parents=[common], help="stream the audit as JSON lines, newest first")
    export.add_argument("--format", choices=["jsonl"], default="jsonl")
    export.add_argument(
        "--per",
        choices=["invocation", "run"],
        default="invocation",
        help="one line per invocation (default) or per run with its timeline",
    )
    export.add_argument("--output", type=Path, help="file to write (created owner-only; default stdout)")

    prune = sub.add_parser("prune", parents=[common], help="delete runs finished longer ago than AGE")
    prune.add_argument(
        "--older-than", type=parse_age, required=True, metavar="AGE", help="e.g. 30d, 12h, 90m"
    )
    prune.add_argument("--vacuum", action="store_true", help="then give the space back (rebuilds search)")


def _paging(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--limit", type=_positive, default=50, help="rows per page (default 50)")
    parser.add_argument("--cursor", help="continue after a previous page (printed at its end)")
    parser.add_argument("--json", action="store_true", help='{"rows": [...], "next_cursor": ...}')


def run_audit_command(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Runs one parsed `diagnose audit` command; returns the exit code."""
    from audit import AuditStore, AuditStoreError
    from audit.browse import AuditBrowser

    out = out or sys.stdout
    try:
        path = _resolve_path(args)
        if not path.is_file():
            raise _AuditCommandError(f"no audit database at {path}")
        with AuditStore(path) as store:
            return _dispatch(args, AuditBrowser(store), store, out)
    except _AuditCommandError as exc:
        _error(str(exc))
        return exc.code
    except AuditStoreError as exc:
        _error(str(exc))
        return SETUP_ERROR
    except ValueError as exc:  # a cursor or time that does not parse
        _error(str(exc))
        return USAGE_ERROR
    except BrokenPipeError:  # `diagnose audit export | head`: the reader has seen enough
        try:  # keep the interpreter's final flush from failing on the closed pipe
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return 0


def _error(message: str) -> None:
    print(f"diagnose audit: {_clean(message)}", file=sys.stderr)


def _resolve_path(args: argparse.Namespace) -> Path:
    """Exactly as console.wiring resolves it for a run."""
    if args.audit_db is not None:
        return Path(args.audit_db)
    from agent.settings import ConfigError, load_settings
    from audit import default_audit_path

    try:
        settings = load_settings(args.config)
    except ConfigError as exc:
        raise _AuditCommandError(str(exc)) from None
    return Path(settings.audit.path) if settings.audit.path else default_audit_path()


def _dispatch(args: argparse.Namespace, browser: AuditBrowser, store: AuditStore, out: TextIO) -> int:
    from audit.browse import InvocationFilter
    from audit.export import timeline_for_json

    command = args.audit_command
    if command == "runs":
        page = browser.runs(
            limit=args.limit,
            cursor=args.cursor,
            session_id=args.session,
            outcome=args.outcome,
            text=args.search,
        )
        _print_page(page, args.json, _RUN_HEADER, _run_line, out)
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
        page = browser.invocations(flt, limit=args.limit, cursor=args.cursor)
        _print_page(page, args.json, _INVOCATION_HEADER, _invocation_line, out)
    elif command == "show":
        timeline = browser.timeline(args.run_id)
        if timeline is None:
            raise _AuditCommandError(f"no run {args.run_id!r} in {store.path}", NOT_FOUND)
        if args.json:
            out.write(json.dumps(timeline_for_json(timeline), ensure_ascii=False, indent=2) + "\n")
        else:
            _print_timeline(timeline, out)
    elif command == "export":
        _export(args, browser, out)
    elif command == "prune":
        report = store.prune(args.older_than)
        if args.vacuum:
            store.vacuum()
        out.write(
            f"pruned {report.runs} runs finished before {report.cutoff} ({report.model_rounds} model rounds, "
            f"{report.invocations} invocations, {report.protocol_events} protocol events)\n"
        )
    return 0


def _export(args: argparse.Namespace, browser: AuditBrowser, out: TextIO) -> None:
    from audit.export import export_jsonl

    if args.output is None:
        export_jsonl(browser, out, per=args.per)
        return
    try:  # the export holds the same operator data as the audit: owner-only, like the audit file
        fd = os.open(args.output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        stream = open(fd, "w", encoding="utf-8")
    except OSError as exc:
        raise _AuditCommandError(f"cannot write {args.output}: {exc.strerror}") from None
    with stream:
        lines = export_jsonl(browser, stream, per=args.per)
    print(f"exported {lines} {args.per}{'s' if lines != 1 else ''} to {args.output}", file=sys.stderr)


# --- terminal rendering ------------------------------------------------------------------------------


def _clean(value: Any) -> str:
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", str(value)).replace("\n", " ")


def _preview(value: Any, width: int = _PREVIEW) -> str:
    text = _clean("" if value is None else value)
    return text if len(text) <= width else text[: width - 1] + "…"


def _run_state(run: dict[str, Any]) -> str:
    if run.get("interrupted"):
        return "INTERRUPTED (closed by crash recovery)"
    if run.get("finished_at") is None:
        return "RUNNING"
    return f"{run['outcome']} / {run['stop_reason']}"


def _run_line(run: dict[str, Any]) -> str:
    tokens = "-" if run.get("total_tokens") is None else run["total_tokens"]
    calls = "-" if run.get("model_calls") is None else run["model_calls"]
    when = run.get("started_at") or run.get("finished_at") or ""
    return (
        f"{when:<27}  {_clean(run['run_id']):<18} {_preview(_run_state(run), 44):<44} "
        f"{calls:>5} {tokens:>7}  {_preview(run.get('query'), 60)}"
    )


def _invocation_line(row: dict[str, Any]) -> str:
    duration = "-" if row.get("duration_ms") is None else f"{row['duration_ms']}ms"
    return (
        f"{row['started_at']:<27}  {_clean(row['run_id']):<18} {_preview(row['tool_call_id'], 10):<10} "
        f"{row['tool']:<16} {row['status']:<11} {_preview(row.get('error_code') or '-', 16):<16} "
        f"{row.get('evaluation') or '-':<8} {duration:>8}  {_preview(row.get('input_json'), 60)}"
    )


_RUN_HEADER = f"{'STARTED':<27}  {'RUN':<18} {'OUTCOME / STOP REASON':<44} {'CALLS':>5} {'TOKENS':>7}  QUERY"
_INVOCATION_HEADER = (
    f"{'STARTED':<27}  {'RUN':<18} {'CALL':<10} {'TOOL':<16} {'STATUS':<11} {'ERROR':<16} {'EVAL':<8} "
    f"{'TIME':>8}  INPUT"
)


def _print_page(
    page: Page, as_json: bool, header: str, line: Callable[[dict[str, Any]], str], out: TextIO
) -> None:
    if as_json:
        from audit.export import row_for_json

        rows = [row_for_json(row) for row in page.rows]
        out.write(
            json.dumps({"rows": rows, "next_cursor": page.next_cursor}, ensure_ascii=False, indent=2) + "\n"
        )
        return
    if not page.rows:
        out.write("(none)\n")
        return
    out.write(header + "\n")
    for row in page.rows:
        out.write(line(row) + "\n")
    if page.next_cursor:
        out.write(f"-- more: --cursor {page.next_cursor}\n")


def _print_timeline(timeline: RunTimeline, out: TextIO) -> None:
    run = timeline.run
    usage = ""
    if run.get("model_calls") is not None:
        usage = (
            f"{run['model_calls']} model calls, {run.get('total_tokens')} tokens "
            f"({run.get('prompt_tokens')} prompt + {run.get('completion_tokens')} completion)"
        )
    header = [
        ("run", f"{_clean(run['run_id'])}   session {_clean(run['session_id'])}"),
        ("query", _clean(run.get("query") or "")),
        ("result", _run_state(run)),
        ("started", run.get("started_at") or "-"),
        ("finished", run.get("finished_at") or "-"),
        ("usage", usage or "-"),
    ]
    for label, value in header:
        out.write(f"{label:<9} {value}\n")
    out.write("\n")
    if not timeline.entries:
        out.write("(no model rounds, invocations or protocol events)\n")
    for entry in timeline.entries:
        data = entry.data
        at = entry.at[11:23] if len(entry.at) >= 23 else entry.at
        if entry.kind == "model_round":
            ids = ", ".join(json.loads(data["tool_call_ids"] or "[]")) if data.get("tool_call_ids") else ""
            parts = [
                f"{'~' if data.get('usage_estimated') else ''}"
                f"{data.get('prompt_tokens') or 0}+{data.get('completion_tokens') or 0} tokens",
                f"{data['duration_ms']} ms" if data.get("duration_ms") is not None else "",
                f"calls {_clean(ids)}" if ids else "",
                "text" if data.get("has_text") else "",
            ]
            out.write(f"{at}  round {data['round']:<6} {'  '.join(p for p in parts if p)}\n")
        elif entry.kind == "invocation":
            error = f" {data['error_code']}" if data.get("error_code") else ""
            reason = f" ({_clean(data['reason'])})" if data.get("reason") else ""
            duration = f"  {data['duration_ms']} ms" if data.get("duration_ms") is not None else ""
            evaluation = f"  evaluation {data['evaluation']}" if data.get("evaluation") else ""
            call = _preview(data["tool_call_id"], 12)
            out.write(
                f"{at}  {call:<12} {data['tool']} {data['status']}{error}{reason}{duration}{evaluation}\n"
            )
            out.write(f"{'':14}input      {_preview(data.get('input_json'), 200)}\n")
            if data.get("projection_json"):
                out.write(f"{'':14}projection {_preview(data['projection_json'], 200)}\n")
        else:
            call = f" {_clean(data['tool_call_id'])}" if data.get("tool_call_id") else ""
            detail = data.get("detail_json")
            detail_text = f"  {_preview(detail, 160)}" if detail and detail != "{}" else ""
            out.write(f"{at}  protocol     {data['code']}{call}{detail_text}\n")
