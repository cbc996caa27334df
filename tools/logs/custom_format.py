"""A format none of the built-in ones covers, written as one named regex in the configuration:

    [logs.formats.openstack]
    pattern = '^\\S+ (?P<time>\\S+ \\S+) (?P<pid>\\d+) (?P<level>[A-Z]+) (?P<message>.*)'
    time_format = "%Y-%m-%d %H:%M:%S.%f"  # optional (strptime); else ISO stamps and epochs are read

Groups: `time` (required), `level`, `service`, `message`; any other named group becomes a label.
Lines the pattern does not match continue the record above (`multiline = true`, the default) or are
skipped. The pattern is tried on the first `HEAD_CHARS` characters of a line only, so a hostile line
cannot make a careless pattern backtrack over megabytes; the message runs on to the line's end.
"""

from __future__ import annotations

import re
from datetime import datetime

from tools.logs.line_format import FormatTraits, Head
from tools.logs.projection import MAX_LABELS
from tools.logs.severity import severity_of_field
from tools.logs.timestamps import Clock, epoch_ns, fraction_ns

HEAD_CHARS = 8192
_ROLES = frozenset({"time", "level", "service", "message"})


def compile_pattern(name: str, pattern: str) -> re.Pattern[str]:
    """The compiled pattern, or ValueError saying what the configuration must fix."""
    try:
        compiled = re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"[logs.formats.{name}] pattern is not a valid regular expression: {exc}") from None
    if "time" not in compiled.groupindex:
        raise ValueError(f"[logs.formats.{name}] pattern needs a named group (?P<time>...)")
    return compiled


class RegexFormat(FormatTraits):
    indented_heads = True  # the configured pattern decides

    def __init__(
        self, name: str, pattern: str, time_format: str | None = None, *, multiline: bool = True
    ) -> None:
        self.name = name
        self.multiline = multiline
        self._pattern = compile_pattern(name, pattern)
        self._time_format = time_format
        self._labels = tuple(group for group in self._pattern.groupindex if group not in _ROLES)

    def head(self, line: str, clock: Clock) -> Head | None:
        line = line.rstrip("\r\n")
        match = self._pattern.match(line, 0, min(len(line), HEAD_CHARS))
        if match is None:
            return None
        instant = self._instant(match.group("time"), clock)
        if instant is None:
            return None
        groups = self._pattern.groupindex
        if "message" in groups and match.start("message") >= 0:
            message = line[match.start("message") :]
            if match.end("message") < min(len(line), HEAD_CHARS):
                message = match.group("message")
        else:
            message = line
        level = match.group("level") if "level" in groups else None
        service = match.group("service") if "service" in groups else None
        labels = tuple(
            (group, value) for group in self._labels[:MAX_LABELS] if (value := match.group(group)) is not None
        )
        return Head(
            instant_ns=instant,
            severity=None if level is None else severity_of_field(level),
            message=message,
            service=service or None,
            labels=labels,
        )

    def _instant(self, text: str | None, clock: Clock) -> int | None:
        if not text:
            return None
        if self._time_format is None:
            parsed = clock.iso(text)
            return parsed[0] if parsed is not None else epoch_ns(text)
        try:
            moment = datetime.strptime(text, self._time_format)
        except ValueError:
            return None
        nanos = fraction_ns(f"{moment.microsecond:06d}")
        utc_offset = moment.utcoffset()
        offset = None if utc_offset is None else int(utc_offset.total_seconds())
        fields = (moment.month, moment.day, moment.hour, moment.minute, moment.second, nanos)
        if "%Y" not in self._time_format and "%y" not in self._time_format:
            return clock.yearless(*fields)
        return clock.instant(moment.year, *fields, offset)
