"""nginx and Apache httpd logs: the access log (common and combined) and each server's error log.

An access line carries no severity; the HTTP status is one, so it is inferred and marked as such
(5xx is ERROR, 4xx WARN, else INFO), as lnav and most log viewers do: a level filter for ERROR then
finds the failed requests. Error logs write their level in brackets (`[error]`, `[core:crit]`).
"""

from __future__ import annotations

import re

from tools.logs.line_format import FormatTraits, Head
from tools.logs.severity import Severity, severity_of_word
from tools.logs.timestamps import MONTHS, Clock, fraction_ns, offset_seconds

_QUOTED = r'"((?:[^"\\]|\\.){0,65536})"'
_ACCESS = re.compile(
    r"(\S+) (\S+) (\S+) \[(\d{2})/([A-Za-z]{3})/(\d{4}):(\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))? ([+-]\d{4})\] "
    + _QUOTED
    + r" (\d{3}|-) (\d+|-)",
    re.ASCII | re.DOTALL,
)
_APACHE_ERROR = re.compile(
    r"\[[A-Z][a-z]{2} ([A-Z][a-z]{2}) {1,2}(\d{1,2}) (\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))? (\d{4})\] "
    r"\[(?:([^:\]\s]{1,64}):)?([a-z]{1,8}\d?)\] (.*)",
    re.ASCII | re.DOTALL,
)
_NGINX_ERROR = re.compile(
    r"(\d{4})/(\d\d)/(\d\d) (\d\d):(\d\d):(\d\d) \[([a-z]{1,8})\] (\d{1,10})#(\d{1,10}): (.*)",
    re.ASCII | re.DOTALL,
)


class AccessLog(FormatTraits):
    name = "access-log"

    def head(self, line: str, clock: Clock) -> Head | None:
        match = _ACCESS.match(line)
        if match is None:
            return None
        day, month, year, hour, minute, second, fraction, zone = match.group(4, 5, 6, 7, 8, 9, 10, 11)
        number = MONTHS.get(month.lower())
        if number is None:
            return None
        instant = clock.instant(
            int(year),
            number,
            int(day),
            int(hour),
            int(minute),
            int(second),
            fraction_ns(fraction),
            offset_seconds(zone),
        )
        if instant is None:
            return None
        status = match.group(13)
        return Head(
            instant_ns=instant,
            severity=_status_severity(status),
            message=line.rstrip("\r\n"),
            labels=(("status", status),),
            severity_inferred=status != "-",
        )


class ApacheErrorLog(FormatTraits):
    name = "apache-error"
    multiline = True  # mod_php and CGI scripts continue a record on following lines

    def head(self, line: str, clock: Clock) -> Head | None:
        match = _APACHE_ERROR.match(line)
        if match is None:
            return None
        month, day, hour, minute, second, fraction, year, module, level, message = match.groups()
        number = MONTHS.get(month.lower())
        if number is None:
            return None
        instant = clock.instant(
            int(year), number, int(day), int(hour), int(minute), int(second), fraction_ns(fraction)
        )
        if instant is None:
            return None
        severity = Severity.TRACE if level.startswith("trace") else severity_of_word(level)
        return Head(
            instant_ns=instant,
            severity=severity,
            message=message.rstrip("\r\n"),
            labels=(("module", module),) if module else (),
        )


class NginxErrorLog(FormatTraits):
    name = "nginx-error"
    multiline = True

    def head(self, line: str, clock: Clock) -> Head | None:
        match = _NGINX_ERROR.match(line)
        if match is None:
            return None
        year, month, day, hour, minute, second, level, pid, _, message = match.groups()
        instant = clock.instant(int(year), int(month), int(day), int(hour), int(minute), int(second))
        if instant is None:
            return None
        return Head(
            instant_ns=instant,
            severity=severity_of_word(level),
            message=message.rstrip("\r\n"),
            labels=(("pid", pid),),
        )


def _status_severity(status: str) -> Severity | None:
    if status == "-":
        return None
    if status >= "500":
        return Severity.ERROR
    if status >= "400":
        return Severity.WARN
    return Severity.INFO
