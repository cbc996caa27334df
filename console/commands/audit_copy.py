"""`diagnose audit copy --from URL --to URL`: move a machine's audit file into the team database (or
any audit into any other) with a progress bar; idempotent and resumable (audit.copy).

A URL is `sqlite:///F`, `mysql://user@host:port/db`, or a plain file path. A server's password comes
from `--from-password-env` / `--to-password-env`, else `[audit] password_env` of the configuration.
The evidence account is refused on either side, as for a run. The source is never created.
Exit codes: 0 copied, 3 an audit or the configuration cannot be used.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, TextIO

from agent.errors import DiagnoseError
from console.errors import AUDIT_COMMAND, error, reported
from console.presentation import counted
from console.safe_text import neutralize


def _location(url: str, option: str, password_env: str | None, settings: Any) -> Any:
    from audit.location import EvidenceAccount, check_separate_from_evidence, parse_audit_argument

    hint = f"{option}-password-env or [audit] password_env"
    location = parse_audit_argument(
        url, password_env=password_env or settings.audit.password_env, what=option, password_hint=hint
    )
    mysql = settings.mysql
    check_separate_from_evidence(
        location, EvidenceAccount(mysql.dsn, mysql.password_env, tuple(mysql.allowed_schemas))
    )
    return location


class _Progress:
    """A bar on a terminal; elsewhere a plain line at every tenth of the runs and at the end."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._bar: Any = None
        self._task: Any = None
        self._next_line = 0

    def __enter__(self) -> _Progress:
        if self._stream.isatty():
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self._bar = Progress(
                TextColumn("copy"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=Console(file=self._stream),
            )
            self._bar.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.__exit__(None, None, None)

    def __call__(self, report: Any, total: int) -> None:
        if self._bar is not None:
            if self._task is None:
                self._task = self._bar.add_task("copy", total=total)
            self._bar.update(self._task, completed=report.seen)
            return
        if report.seen >= self._next_line or report.seen == total:
            print(f"[{report.seen}/{total}] runs", file=self._stream, flush=True)
            self._next_line = report.seen + max(1, total // 10)


def run_copy_command(args: argparse.Namespace, out: TextIO) -> int:
    from agent.secrets import configured_secrets, redact_logs
    from agent.settings import load_settings
    from audit.copy import copy_audit
    from audit.factory import open_audit_store
    from audit.location import AuditLocationError, SqliteLocation
    from tools.redaction import Redactor

    try:
        settings = load_settings(args.config)
        named = (args.from_password_env, args.to_password_env)
        extra = [os.environ[name] for name in named if name and os.environ.get(name)]
        redact_logs(Redactor(configured_secrets(settings) + extra))
        source = _location(args.source, "--from", args.from_password_env, settings)
        target = _location(args.target, "--to", args.to_password_env, settings)
        if source == target:
            raise AuditLocationError("--from and --to name the same audit")
        if isinstance(source, SqliteLocation) and not source.path.is_file():
            raise AuditLocationError(f"no audit database at {source.path}")
        with (
            open_audit_store(source) as reader,
            open_audit_store(target) as writer,
            _Progress(sys.stderr) as bar,
        ):
            for line in (*reader.open_warnings, *writer.open_warnings):
                error(f"warning: {line}", command=AUDIT_COMMAND)
            report = copy_audit(reader, writer, bar)
    except DiagnoseError as exc:
        return reported(exc, command=AUDIT_COMMAND)
    source_text, target_text = (neutralize(where.describe(), newlines=False) for where in (source, target))
    out.write(
        f"copied {counted(report.copied, 'run')} "
        f"({report.present} already there, {report.unfinished} still running)"
        f" from {source_text} to {target_text}\n"
    )
    return 0
