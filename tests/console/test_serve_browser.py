"""`diagnose serve` end to end: the console in headless Chromium, a query typed (without a click: the
page gives the terminal the focus) and run to its result, and no request leaves for another host.

Skipped when /usr/bin/chromium is missing, unless DIAGNOSE_TEST_REQUIRE_BROWSER=1 (then it fails).
The served console writes only to a temporary HOME / state dir / audit file.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.support.audit_reader import AuditReader

pytestmark = pytest.mark.browser

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ANSI = re.compile(rb"\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07]*\x07|[()][0-9A-Za-z]|[=>78])")
TYPED = " (typed in the browser)"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_for_port(port: int, process: subprocess.Popen[str], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert process.poll() is None, "diagnose serve exited early"
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise AssertionError(f"diagnose serve did not listen on {port}")


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    if not CHROMIUM.exists():
        if os.environ.get("DIAGNOSE_TEST_REQUIRE_BROWSER") == "1":
            pytest.fail(f"{CHROMIUM} is required (DIAGNOSE_TEST_REQUIRE_BROWSER=1) but missing")
        pytest.skip(f"{CHROMIUM} is not installed")
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("DIAGNOSE_")}
    env.update(
        HOME=str(tmp_path),
        XDG_STATE_HOME=str(tmp_path / "state"),
        DIAGNOSE_AUDIT__PATH=str(tmp_path / "audit.db"),
        PYTHONPATH=str(Path(__file__).parents[2]),
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "console", "serve", "--host", "127.0.0.1", "--port", str(port)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,  # its own process group: the per-session console processes stop with it
    )
    try:
        assert process.stdout is not None
        url = ""
        while not url:  # the URL to open carries this start's access token
            line = process.stdout.readline()
            assert line, "diagnose serve exited before printing its URL"
            url = line.split("diagnose serve: open ", 1)[1].strip() if "diagnose serve: open " in line else ""
        _wait_for_port(port, process)
        yield url, tmp_path
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


def _finished_run(audit: Path) -> Any:
    if not audit.exists():
        return None
    finished = AuditReader(audit).query(
        "SELECT outcome, stop_reason, query FROM runs WHERE outcome IS NOT NULL"
    )
    return finished[0] if finished else None


def test_the_console_runs_a_scenario_in_a_browser(served: tuple[str, Path]) -> None:
    from playwright.sync_api import sync_playwright

    url, home = served
    screen = bytearray()
    requested: list[str] = []

    def shown() -> str:
        return ANSI.sub(b"", bytes(screen)).decode("utf-8", errors="replace")

    def wait_until(predicate: Any, what: str, timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        while not predicate():
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            page.wait_for_timeout(100)

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1600, "height": 1000})
            page.on("request", lambda request: requested.append(request.url))
            page.on(
                "websocket",
                lambda ws: ws.on(
                    "framereceived",
                    lambda payload: screen.extend(payload if isinstance(payload, bytes) else b""),
                ),
            )
            page.goto(url)
            page.wait_for_selector("body.-first-byte", timeout=30_000)
            wait_until(lambda: "Investigate" in shown(), "the console's first frame")
            wait_until(lambda: "scripted: evidence-backed-diagnosis" in shown(), "the engine")

            # No click and no page.focus(): the page gives the terminal the keyboard with its first frame.
            page.keyboard.press("End")
            page.keyboard.type(TYPED)
            page.keyboard.press("Control+r")
            wait_until(lambda: _finished_run(home / "audit.db") is not None, "the run's result in the audit")
            wait_until(lambda: "DRAFT / COMPLETED" in shown(), "the result on screen")
            page.screenshot(path=str(home / "browser.png"))
        finally:
            browser.close()

    here = urlsplit(url).netloc
    elsewhere = [
        u for u in requested if urlsplit(u).scheme in ("http", "https") and urlsplit(u).netloc != here
    ]
    assert elsewhere == [], elsewhere  # the page's font and script come from this server
    run = _finished_run(home / "audit.db")
    assert (run["outcome"], run["stop_reason"]) == ("DRAFT", "COMPLETED")
    assert run["query"].endswith(TYPED)  # the query typed in the browser is the query that ran
