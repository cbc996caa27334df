"""Text logs that start each record with a stamp: log4j, logback, java.util.logging, Python logging,
Go's log, Spark, Hadoop, ZooKeeper, Tomcat, Windows CBS; Android logcat; Google glog.

`TextLines` recognises a stamp at the start of the line (optionally in brackets) in the spellings
these writers use, then looks for a severity word in the next `LEVEL_WINDOW` characters: upper case
or capitalised (`ERROR`, `Warning`, `SEVERE`), or lower case in brackets (`[error]`), the first
one found. A line without a leading stamp continues the record above (stack frames, `Caused by:`).
Logcat and glog write a one-letter severity at a fixed place, which only their own pattern reads.
"""

from __future__ import annotations

import re

from tools.logs.line_format import FormatTraits, Head
from tools.logs.severity import Severity, severity_of_letter, severity_of_word
from tools.logs.timestamps import MONTHS, Clock, fraction_ns

LEVEL_WINDOW = 80
_LEVEL_WORD = re.compile(
    r"(?<![\w-])(FATAL|CRITICAL|CRIT|EMERG|EMERGENCY|ALERT|PANIC|SEVERE|ERROR|ERR|WARNING|WARN|INFO|"
    r"NOTICE|CONFIG|DEBUG|FINEST|FINER|FINE|TRACE|VERBOSE|Fatal|Critical|Error|Warning|Warn|Info|"
    r"Information|Notice|Debug|Trace|Verbose)(?![\w-])"
    r"|\[(fatal|crit|critical|alert|emerg|error|err|warn|warning|notice|info|debug|trace)\]",
    re.ASCII,
)
# yy/MM/dd HH:mm:ss (Spark, Hadoop's older writers)
_SHORT_SLASHED = re.compile(r"(\d\d)/(\d\d)/(\d\d) (\d\d):(\d\d):(\d\d)(?:[.,](\d{1,9}))?(?![\d/])", re.ASCII)
# yyyy/MM/dd HH:mm:ss[.SSS] (Go's log package)
_SLASHED = re.compile(r"(\d{4})/(\d\d)/(\d\d) (\d\d):(\d\d):(\d\d)(?:[.,](\d{1,9}))?(?![\d/])", re.ASCII)
# yyMMdd HHmmss (HDFS)
_COMPACT = re.compile(r"(\d\d)(\d\d)(\d\d) (\d\d)(\d\d)(\d\d)(?= )", re.ASCII)
# dd-MMM-yyyy HH:mm:ss.SSS (Tomcat)
_DAY_MONTH = re.compile(
    r"(\d\d)-([A-Z][a-z]{2})-(\d{4}) (\d\d):(\d\d):(\d\d)(?:[.,](\d{1,9}))?(?![\d])", re.ASCII
)
_LOGCAT = re.compile(
    r"(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)\.(\d{3,6}) +(\d{1,10}) +(\d{1,10}) ([VDIWEFA]) "
    r"([^:]{0,128}?) ?: (.*)",
    re.ASCII | re.DOTALL,
)
_GLOG = re.compile(
    r"([IWEF])(\d\d)(\d\d) (\d\d):(\d\d):(\d\d)\.(\d{6}) +(\d{1,10}) ([^\]\s]{1,256})\] (.*)",
    re.ASCII | re.DOTALL,
)


def level_word(text: str, start: int = 0) -> Severity | None:
    """The first severity word within `LEVEL_WINDOW` characters of `start`, or None."""
    match = _LEVEL_WORD.search(text, start, start + LEVEL_WINDOW)
    if match is None:
        return None
    return severity_of_word(match.group(1) or match.group(2))


class TextLines(FormatTraits):
    name = "text"
    multiline = True

    def head(self, line: str, clock: Clock) -> Head | None:
        stamp = _leading_stamp(line, clock)
        if stamp is None:
            return None
        instant, end = stamp
        return Head(instant_ns=instant, severity=level_word(line, end), message=line.rstrip("\r\n"))


def _leading_stamp(line: str, clock: Clock) -> tuple[int, int] | None:
    """(instant, end) of a stamp at the start of the line, or just after an opening bracket."""
    if not line[:1].isdigit():
        if line[:1] != "[" or not line[1:2].isdigit():
            return None
        start = 1
    else:
        start = 0
    parsed = clock.iso(line, start)
    if parsed is not None:
        return parsed
    if (match := _SLASHED.match(line, start)) is not None:
        year, month, day, hour, minute, second, fraction = match.groups()
        instant = clock.instant(
            int(year), int(month), int(day), int(hour), int(minute), int(second), fraction_ns(fraction)
        )
    elif (match := _SHORT_SLASHED.match(line, start)) is not None:
        year, month, day, hour, minute, second, fraction = match.groups()
        instant = clock.instant(
            2000 + int(year), int(month), int(day), int(hour), int(minute), int(second), fraction_ns(fraction)
        )
    elif (match := _DAY_MONTH.match(line, start)) is not None:
        day, month, year, hour, minute, second, fraction = match.groups()
        number = MONTHS.get(month.lower())
        instant = (
            None
            if number is None
            else clock.instant(
                int(year), number, int(day), int(hour), int(minute), int(second), fraction_ns(fraction)
            )
        )
    elif (match := _COMPACT.match(line, start)) is not None:
        year, month, day, hour, minute, second = match.groups()
        instant = clock.instant(2000 + int(year), int(month), int(day), int(hour), int(minute), int(second))
    else:
        return None
    return None if instant is None else (instant, match.end())


class Logcat(FormatTraits):
    """`adb logcat -v threadtime`: `MM-dd HH:mm:ss.SSS  PID  TID L Tag: message`."""

    name = "logcat"

    def head(self, line: str, clock: Clock) -> Head | None:
        match = _LOGCAT.match(line)
        if match is None:
            return None
        month, day, hour, minute, second, fraction, pid, tid, letter, tag, message = match.groups()
        stamp = (month, day, hour, minute, second, fraction)
        return _lettered(clock, stamp, letter, message, (("tag", tag.strip()), ("pid", pid), ("tid", tid)))


class Glog(FormatTraits):
    """Google glog / klog: `Lmmdd hh:mm:ss.uuuuuu threadid file:line] msg`."""

    name = "glog"
    multiline = True

    def head(self, line: str, clock: Clock) -> Head | None:
        match = _GLOG.match(line)
        if match is None:
            return None
        letter, month, day, hour, minute, second, fraction, thread, source, message = match.groups()
        stamp = (month, day, hour, minute, second, fraction)
        return _lettered(clock, stamp, letter, message, (("source", source), ("thread", thread)))


def _lettered(
    clock: Clock, stamp: tuple[str, ...], letter: str, message: str, labels: tuple[tuple[str, str], ...]
) -> Head | None:
    """A record of a year-less stamp (month, day, hour, minute, second, fraction) and a letter."""
    month, day, hour, minute, second, fraction = stamp
    instant = clock.yearless(int(month), int(day), int(hour), int(minute), int(second), fraction_ns(fraction))
    if instant is None:
        return None
    return Head(
        instant_ns=instant, severity=severity_of_letter(letter), message=message.rstrip("\r\n"), labels=labels
    )
