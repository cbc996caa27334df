"""A green parallel run of the suite ends without a traceback (tests/conftest.py, "Shutdown").

pytest-xdist's transport sends a worker SIGINT when the worker is still busy 5 s after its session
ended. On a loaded machine its last garbage collections can take that long, and a KeyboardInterrupt
raised inside Hypothesis's garbage-collection callback was printed as a
`PytestUnraisableExceptionWarning` traceback under a green result. Here a plugin holds a worker's end
in 7 s of collections with such a callback installed, as that machine did. Long: two workers start and
each waits out the 7 s.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.resilience import REPO

SLOW_END = """
import gc
import time


def _callback(phase, info):
    deadline = time.monotonic() + 0.01
    while time.monotonic() < deadline:
        pass


def pytest_unconfigure(config):
    if hasattr(config, "workerinput"):
        gc.callbacks.append(_callback)
        deadline = time.monotonic() + 7
        while time.monotonic() < deadline:
            gc.collect()
"""


@pytest.mark.long
def test_a_worker_slow_to_end_leaves_no_traceback_after_a_green_run(tmp_path: Path) -> None:
    (tmp_path / "slow_end.py").write_text(SLOW_END, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)])}
    command = [sys.executable, "-m", "pytest", "-n", "2", "-p", "slow_end", "-q", "-p", "no:cacheprovider"]
    done = subprocess.run(
        [*command, "tests/agent/test_draft_rules.py", "-m", "not long"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:]
    output = done.stdout + done.stderr
    assert "passed" in output
    assert "Traceback" not in output, output[-3000:]
    assert "KeyboardInterrupt" not in output, output[-3000:]
