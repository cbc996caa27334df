"""A log record as `diagnose` writes it: redacted, on one line, with no control character.

The log holds text from outside the process: a model's malformed tool-call arguments (Haystack logs
them verbatim), backend error messages, exception tracebacks. Written as it is, an ESC sequence drives
the terminal of whoever `tail`s the file, and a newline forges a record (a `... CRITICAL ...` line of
its own). So the log handler's filters redact every record first (the built-in rules, then the
configured secret values: `tools.redaction`), and `OneLineFormatter` writes the formatted record —
message, traceback and stack alike — as one line: a newline becomes the two characters `\\n` and every
other control or invisible character its visible escape (`console.safe_text.neutralize`).

Records reach that handler from every library: the root logger holds it, records of a logger that
does not propagate reach it as `logging.lastResort` (Python's own fallback would print them raw to
stderr), warnings are captured into it, and Haystack is told not to attach its own stderr handler
(it does when structlog happens to be installed; `HAYSTACK_LOGGING_IGNORE_STRUCTLOG`).
"""

from __future__ import annotations

import logging
import os

from console.safe_text import neutralize

HAYSTACK_STRUCTLOG_SWITCH = "HAYSTACK_LOGGING_IGNORE_STRUCTLOG"
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def one_line(text: str) -> str:
    """`text` as one printable line: newlines folded to `\\n`, other controls escaped."""
    return neutralize(text.replace("\r\n", "\n").replace("\n", "\\n"), newlines=False)


class OneLineFormatter(logging.Formatter):
    """Formats a record as usual, then folds it onto one line (see the module docstring)."""

    def format(self, record: logging.LogRecord) -> str:
        return one_line(super().format(record))


def keep_library_logs_in_our_handler() -> None:
    """Haystack, imported with structlog present, attaches a stderr handler of its own to its loggers:
    told not to, before it is imported, its records go to our handler like every other library's."""
    os.environ[HAYSTACK_STRUCTLOG_SWITCH] = "true"


def route_every_record_to(handler: logging.Handler) -> None:
    """`handler` (already carrying the redaction filters and `OneLineFormatter`) becomes the one place
    records are written: the root logger's only handler, the fallback for loggers that do not
    propagate, and the sink of warnings."""
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)
    logging.lastResort = handler
    logging.captureWarnings(True)
