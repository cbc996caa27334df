"""Hole 2 and issue 20/22: `diagnose serve` admits only the operator's own browser tab.

A real `diagnose serve` on 127.0.0.1 is driven with real HTTP and WebSocket requests: a page of another
site (another Origin), a DNS-rebinding page (another Host) and a request without the access token
printed at start are refused; the token sets an HttpOnly, SameSite=Strict cookie scoped to this start's
random path, which a standards-conformant cookie jar sends to no other server on 127.0.0.1; at most
`--max-consoles` console processes run at once, with a clear page when full; `localhost:PORT` is the
served address too; and a busy port or a host that does not resolve is one line and exit 3, with no
URL printed.
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
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from http.cookiejar import CookieJar
from pathlib import Path

import aiohttp
import pytest

from tests.support.resilience import cli_env, run_cli_process

URL_LINE = re.compile(r"diagnose serve: open (https?://[^/]+(/[0-9a-f]{32}/)\?token=([A-Za-z0-9_-]+))")


@dataclass(frozen=True)
class Served:
    url: str
    origin: str
    port: int
    token: str
    path: str  # this start's random path prefix, e.g. "/3f.../"

    @property
    def base(self) -> str:
        """The console's page, without the token."""
        return self.origin + self.path

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
    env = cli_env(tmp_path)
    env["DIAGNOSE_AUDIT__PATH"] = str(tmp_path / "audit.db")
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
            assert time.monotonic() < deadline, "diagnose serve never listened"
            assert process.poll() is None, "diagnose serve never listened"
            time.sleep(0.05)
        yield Served(match.group(1), f"http://127.0.0.1:{port}", port, match.group(3), match.group(2))
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
        assert response.status == 303
        assert response.headers["Location"] == served.path
        cookie = response.headers["Set-Cookie"]
    assert f"diagnose_token_{served.port}={served.token}" in cookie
    assert "HttpOnly" in cookie
    assert "SameSite=Strict" in cookie
    assert f"Path={served.path}" in cookie
    async with http.get(served.base, cookies=served.cookie) as response:
        assert response.status == 200
        assert "<html" in (await response.text()).lower()


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
    async with http.get(served.base, headers=headers, cookies=cookies, allow_redirects=False) as response:
        assert response.status == 403
    async with http.get(served.base + "static/css/xterm.css", headers=headers, cookies=cookies) as response:
        assert response.status == 403


async def test_a_web_page_of_another_site_cannot_open_the_console_websocket(
    served: Served, http: aiohttp.ClientSession
) -> None:
    for headers in (served.ws_headers("http://attacker.example"), served.ws_headers(with_cookie=False)):
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await http.ws_connect(served.base + "ws", headers=headers)
        assert refused.value.status == 403


async def test_console_processes_are_capped_with_a_clear_page_when_full(
    served: Served, http: aiohttp.ClientSession
) -> None:
    ws = await http.ws_connect(served.base + "ws", headers=served.ws_headers())
    try:
        await ws.send_json(["ping", "1"])
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await http.ws_connect(served.base + "ws", headers=served.ws_headers())
        assert refused.value.status == 503
        async with http.get(served.base, cookies=served.cookie) as response:
            assert response.status == 503
            assert "console is full" in (await response.text()).lower()
    finally:
        await ws.close()
    # Once the session is closed, its slot is free again.
    deadline = time.monotonic() + 30
    while True:
        async with http.get(served.base, cookies=served.cookie) as response:
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
        assert served.url.startswith(f"{public}{served.path}?token=")
        proxied = {"Host": "diag.example.com", "Origin": public}
        async with http.get(served.base, headers=proxied, cookies=served.cookie) as response:
            assert response.status == 200
        async with http.get(
            served.base + f"?token={served.token}",
            headers={"Host": "diag.example.com"},
            allow_redirects=False,
        ) as response:
            assert "Secure" in response.headers["Set-Cookie"]
        elsewhere = {"Host": "diag.example.com", "Origin": "https://attacker.example"}
        async with http.get(served.base, headers=elsewhere, cookies=served.cookie) as response:
            assert response.status == 403


# --- the credential stays with this server (issue 20, item 5) ----------------------------------------


def _opener(jar: CookieJar) -> urllib.request.OpenerDirector:
    return urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))


def _status(opener: urllib.request.OpenerDirector, url: str | urllib.request.Request) -> int:
    try:
        with opener.open(url, timeout=30) as response:
            return int(response.status)
    except urllib.error.HTTPError as refused:
        return int(refused.code)


def _cookie_sent(jar: CookieJar, url: str) -> str | None:
    """The Cookie header a standards-conformant jar (RFC 6265 rules: host-only, path-matched, ports
    ignored) would send with a request for `url`."""
    request = urllib.request.Request(url)  # noqa: S310 - http URLs of the test's own server
    jar.add_cookie_header(request)
    return request.get_header("Cookie")


