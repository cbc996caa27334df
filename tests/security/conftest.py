"""Fixtures the security suite shares."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.resilience import run_cli


@pytest.fixture
def in_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Callable[..., tuple[int, str, str]]:
    """`diagnose` in this process (the same `main`), from the test's folder, where a relative path
    lands: for the variants of a case whose first instance runs as a process."""
    monkeypatch.chdir(tmp_path)

    def call(*args: str | Path) -> tuple[int, str, str]:
        run = run_cli(capsys, *args)
        return run.code, run.out, run.err

    return call
