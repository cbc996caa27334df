"""The one root of every error a user can see: `DiagnoseError`, carrying its exit code and its message.

Configuration, scenario, input-file, audit and eval-case errors all derive from it, so the command
line catches it once (`console.commands.main`) instead of listing each class where a command can fail. The
message is the raw text of what went wrong; it is redacted and neutralised in one place only, where
it is printed (`console.errors.error`). Light on purpose: the console's first frame may load it.
"""

from __future__ import annotations

from agent.vocabulary import SETUP_ERROR


class DiagnoseError(Exception):
    """An error the operator can act on: `message` says what to fix, `exit_code` is how the process ends
    (by default SETUP_ERROR: the run or command could not be set up)."""

    exit_code: int = SETUP_ERROR

    def __init__(self, message: str, *, exit_code: int | None = None) -> None:
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code

    @property
    def message(self) -> str:
        """The one line printed after `diagnose: `; a subclass may say more than `str(exc)` here."""
        return str(self)
