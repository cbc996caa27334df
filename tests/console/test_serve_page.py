"""The page `diagnose serve` gives the browser (issue 22, item 12): nothing loads from the internet,
its font comes from this server, and the terminal takes the keyboard focus with its first frame.

The server's real aiohttp application (guards included) answers real HTTP requests in-process; no
console process is started (the page is served before any WebSocket opens one). The browser test
(`test_serve_browser.py`) drives the focus for real where Chromium is installed.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from html.parser import HTMLParser
from urllib.parse import urljoin, urlsplit

import aiohttp
import pytest
from aiohttp.test_utils import TestServer

from console.commands.web_server import GuardedServer
from tests.support.mysql import closed_port


class Resources(HTMLParser):
    """Every URL the page makes the browser fetch: stylesheets, scripts, images, and CSS `url(...)`."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []
        self.scripts: list[str] = []
        self._in: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if tag == "link" and values.get("href"):
            self.urls.append(str(values["href"]))
        if tag in ("script", "img", "iframe") and values.get("src"):
            self.urls.append(str(values["src"]))
        self._in = tag

    def handle_endtag(self, tag: str) -> None:
        self._in = None

    def handle_data(self, data: str) -> None:
        if self._in == "style":
            self.urls += re.findall(r"url\(\s*['\"]?([^'\")]+)", data)
            self.urls += re.findall(r"@import\s+['\"]([^'\"]+)", data)
        if self._in == "script":
            self.scripts.append(data)


@pytest.fixture
async def served() -> AsyncIterator[tuple[GuardedServer, aiohttp.ClientSession]]:
    port = closed_port()
    server = GuardedServer("true", host="127.0.0.1", port=port, max_consoles=1)
    test_server = TestServer(await server._make_app(), host="127.0.0.1", port=port)
    await test_server.start_server()
    try:
        async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as session:  # an IP host
            yield server, session
    finally:
        await test_server.close()


async def test_the_page_fetches_nothing_from_another_host(
    served: tuple[GuardedServer, aiohttp.ClientSession],
) -> None:
    server, session = served
    async with session.get(server.url) as response:  # the token URL: cookie, then the page
        assert response.status == 200
        page = await response.text()
    resources = Resources()
    resources.feed(page)
    assert resources.urls, "the page loads its stylesheet and script"
    for url in resources.urls:
        absolute = urljoin(server.origin + "/", url)
        assert urlsplit(absolute).netloc == urlsplit(server.origin).netloc, url
        async with session.get(absolute) as fetched:
            assert fetched.status == 200, url  # served here, behind the same guard
    fonts = [url for url in resources.urls if url.endswith((".ttf", ".woff", ".woff2"))]
    assert fonts, "the terminal's font comes from this server"
    assert "googleapis" not in page
    assert "gstatic" not in page


async def test_the_terminal_takes_the_keyboard_focus_with_its_first_frame(
    served: tuple[GuardedServer, aiohttp.ClientSession],
) -> None:
    """textual.js marks the body `-first-byte` when the console's first frame arrives; the page then
    focuses the terminal's input, so keys typed before any click reach the console."""
    server, session = served
    async with session.get(server.url) as response:
        page = await response.text()
    resources = Resources()
    resources.feed(page)
    script = "\n".join(resources.scripts)
    assert "-first-byte" in script
    assert ".focus(" in script
    assert 'querySelector(".textual-terminal textarea")' in script
