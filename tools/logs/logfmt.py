"""logfmt lines (`time=2026-12-06T16:12:43Z level=error msg="db down" service=pay`), as written by
Go's slog text handler, go-kit, logrus' text formatter, Heroku and Grafana's own components.

The time is `time`, `ts`, `t`, `timestamp` or `date`; the level `level`, `lvl` or `severity`; the
message `msg` or `message` (else the whole line); the service `service`, `app` or `svc`. Other pairs
are labels. One record per line.
"""

from __future__ import annotations

import re

from tools.logs.line_format import FormatTraits, Head
from tools.logs.projection import MAX_LABELS
from tools.logs.severity import severity_of_field
from tools.logs.timestamps import Clock, epoch_ns

_PAIR = re.compile(r'([^\s="]{1,128})=("(?:[^"\\]|\\.)*"|[^\s"]*)')
_START = re.compile(r'\s*[^\s="]{1,128}=')
_TIME = ("time", "ts", "t", "timestamp", "date")
_LEVEL = ("level", "lvl", "severity")
_MESSAGE = ("msg", "message")
_SERVICE = ("service", "app", "svc")
_KNOWN = frozenset(_TIME + _LEVEL + _MESSAGE + _SERVICE)
_HEAD_CHARS = 64 * 1024  # pairs are read from the line's first 64 KiB; the message may run on


class Logfmt(FormatTraits):
    name = "logfmt"
    escapes_text = True
    indented_heads = True

    def head(self, line: str, clock: Clock) -> Head | None:
        if _START.match(line) is None:
            return None
        pairs: dict[str, str] = {}
        for match in _PAIR.finditer(line, 0, min(len(line), _HEAD_CHARS)):
            key, value = match.groups()
            if value.startswith('"'):
                value = value[1:-1].replace('\\"', '"').replace("\\\\", "\\")
            pairs.setdefault(key, value)
        if len(pairs) < 2:
            return None
        stamp = _first(pairs, _TIME)
        if stamp is None:
            return None
        parsed = clock.iso(stamp)
        instant = parsed[0] if parsed is not None else epoch_ns(stamp)
        if instant is None:
            return None
        level = _first(pairs, _LEVEL)
        message = _first(pairs, _MESSAGE)
        labels = [(key, value) for key, value in pairs.items() if key not in _KNOWN][:MAX_LABELS]
        return Head(
            instant_ns=instant,
            severity=None if level is None else severity_of_field(level),
            message=line.strip() if message is None else message,
            service=_first(pairs, _SERVICE) or None,
            labels=tuple(labels),
        )


def _first(pairs: dict[str, str], names: tuple[str, ...]) -> str | None:
    for name in names:
        if name in pairs:
            return pairs[name]
    return None
