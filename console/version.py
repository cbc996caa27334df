"""The installed distribution's name and version: `diagnose --version` and the traces' resource.

Read from the package metadata, the one place the version is written (pyproject.toml), so a release
never has two numbers to keep in step.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

DISTRIBUTION = "diagnosis-console"


def package_version() -> str:
    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "0"
