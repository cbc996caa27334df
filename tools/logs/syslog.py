"""syslog as files hold it: RFC 5424, RFC 3164 (BSD, `/var/log/syslog`, `messages`, `auth.log`) and
rsyslog's high-precision variant (an RFC 3339 stamp in place of the BSD one).

The service is the tag (`sshd`, `CRON`, `kernel`); the severity comes from `<PRI>` when the line
carries one, and is absent otherwise (traditional files drop it): a level filter then counts such
records rather than hiding them. BSD stamps have no year and no zone: see `tools.logs.timestamps`.
"""

from __future__ import annotations

import re

from tools.logs.line_format import FormatTraits, Head
from tools.logs.severity import syslog_priority_severity
from tools.logs.timestamps import MONTHS, Clock, fraction_ns

_RFC5424 = re.compile(
    r"<(\d{1,3})>1 (\S+) (\S+) (\S+) (\S+) (\S+) (-|(?:\[(?:[^\]\\]|\\.){0,8192}\])+)(?: (.*))?",
    re.ASCII | re.DOTALL,
)
_BSD = re.compile(
    r"(?:<(\d{1,3})>)?(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) {1,2}(\d{1,2}) "
    r"(\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?(?: (\d{4}))? (\S+) ?(.*)",
    re.ASCII | re.DOTALL,
)
_HIGH_PRECISION = re.compile(
    r"(?:<(\d{1,3})>)?(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?(?:Z|[+-]\d\d:\d\d)) (\S+) "
    r"(?=[^\s:\[]{1,64}(?:\[\d+\])?: )(.*)",
    re.ASCII | re.DOTALL,
)
_TAG = re.compile(r"([^\s:\[]{1,64})(?:\[(\d{1,10})\])?: ?(.*)", re.DOTALL)


class Syslog(FormatTraits):
    name = "syslog"

    def head(self, line: str, clock: Clock) -> Head | None:
        line = line.rstrip("\r\n")
        if line.startswith("<") and (match := _RFC5424.match(line)) is not None:
            return _rfc5424(match, clock)
        if (match := _BSD.match(line)) is not None:
            return _bsd(match, clock)
        if (match := _HIGH_PRECISION.match(line)) is not None:
            pri, stamp, host, rest = match.groups()
            parsed = clock.iso(stamp)
            return None if parsed is None else _tagged(parsed[0], pri, host, rest)
        return None


def _rfc5424(match: re.Match[str], clock: Clock) -> Head | None:
    pri, stamp, host, app, procid, msgid, _, message = match.groups()
    parsed = clock.iso(stamp)
    if parsed is None or int(pri) > 191:
        return None
    labels = [("host", host)] if host != "-" else []
    labels += [(key, value) for key, value in (("pid", procid), ("msgid", msgid)) if value != "-"]
    return Head(
        instant_ns=parsed[0],
        severity=syslog_priority_severity(int(pri)),
        message=(message or "").removeprefix("\ufeff"),
        service=None if app == "-" else app,
        labels=tuple(labels),
    )


def _bsd(match: re.Match[str], clock: Clock) -> Head | None:
    pri, month, day, hour, minute, second, fraction, year, host, rest = match.groups()
    fields = (MONTHS[month.lower()], int(day), int(hour), int(minute), int(second), fraction_ns(fraction))
    instant = clock.instant(int(year), *fields) if year else clock.yearless(*fields)
    return None if instant is None else _tagged(instant, pri, host, rest)


def _tagged(instant: int, pri: str | None, host: str, rest: str) -> Head | None:
    if pri is not None and int(pri) > 191:
        return None
    tag = _TAG.match(rest)
    labels = [("host", host)]
    if tag is not None and tag.group(2):
        labels.append(("pid", tag.group(2)))
    return Head(
        instant_ns=instant,
        severity=None if pri is None else syslog_priority_severity(int(pri)),
        message=rest if tag is None else tag.group(3),
        service=None if tag is None else tag.group(1),
        labels=tuple(labels),
    )
