"""`diagnose eval`: run incident cases N times against the configured model and score the runs.

    diagnose eval [--cases DIR] [--case NAME ...] [--repeat N] [--config F] [--out DIR] [--force]
                  [--audit-db F|URL] [--wide]

Progress goes to stderr (a progress bar on a terminal, one plain line per run otherwise); the score
table goes to stdout, folded into bands that fit the terminal (80 columns, or `COLUMNS`, off a terminal;
`--wide`: one line per case); `report.json` and `report.md` go to `--out` (default `eval-<UTC time>`),
with the runs' audit file (`audit.db`) unless `--audit-db` says otherwise. A report already in `--out`
is replaced only with `--force`, checked before the first run; only the last folder of `--out` is
created. Exit 0 when every run finished (whatever the scores), 12 when interrupted by Ctrl-C (the report
keeps the finished runs), 3 when the eval cannot start (bad case file, bad configuration, a report
already in `--out`).
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import signal
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from console.errors import SetupError
from console.presentation import counted
from console.safe_text import neutralize

if TYPE_CHECKING:
    from console.interrupts import Interrupts

MAX_REPEAT = 100
INTERRUPTED = 12


def add_eval_parser(subparsers: Any) -> None:
    ev = subparsers.add_parser("eval", help="score the configured model on a set of incident cases")
    ev.set_defaults(handler=_eval_command)
    ev.add_argument("--cases", type=Path, help="folder of case files (default: the bundled demo incidents)")
    ev.add_argument(
        "--case", action="append", dest="only", metavar="NAME", help="run only this case (repeatable)"
    )
    ev.add_argument("--repeat", type=_repeat, default=1, help=f"runs per case (1..{MAX_REPEAT}, default 1)")
    ev.add_argument("--config", type=Path, help="TOML configuration file (the model under evaluation)")
    ev.add_argument("--out", type=Path, help="report folder (default: eval-<UTC time> in the current folder)")
    ev.add_argument(
        "--force", action="store_true", help="replace the report files a previous eval left in --out"
    )
    ev.add_argument("--audit-db", metavar="F|URL", help="audit of the eval runs (default: <out>/audit.db)")
    ev.add_argument(
        "--wide",
        action="store_true",
        help="print the score table on one line per case, however wide (default: it folds into bands "
        "that fit the terminal, or 80 columns off a terminal)",
    )


def _repeat(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if not 1 <= value <= MAX_REPEAT:
        raise argparse.ArgumentTypeError(f"must be between 1 and {MAX_REPEAT}")
    return value


def _eval_command(args: argparse.Namespace, interrupts: Interrupts) -> int:
    return run_eval_command(args)


def run_eval_command(args: argparse.Namespace) -> int:
    from console.evaluation.cases import load_cases

    cases = load_cases(args.cases, args.only)
    if args.audit_db is not None:
        _check_audit(args.config, args.audit_db)
    out_dir: Path = args.out or Path(f"eval-{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}")
    _check_report_folder(out_dir, force=args.force)
    return asyncio.run(_eval(args, cases, out_dir))


def _check_audit(config: Path | None, audit_db: str) -> None:
    """`--audit-db` read as every run reads it, before a report folder is made for an eval that
    cannot run (a URL carrying a password, the evidence account)."""
    from agent.errors import DiagnoseError
    from agent.settings import load_settings
    from console.audit_target import audit_location

    try:
        audit_location(load_settings(config), audit_db)
    except DiagnoseError as exc:  # a configuration or a location that cannot be used
        raise SetupError(f"audit unavailable: {exc}") from None


def _check_report_folder(out_dir: Path, *, force: bool) -> None:
    """Before any run (an eval can take hours): the folder exists or is the one missing level, and a
    previous report in it is replaced only with `--force`."""
    from audit.files import make_last_folder
    from audit.output_files import OutputExistsError, check_replaceable
    from console.evaluation.report import report_paths

    try:
        make_last_folder(out_dir)
        for path in report_paths(out_dir):
            check_replaceable(path, force=force)
    except OutputExistsError as exc:
        raise SetupError(f"{exc.path} already exists (a previous eval); --force replaces it") from None
    except OSError as exc:
        raise SetupError(f"cannot write the report in {out_dir}: {exc.strerror or exc}") from None


async def _eval(args: argparse.Namespace, cases: list[Any], out_dir: Path) -> int:
    from console.evaluation.report import render_table, write_reports
    from console.evaluation.runner import EvalRunner

    runner = EvalRunner(args.config, args.audit_db or out_dir / "audit.db", args.repeat)
    progress = _progress_for(sys.stderr)
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGINT, runner.stop)
    try:
        with progress:
            report = await runner.run(cases, progress.update)
    finally:
        loop.remove_signal_handler(signal.SIGINT)
    json_path, md_path = write_reports(report, out_dir, force=args.force)
    # Case names are checked, the model's label comes from a configuration: shown neutralised.
    print(neutralize(render_table(report, None if args.wide else shutil.get_terminal_size().columns)))
    print(f"\nreports: {json_path}  {md_path}")
    return INTERRUPTED if report.interrupted else 0


class _PlainProgress:
    """One line per finished run: what a log file or CI job can read."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def __enter__(self) -> _PlainProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def update(self, index: int, total: int, case: Any, repetition: int, score: Any) -> None:
        if score is None:
            return
        met = "expectation met" if score.expectation_met else "expectation missed"
        print(
            f"[{index}/{total}] {case.name} #{repetition + 1}: {score.outcome}/{score.stop_reason}, "
            f"{met}, {counted(score.rounds, 'round')}, {score.wall_s:.1f} s",
            file=self.stream,
            flush=True,
        )


class _BarProgress:
    """A progress bar for a terminal, naming the run in progress."""

    def __init__(self, stream: TextIO) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=Console(file=stream),
            transient=False,
        )
        self._task: Any = None

    def __enter__(self) -> _BarProgress:
        self._progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._progress.__exit__(None, None, None)

    def update(self, index: int, total: int, case: Any, repetition: int, score: Any) -> None:
        if self._task is None:
            self._task = self._progress.add_task("eval", total=total)
        label = f"{case.name} #{repetition + 1}"
        if score is None:
            self._progress.update(self._task, description=label)
        else:
            self._progress.update(self._task, completed=index, description=f"{label}: {score.outcome}")


def _progress_for(stream: TextIO) -> _PlainProgress | _BarProgress:
    return _BarProgress(stream) if stream.isatty() else _PlainProgress(stream)
