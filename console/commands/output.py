"""What a command prints on standard output and standard error, and how a reader that left ends it."""

from __future__ import annotations

import sys

from console.standard_streams import silence_stdout


class StdoutClosed(Exception):
    """The reader of stdout went away (`| head -c1`): stop quietly, keeping the run's exit code."""

    def __init__(self, exit_code: int) -> None:
        super().__init__(exit_code)
        self.exit_code = exit_code


def print_out(text: str, exit_code: int) -> None:
    try:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        silence_stdout()
        raise StdoutClosed(exit_code) from None


def print_err(text: str) -> None:
    if sys.stderr is None:
        return
    try:
        sys.stderr.write(text + "\n")
        sys.stderr.flush()
    except OSError:
        pass  # stderr is gone: the exit code is all that is left
