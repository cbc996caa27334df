"""The one-line machine description every benchmark prints next to its figures."""

from __future__ import annotations

import os
import platform
from pathlib import Path


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def hardware() -> str:
    return f"{os.cpu_count()} cores ({cpu_model()}), Python {platform.python_version()}, {platform.system()}"


# Source for a benchmark's child process (run with `python -c`): `status("VmRSS")` and
# `status("VmHWM")`, the process's memory now and at its peak, in bytes (Linux's /proc).
MEMORY_STATUS_SOURCE = r"""
from pathlib import Path as _StatusPath


def status(key):
    for line in _StatusPath("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(key)
"""