def test_the_access_cookie_reaches_no_other_server_on_the_same_host(tmp_path: Path) -> None:
    """Cookies ignore ports: a cookie for `/` of 127.0.0.1:A is sent to 127.0.0.1:B too, where any local
    user's server could read it and drive the console. Scoped to this start's random path, it is not."""
    jar = CookieJar()
    browser = _opener(jar)
    for home in ("a", "b"):
        (tmp_path / home).mkdir()
    with serving(tmp_path / "a") as first, serving(tmp_path / "b") as second:
        assert _status(browser, first.url) == 200  # the token URL: cookie set, redirected to the page
        assert [cookie.path for cookie in jar] == [first.path]
        assert _cookie_sent(jar, first.base + "ws") is not None  # its own page, static files, WebSocket
        other_port = _free_port()
        for elsewhere in (
            f"http://127.0.0.1:{other_port}/",
            f"http://127.0.0.1:{other_port}/index.html",
            second.base,
            f"http://127.0.0.1:{second.port}/",
        ):
            assert _cookie_sent(jar, elsewhere) is None, elsewhere
        assert _status(browser, second.base) == 403  # the other console: nothing the jar holds opens it
        # Even handed over by hand, the first server's token is not the second's credential.
        stolen = {"Cookie": f"diagnose_token_{second.port}={first.token}"}
        assert (
            _status(urllib.request.build_opener(), urllib.request.Request(second.base, headers=stolen)) == 403  # noqa: S310 - http URLs of the test's own server
        )


async def test_nothing_outside_this_starts_path_is_served(
    served: Served, http: aiohttp.ClientSession
) -> None:
    for path in ("/", "/ws", "/static/css/xterm.css", "/download/x", served.path.rstrip("/")):
        async with http.get(served.origin + path, cookies=served.cookie, allow_redirects=False) as response:
            assert response.status == 404, path


async def test_localhost_is_the_served_address_too(served: Served, http: aiohttp.ClientSession) -> None:
    """README and browsers write http://localhost:PORT; the page then talks to localhost (the cookie of
    one name is never sent to the other), and a rebinding name or a mixed origin stays refused."""
    local = f"http://localhost:{served.port}"
    as_localhost = {"Host": f"localhost:{served.port}"}
    async with http.get(served.base, headers=as_localhost, cookies=served.cookie) as response:
        assert response.status == 200
        page = await response.text()
    assert f'"ws://localhost:{served.port}{served.path}ws"' in page
    assert f"{local}{served.path}static/" in page
    ws = await http.ws_connect(served.base + "ws", headers={**served.ws_headers(local), **as_localhost})
    await ws.close()
    mixed = {**as_localhost, "Origin": served.origin}  # a 127.0.0.1 page talking to localhost
    async with http.get(served.base, headers=mixed, cookies=served.cookie) as response:
        assert response.status == 403
    rebinding = {"Host": f"localhost.attacker.example:{served.port}"}
    async with http.get(served.base, headers=rebinding, cookies=served.cookie) as response:
        assert response.status == 403


async def test_served_as_localhost_the_loopback_address_is_admitted_too(
    tmp_path: Path, http: aiohttp.ClientSession
) -> None:
    with serving(tmp_path, "--host", "localhost") as served:
        assert served.url.startswith(f"http://localhost:{served.port}{served.path}?token=")
        for host in (f"localhost:{served.port}", f"127.0.0.1:{served.port}"):
            async with http.get(served.base, headers={"Host": host}, cookies=served.cookie) as response:
                assert response.status == 200, host


# --- start-up (issue 22, item 5) ---------------------------------------------------------------------


def _serve_once(tmp_path: Path, *args: str) -> tuple[int, str, str]:
    run = run_cli_process(
        "serve", "--max-consoles", "1", *args, env=cli_env(tmp_path), cwd=tmp_path, timeout_s=60
    )
    return run.code, run.out, run.err


def test_a_busy_port_is_one_line_and_exit_3_without_a_url(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, out, err = _serve_once(tmp_path, "--port", str(port))
    assert code == 3
    assert out == ""  # no token URL for a server that never listened
    assert err == f"diagnose: cannot listen on 127.0.0.1:{port}: the port is in use (by another server?)\n"


def test_a_host_that_does_not_resolve_is_one_line_and_exit_3_without_a_url(tmp_path: Path) -> None:
    code, out, err = _serve_once(tmp_path, "--host", "no-such-host.invalid", "--port", str(_free_port()))
    assert code == 3
    assert out == ""
    assert err.startswith("diagnose: cannot listen on no-such-host.invalid: the name does not resolve")
    assert err.count("\n") == 1
    assert "Traceback" not in err
