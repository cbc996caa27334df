"""Hole 2: `diagnose serve` admits only the operator's own browser tab.

A real `diagnose serve` on 127.0.0.1 is driven with real HTTP and WebSocket requests: a page of another
site (another Origin), a DNS-rebinding page (another Host) and a request without the access token
printed at start are refused; the token sets an HttpOnly, SameSite=Strict cookie; and at most
`--max-consoles` console processes run at once, with a clear page when full.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest

from tests.support.resilience import REPO

URL_LINE = re.compile(r"diagnose serve: open (https?://[^/]+/\?token=([A-Za-z0-9_-]+))")


@dataclass(frozen=True)
class Served:
    url: str
    origin: str
    port: int
    token: str

    @property
    def cookie(self) -> dict[str, str]:
        return {f"diagnose_token_{self.port}": self.token}

    def ws_headers(self, origin: str | None = None, with_cookie: bool = True) -> dict[str, str]:
        headers = {"Origin": origin or self.origin}
        if with_cookie:
            headers["Cookie"] = f"diagnose_token_{self.port}={self.token}"
        return headers


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def serving(tmp_path: Path, *extra: str) -> Iterator[Served]:
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("DIAGNOSE_")}
    env.update(
        HOME=str(tmp_path),
        XDG_STATE_HOME=str(tmp_path / "state"),
        DIAGNOSE_AUDIT__PATH=str(tmp_path / "audit.db"),
        PYTHONPATH=str(REPO),
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "console", "serve", "--port", str(port), "--max-consoles", "1", *extra],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,  # its own process group: the console processes stop with it
    )
    try:
        assert process.stdout is not None
        deadline = time.monotonic() + 60
        match = None
        while match is None and time.monotonic() < deadline:
            line = process.stdout.readline()
            assert line, "diagnose serve exited before printing its URL"
            match = URL_LINE.search(line)
        assert match is not None, "no token URL printed"
        while socket.socket().connect_ex(("127.0.0.1", port)) != 0:  # printed just before it listens
            assert time.monotonic() < deadline and process.poll() is None, "diagnose serve never listened"
            time.sleep(0.05)
        yield Served(match.group(1), f"http://127.0.0.1:{port}", port, match.group(2))
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    with serving(tmp_path) as server:
        yield server


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    # No cookie jar: each request carries exactly the cookies the test gives it.
    async with aiohttp.ClientSession(cookie_jar=aiohttp.DummyCookieJar()) as session:
        yield session


async def test_the_start_prints_a_token_url_whose_first_visit_sets_a_strict_cookie(
    served: Served, http: aiohttp.ClientSession
) -> None:
    assert len(served.token) >= 32
    async with http.get(served.url, allow_redirects=False) as response:
        assert response.status == 303 and response.headers["Location"] == "/"
        cookie = response.headers["Set-Cookie"]
    assert f"diagnose_token_{served.port}={served.token}" in cookie
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    async with http.get(served.origin + "/", cookies=served.cookie) as response:
        assert response.status == 200 and "<html" in (await response.text()).lower()


@pytest.mark.parametrize(
    "headers",
    [
        {},  # no token at all
        {"Host": "attacker.example:{port}"},  # DNS rebinding: the page's own name resolved to 127.0.0.1
        {"Origin": "http://attacker.example"},  # a cross-site request carrying the cookie
    ],
)
async def test_pages_refuse_other_hosts_origins_and_requests_without_the_token(
    served: Served, http: aiohttp.ClientSession, headers: dict[str, str]
) -> None:
    headers = {key: value.format(port=served.port) for key, value in headers.items()}
    cookies = {} if not headers else served.cookie
    async with http.get(
        served.origin + "/", headers=headers, cookies=cookies, allow_redirects=False
    ) as response:
        assert response.status == 403
    async with http.get(
        served.origin + "/static/css/xterm.css", headers=headers, cookies=cookies
    ) as response:
        assert response.status == 403


async def test_a_web_page_of_another_site_cannot_open_the_console_websocket(
    served: Served, http: aiohttp.ClientSession
) -> None:
    for headers in (served.ws_headers("http://attacker.example"), served.ws_headers(with_cookie=False)):
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await http.ws_connect(served.origin + "/ws", headers=headers)
        assert refused.value.status == 403


async def test_console_processes_are_capped_with_a_clear_page_when_full(
    served: Served, http: aiohttp.ClientSession
) -> None:
    ws = await http.ws_connect(served.origin + "/ws", headers=served.ws_headers())
    try:
        await ws.send_json(["ping", "1"])
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await http.ws_connect(served.origin + "/ws", headers=served.ws_headers())
        assert refused.value.status == 503
        async with http.get(served.origin + "/", cookies=served.cookie) as response:
            assert response.status == 503
            assert "console is full" in (await response.text()).lower()
    finally:
        await ws.close()
    # Once the session is closed, its slot is free again.
    deadline = time.monotonic() + 30
    while True:
        async with http.get(served.origin + "/", cookies=served.cookie) as response:
            if response.status == 200:
                break
        assert time.monotonic() < deadline, "the closed session's slot was never freed"
        await _sleep(0.2)


async def _sleep(seconds: float) -> None:
    import asyncio

    await asyncio.sleep(seconds)


async def test_behind_a_proxy_the_public_address_is_the_admitted_one(
    tmp_path: Path, http: aiohttp.ClientSession
) -> None:
    public = "https://diag.example.com"
    with serving(tmp_path, "--public-url", public) as served:
        assert served.url.startswith(f"{public}/?token=")
        proxied = {"Host": "diag.example.com", "Origin": public}
        async with http.get(served.origin + "/", headers=proxied, cookies=served.cookie) as response:
            assert response.status == 200
        async with http.get(
            served.origin + f"/?token={served.token}",
            headers={"Host": "diag.example.com"},
            allow_redirects=False,
        ) as response:
            assert "Secure" in response.headers["Set-Cookie"]
        elsewhere = {"Host": "diag.example.com", "Origin": "https://attacker.example"}
        async with http.get(served.origin + "/", headers=elsewhere, cookies=served.cookie) as response:
            assert response.status == 403
