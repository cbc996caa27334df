"""One severity scale for every log source, and every common spelling mapped onto it.

`query_logs`'s `level` means "this severity or worse" (as `journalctl -p`), so a filter for ERROR
must also find FATAL, SEVERE, CRITICAL, Android `E`, syslog priority 3 and Bunyan's 50: a spelling
left unmapped would make those records invisible, and an empty answer reads as "no errors".

Mappings follow the logging libraries' own bridges: syslog priorities as `journalctl -p` names them
(0-2 emerg/alert/crit are FATAL, 5 notice is INFO), java.util.logging as SLF4J's bridge maps it
(SEVERE is ERROR, CONFIG is INFO, FINE is DEBUG, FINER/FINEST are TRACE), Bunyan/Pino's
10/20/30/40/50/60 scale, Android's V/D/I/W/E/F/A letters, zap/logrus/zerolog's `dpanic`/`panic`.
"""

from __future__ import annotations

from enum import IntEnum


class Severity(IntEnum):
    """Ordered so that `record >= filter` means "this severity or worse"."""

    TRACE = 0
    DEBUG = 1
    INFO = 2
    WARN = 3
    ERROR = 4
    FATAL = 5


_WORDS: dict[str, Severity] = {
    **dict.fromkeys(
        ("FATAL", "CRITICAL", "CRIT", "EMERG", "EMERGENCY", "ALERT", "PANIC", "DPANIC"), Severity.FATAL
    ),
    **dict.fromkeys(("ERROR", "ERR", "SEVERE"), Severity.ERROR),
    **dict.fromkeys(("WARN", "WARNING"), Severity.WARN),
    **dict.fromkeys(("INFO", "INFORMATION", "INFORMATIONAL", "NOTICE", "CONFIG"), Severity.INFO),
    **dict.fromkeys(("DEBUG", "DBG", "FINE"), Severity.DEBUG),
    **dict.fromkeys(("TRACE", "FINER", "FINEST", "VERBOSE"), Severity.TRACE),
}
# One letter is a severity only where a format or a level field says so (logcat, glog, a JSON `level`),
# never when found in free text: `I` or `A` there is just a word.
_LETTERS: dict[str, Severity] = {
    "F": Severity.FATAL,
    "A": Severity.FATAL,  # Android's "assert"
    "C": Severity.FATAL,
    "E": Severity.ERROR,
    "W": Severity.WARN,
    "I": Severity.INFO,
    "N": Severity.INFO,
    "D": Severity.DEBUG,
    "V": Severity.TRACE,
    "T": Severity.TRACE,
}
# syslog priority (RFC 5424 §6.2.1), as journald's PRIORITY field also carries it.
_SYSLOG_PRIORITY = (
    Severity.FATAL,
    Severity.FATAL,
    Severity.FATAL,
    Severity.ERROR,
    Severity.WARN,
    Severity.INFO,
    Severity.INFO,
    Severity.DEBUG,
)
# Bunyan and Pino: 10 trace, 20 debug, 30 info, 40 warn, 50 error, 60 fatal.
_BUNYAN = (Severity.TRACE, Severity.DEBUG, Severity.INFO, Severity.WARN, Severity.ERROR, Severity.FATAL)
MAX_SPELLING_CHARS = 16


def severity_of_word(word: str) -> Severity | None:
    """A severity written as a word (`error`, `Warning`, `SEVERE`, `crit`), any case; None otherwise."""
    if len(word) > MAX_SPELLING_CHARS:
        return None
    return _WORDS.get(word.upper())


def severity_of_field(value: object) -> Severity | None:
    """A severity from a field that is known to hold one: a word, a letter, or a number.

    Numbers 0-7 are syslog priorities (journald's PRIORITY is a string of one digit), 10 and above
    the Bunyan/Pino scale, rounded down to its step so custom levels (35) land between two names.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return severity_of_number(int(value)) if value == value and abs(value) < 2**31 else None
    if not isinstance(value, str):
        return None
    text = value.strip()
    if text.isascii() and text.isdigit() and len(text) <= 3:
        return severity_of_number(int(text))
    if len(text) == 1:
        return _LETTERS.get(text.upper())
    return severity_of_word(text)


def severity_of_letter(letter: str) -> Severity | None:
    """Android logcat / glog one-letter severities."""
    return _LETTERS.get(letter.upper()) if len(letter) == 1 else None


def severity_of_number(number: int) -> Severity | None:
    if 0 <= number < len(_SYSLOG_PRIORITY):
        return _SYSLOG_PRIORITY[number]
    if number >= 10:
        return _BUNYAN[min(number // 10, len(_BUNYAN)) - 1]
    return None


def syslog_priority_severity(pri: int) -> Severity:
    """The severity part of a syslog `<PRI>` (facility * 8 + severity)."""
    return _SYSLOG_PRIORITY[pri % 8]


def spellings_at_or_above(level: Severity) -> tuple[str, ...]:
    """Every word spelling of `level` or worse, lower case: what a backend's level filter must accept."""
    return tuple(sorted(word.lower() for word, severity in _WORDS.items() if severity >= level))
