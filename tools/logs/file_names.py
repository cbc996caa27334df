"""Which files of a log folder are logs, and the service a file's name gives its records.

A log folder holds current files, rotated ones (`app.log.1`, `app.log-20261206`,
`app.2026-12-06.log`) and compressed ones (`app.log.2.gz`). A record's service is its own service
field when its format has one, else the file's name without folder, extensions and rotation suffix:
`nginx-access.log.2.gz` -> `nginx-access`. Kubernetes names a container's log `0.log` in a folder
named after the container, so an all-digit name takes its folder's name. `[logs.file_services]`
overrides the name by glob (matched against the path inside the folder and against the name).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping
from pathlib import PurePath

COMPRESSED = (".gz",)
_LOG_EXTENSIONS = frozenset({".log", ".ndjson", ".jsonl", ".json", ".txt", ".out", ".err", ".logfmt"})
_ROTATION = re.compile(
    r"(?:[.-]\d{1,4}|[._-]\d{8}(?:\d{2,6})?|[._-]\d{4}-\d\d-\d\d(?:[._T-]\d\d(?:[-:]?\d\d){0,2})?)$", re.ASCII
)


def stem(name: str) -> tuple[str, str | None]:
    """The name without compression, rotation and log extensions, and the log extension found."""
    for suffix in COMPRESSED:
        name = name.removesuffix(suffix)
    extension: str | None = None
    for _ in range(3):  # app.log.1, app.1.log, app.log-20261206, app.2026-12-06.log
        before = name
        name = _ROTATION.sub("", name)
        dot = name.rfind(".")
        if dot > 0 and name[dot:].lower() in _LOG_EXTENSIONS:
            extension = name[dot:].lower()
            name = name[:dot]
        if name == before:
            break
    return name, extension


def is_log_file(name: str) -> bool:
    """A log by its name: a log extension, or none at all (`syslog`, `messages`), rotated and
    compressed forms included; hidden files never."""
    if name.startswith(".") or not name:
        return False
    base, extension = stem(name)
    return bool(base) and (extension is not None or "." not in base)


def service_of(relative: str, overrides: Mapping[str, str]) -> str:
    path = PurePath(relative)
    for pattern, service in overrides.items():
        if fnmatch.fnmatchcase(relative, pattern) or fnmatch.fnmatchcase(path.name, pattern):
            return service
    base, _ = stem(path.name)
    if base.isdigit() and path.parent.name:
        return path.parent.name
    return base or path.name
