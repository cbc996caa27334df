"""Log time stamps as they are written, read into instants (nanoseconds since the epoch, UTC).

Real logs rarely write a full RFC 3339 instant: 13 of 19 common formats have no UTC offset and 5 no
year. A stamp without an offset is read in `[logs] timezone` (an IANA name, default UTC); a stamp
without a year (syslog's `Dec  6 16:12:43`, logcat's `12-06 16:12:43.123`) takes the latest year
that does not put it after the file's modification time (a day of tolerance for clock skew), so a
file written across New Year reads December as last year. Epoch numbers are read in seconds,
milliseconds, microseconds or nanoseconds by their magnitude.

Reading a local stamp costs a time-zone conversion; a log has many records per minute, so the
instant of each minute is cached (bounded) and a record adds its seconds and fraction.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

NS_PER_S = 1_000_000_000
_DAY_NS = 86_400 * NS_PER_S
_MINUTE_CACHE = 4096
MONTHS = {
    name: number
    for number, name in enumerate(
        ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), start=1
    )
}
# 2026-12-06T16:12:43.123456789+01:00, 2026-12-06 16:12:43,123, 2026-12-06T16:12:43Z, ...
ISO = re.compile(
    r"(\d{4})-(\d\d)-(\d\d)[T ](\d\d):(\d\d):(\d\d)(?:[.,](\d{1,9}))?"
    r" ?(Z|z|[+-]\d\d(?::?\d\d)?)?(?!\d)",
    re.ASCII,
)
_OFFSET = re.compile(r"([+-])(\d\d):?(\d\d)?", re.ASCII)


def timezone_named(name: str) -> ZoneInfo:
    """The IANA zone, or ValueError naming what was asked (configuration is checked at start)."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown time zone {name!r}: use an IANA name, e.g. UTC or Asia/Shanghai") from None


def offset_seconds(text: str) -> int:
    """Seconds east of UTC of `Z`, `+08:00`, `+0800`, `-05`."""
    if text in ("Z", "z"):
        return 0
    match = _OFFSET.fullmatch(text)
    if match is None:
        raise ValueError(text)
    sign, hours, minutes = match.groups()
    seconds = int(hours) * 3600 + int(minutes or 0) * 60
    return -seconds if sign == "-" else seconds


def fraction_ns(digits: str | None) -> int:
    if not digits:
        return 0
    return int(digits[:9].ljust(9, "0"))


@dataclass
class Clock:
    """Reads one file's stamps: its time zone and, for year-less stamps, its modification time."""

    zone: ZoneInfo
    mtime_ns: int
    _minutes: dict[tuple[int, int, int, int, int], int] = field(default_factory=dict, repr=False)

    def instant(
        self,
        year: int,
        month: int,
        day: int,
        hour: int,
        minute: int,
        second: int,
        nanos: int = 0,
        offset: int | None = None,
    ) -> int | None:
        """Nanoseconds since the epoch, or None for a date that does not exist (Feb 30, hour 25)."""
        if offset is not None:
            try:
                base = calendar.timegm((year, month, day, hour, minute, 0, 0, 0, 0))
                datetime(year, month, day, hour, minute)  # validates the fields
            except (ValueError, OverflowError):
                return None
            if not 0 <= second <= 60:
                return None
            return (base + second - offset) * NS_PER_S + nanos
        key = (year, month, day, hour, minute)
        minute_ns = self._minutes.get(key)
        if minute_ns is None:
            try:
                local = datetime(year, month, day, hour, minute, tzinfo=self.zone)
            except (ValueError, OverflowError):
                return None
            minute_ns = int(local.timestamp()) * NS_PER_S
            if len(self._minutes) >= _MINUTE_CACHE:
                self._minutes.clear()
            self._minutes[key] = minute_ns
        if not 0 <= second <= 60:
            return None
        return minute_ns + second * NS_PER_S + nanos

    def yearless(
        self, month: int, day: int, hour: int, minute: int, second: int, nanos: int = 0
    ) -> int | None:
        """The latest year that does not put the stamp after the file's modification time."""
        latest = self.mtime_ns + _DAY_NS
        year = datetime.fromtimestamp(self.mtime_ns // NS_PER_S, UTC).year + 1
        for candidate in (year, year - 1, year - 2, year - 3, year - 4):  # Feb 29 needs a leap year
            instant = self.instant(candidate, month, day, hour, minute, second, nanos)
            if instant is not None and instant <= latest:
                return instant
        return None

    def iso(self, text: str, start: int = 0) -> tuple[int, int] | None:
        """(instant, end position) of an ISO-like stamp at `start` of `text`."""
        match = ISO.match(text, start)
        if match is None:
            return None
        year, month, day, hour, minute, second, fraction, zone = match.groups()
        offset = None if zone is None else offset_seconds(zone)
        fields = (int(year), int(month), int(day), int(hour), int(minute), int(second))
        instant = self.instant(*fields, fraction_ns(fraction), offset)
        return None if instant is None else (instant, match.end())


def epoch_ns(value: float | int | str) -> int | None:
    """An epoch number in s, ms, µs or ns (told by magnitude), or None when it is not one."""
    if isinstance(value, str):
        text = value.strip()
        if not text or len(text) > 24:
            return None
        try:
            number: float | int = int(text) if text.isdigit() else float(text)
        except ValueError:
            return None
    else:
        number = value
    if number != number or number <= 0:  # NaN, or before 1970
        return None
    if number < 1e11:
        scale = NS_PER_S
    elif number < 1e14:
        scale = 1_000_000
    elif number < 1e17:
        scale = 1000
    else:
        scale = 1
    if isinstance(number, int):
        return number * scale
    whole = int(number)  # the fraction apart: a float of 1.8e18 nanoseconds is off by hundreds
    return whole * scale + round((number - whole) * scale)
