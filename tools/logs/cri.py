"""Kubernetes container logs in the CRI format (`/var/log/pods/.../0.log`, `/var/log/containers/`):
`<RFC 3339 nano stamp> <stdout|stderr> <P|F> <text>`.

The runtime splits a long line into partial (`P`) pieces ending with a full (`F`) one; the pieces are
joined back into one line. The container's own text follows: its severity is read as a text log's
(a level word near its start), so a Java container's `ERROR` is found without configuration. The
service is the file's: pod logs are named `0.log`, so a numeric file name takes its folder's name
(the container).
"""

from __future__ import annotations

import re

from tools.logs.line_format import FormatTraits, Head
from tools.logs.text_lines import level_word
from tools.logs.timestamps import Clock

_CRI = re.compile(
    r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?(?:Z|[+-]\d\d:\d\d)) (stdout|stderr) ([PF])(?: (.*))?",
    re.ASCII | re.DOTALL,
)


class CriLines(FormatTraits):
    name = "cri"
    partial_lines = True

    def head(self, line: str, clock: Clock) -> Head | None:
        match = _CRI.match(line)
        if match is None:
            return None
        stamp, stream, tag, text = match.groups()
        parsed = clock.iso(stamp)
        if parsed is None:
            return None
        message = (text or "").rstrip("\r\n")
        return Head(
            instant_ns=parsed[0],
            severity=level_word(message),
            message=message,
            labels=(("stream", stream),),
            joins_next=tag == "P",
        )
