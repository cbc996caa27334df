"""Errors the command line reports without a traceback, and the one way their line reaches stderr.

Every message an operator reads on stderr goes through `error`: redacted with the built-in rules and
neutralised to one line here, and nowhere else. Kept free of engine imports: the console's first frame
loads it.
"""

from __future__ import annotations

import contextlib
import sys

from agent.errors import DiagnoseError
from console.safe_text import neutralize

# How an audit command names itself on stderr: `diagnose audit: <message>`.
AUDIT_COMMAND = "diagnose audit"


class SetupError(DiagnoseError):
    """The run cannot start; the message tells the operator what to fix."""


def error(message: str, *, command: str = "diagnose") -> None:
    """`diagnose: <message>` on stderr: redacted, one line, nothing that can drive the terminal."""
    from tools.redaction import NOOP

    if sys.stderr is None:
        return  # stderr was closed at start: the exit code is all that is left
    with contextlib.suppress(OSError):  # stderr is gone too: the exit code is all that is left
        print(f"{command}: {neutralize(NOOP.text(message), newlines=False)}", file=sys.stderr)


def warning(message: str) -> None:
    """`diagnose: warning: <message>` on stderr, as `error` prints: something the operator should know
    that does not stop the command."""
    error(f"warning: {message}")


def reported(exc: DiagnoseError, *, command: str = "diagnose") -> int:
    """Print the error's line and give its exit code: how a command ends on a `DiagnoseError`."""
    error(exc.message, command=command)
    return exc.exit_code
