"""The formats a log file may be in, and how `[logs] format = "auto"` recognises a file's.

Recognition reads the file's first lines (`SAMPLE_LINES`, within `SAMPLE_BYTES`) and picks the
format that reads the most of them as record starts; on a tie the earlier in `BUILTIN_ORDER` wins
(configured formats come first, then the stricter built-ins before the looser ones). A file none of
them reads is skipped and logged (`UNKNOWN_FORMAT`), never half-read.

A format is chosen per file, so a folder may mix formats. A named `[logs] format` forces one for
every file; a name from `[logs.formats]` is a configured regex (`tools.logs.custom_format`).

Why a hand list rather than lnav's format files: lnav (BSD-licensed) describes its formats as
PCRE regexes, but its stamp recognition, level and multi-line rules live in its C++ engine, which
its JSON files assume; reusing the files would mean re-implementing that engine. The families here
cover the same common logs with stamp, zone and year rules this tool defines once
(`tools.logs.timestamps`), and anything else is one regex in the configuration.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from tools.logs.cri import CriLines
from tools.logs.custom_format import RegexFormat
from tools.logs.json_lines import JsonLines, TooCostly
from tools.logs.line_format import LineFormat
from tools.logs.logfmt import Logfmt
from tools.logs.syslog import Syslog
from tools.logs.text_lines import Glog, Logcat, TextLines
from tools.logs.timestamps import Clock
from tools.logs.web_server import AccessLog, ApacheErrorLog, NginxErrorLog

AUTO = "auto"
SAMPLE_LINES = 64
SAMPLE_BYTES = 256 * 1024
BUILTIN_ORDER = (
    "json",
    "cri",
    "access-log",
    "apache-error",
    "nginx-error",
    "logcat",
    "glog",
    "syslog",
    "logfmt",
    "text",
)
ALIASES = {"ndjson": "json", "jsonl": "json", "log4j": "text", "logback": "text", "python": "text"}


def build_formats(
    fields: Mapping[str, str] | None = None, custom: Iterable[RegexFormat] = ()
) -> dict[str, LineFormat]:
    """Every format by name, in recognition order: configured ones first, then the built-ins."""
    builtins: dict[str, LineFormat] = {
        "json": JsonLines(fields),
        "cri": CriLines(),
        "access-log": AccessLog(),
        "apache-error": ApacheErrorLog(),
        "nginx-error": NginxErrorLog(),
        "logcat": Logcat(),
        "glog": Glog(),
        "syslog": Syslog(),
        "logfmt": Logfmt(),
        "text": TextLines(),
    }
    formats: dict[str, LineFormat] = {item.name: item for item in custom}
    formats.update({name: builtins[name] for name in BUILTIN_ORDER if name not in formats})
    return formats


def format_names(custom_names: Iterable[str] = ()) -> tuple[str, ...]:
    return (AUTO, *custom_names, *BUILTIN_ORDER, *ALIASES)


def recognise(lines: list[str], formats: Mapping[str, LineFormat], clock: Clock) -> LineFormat | None:
    """The format that reads the most sample lines as record starts, or None when none reads one."""
    best: LineFormat | None = None
    best_heads = 0
    for candidate in formats.values():
        heads = 0
        for line in lines:
            try:
                if candidate.head(line, clock) is not None:
                    heads += 1
            except TooCostly:
                continue
        if heads > best_heads:
            best, best_heads = candidate, heads
    return best
