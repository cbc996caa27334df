"""`diagnose serve`: the same console in a web browser, through textual-serve.

Every browser session starts its own `diagnose console` process (its own session and runs, one shared
audit file). That process runs the agent with the operator's credentials, so the server admits only
the operator's own browser tab, on a shared laptop too:

- **Host and Origin.** A request whose `Host` is not the served address is refused (a DNS-rebinding
  page reaches 127.0.0.1 under its own name), and so is one whose `Origin` is not the origin of the
  address it came to; a WebSocket upgrade must carry that origin (any web page may open a WebSocket
  to 127.0.0.1). Served on a loopback address, `localhost:PORT` is that address too, as browsers and
  the README write it; the page then builds its WebSocket URL from the name it was loaded under.
- **Access token, kept to this server.** A random token is minted at every start and printed with the
  URL, as Jupyter does. The first visit with it sets an HttpOnly, SameSite=Strict cookie and redirects
  to the bare URL; every request (page, static files, WebSocket) needs the cookie or the token. Cookies
  ignore ports, so a cookie for `/` would reach every other server on 127.0.0.1 the browser visits
  (which could then drive the console with it). So every route lives under a random path minted at
  each start (`http://127.0.0.1:8000/<prefix>/?token=...`) and the cookie is scoped to that path:
  the browser sends it to no other path, whatever the port.
- **Console cap.** At most `max_consoles` console processes run at once; past that, the page says the
  console is full and the WebSocket upgrade is refused (503), rather than forking without limit.
- **Start-up.** The URL is printed only once the socket listens: a busy port or a host that does not
  resolve is one line and exit 3 (`SetupError`), never a URL followed by a traceback.

The guards are aiohttp middleware around textual-serve's own application (its `_make_app`, mounted
under the prefix), not a fork of it. The page itself is textual-serve's, with two changes
(`console/serve_page/app_index.html`): its font comes from textual-serve's static folder on this server
rather than from a font service on the internet (no request leaves for a third party, and the page
works where the internet is out of reach), and the terminal takes the keyboard focus with its first
frame, so the first keys typed reach the console without a click.

It binds to 127.0.0.1 unless told otherwise; behind a proxy,
`--public-url` names the address the browser uses, whose Host and Origin are then admitted too.
"""

from __future__ import annotations

import contextlib
import hmac
import html
import ipaddress
import secrets
import shlex
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from urllib.parse import urlsplit

from aiohttp import web
from textual_serve.server import Server

from console.presentation import counted

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
TOKEN_PARAM = "token"  # noqa: S105 - the query parameter's name
PAGE_FOLDER = Path(__file__).with_name("serve_page")  # the page template (textual-serve's, made local)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def console_command(config: Path | None) -> str:
    """The shell command textual-serve runs per session: this interpreter, so a venv install works."""
    parts = [sys.executable, "-m", "console", "console"]
    if config is not None:
        parts += ["--config", str(config.resolve())]
    return shlex.join(parts)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def authority(host: str, port: int) -> str:
    """`host:port` as a browser sends it in `Host` (IPv6 literals in brackets)."""
    try:
        if ipaddress.ip_address(host).version == 6:
            return f"[{host}]:{port}"
    except ValueError:
        pass
    return f"{host}:{port}"


def _page(status: int, title: str, text: str) -> web.Response:
    body = (
        "<!doctype html><html><head><meta charset='utf-8'><title>diagnose</title></head>"
        f"<body style='font-family: sans-serif; margin: 3em'><h1>{html.escape(title)}</h1>"
        f"<p>{html.escape(text)}</p></body></html>"
    )
    return web.Response(status=status, text=body, content_type="text/html")


class GuardedServer(Server):
    """textual-serve's server under a per-start path, with Host/Origin checks, a per-start access token
    and a console cap."""

    def __init__(
        self,
        command: str,
        host: str,
        port: int,
        max_consoles: int,
        token: str | None = None,
        public_url: str | None = None,
    ) -> None:
        """`public_url`: the address the browser uses when a proxy stands in front (its origin is then
        the one admitted); by default the served address itself."""
        served = authority(host, port)
        public = urlsplit(public_url) if public_url else None
        self.origin = f"{public.scheme}://{public.netloc}" if public else f"http://{served}"
        # Host header -> the origin a page loaded under it has.
        self.origins = {served: f"http://{served}"}
        if public is not None:
            self.origins[public.netloc] = self.origin
        if is_loopback(host):
            aliases = ["localhost"] + (["127.0.0.1", "::1"] if host == "localhost" else [])
            for name in aliases:
                self.origins.setdefault(authority(name, port), f"http://{authority(name, port)}")
        super().__init__(
            command=command,
            host=host,
            port=port,
            title="diagnose",
            public_url=self.origin,
            templates_path=PAGE_FOLDER,
        )
        self.token = token or secrets.token_urlsafe(32)
        self.base_path = f"/{secrets.token_hex(16)}/"
        self.max_consoles = max_consoles
        self.active_consoles = 0
        self.cookie = f"diagnose_token_{port}"

    @property
    def url(self) -> str:
        """What the operator opens: the served address, this start's path and its token."""
        return f"{self.origin}{self.base_path}?{TOKEN_PARAM}={self.token}"

    async def _make_app(self) -> web.Application:
        console = await super()._make_app()
        root = web.Application(middlewares=[self._guard])
        root.add_subapp(self.base_path, console)
        return root

    def initialize_logging(self) -> None:
        """textual-serve logs every request with Rich to the terminal; only warnings are worth showing."""
        super().initialize_logging()
        import logging

        logging.getLogger("textual-serve").setLevel(logging.WARNING)
        logging.getLogger("aiohttp.access").setLevel(logging.WARNING)

    async def on_startup(self, app: web.Application) -> None:
        """Nothing: the URL is printed once the socket listens (`run`), not before."""

    async def run(self) -> None:
        """Listen, then print the URL, then serve until SIGINT or SIGTERM.

        `SetupError` when the address cannot be listened on (a busy port, a host that does not
        resolve): one line for the operator, and no URL was printed."""
        import asyncio
        import signal

        from console.errors import SetupError

        self.initialize_logging()
        runner = web.AppRunner(await self._make_app(), handle_signals=False, shutdown_timeout=2.0)
        await runner.setup()
        try:
            try:
                await web.TCPSite(runner, self.host, self.port).start()
            except OSError as exc:
                raise SetupError(_listen_failure(self.host, self.port, exc)) from None
            stopped = asyncio.Event()
            loop = asyncio.get_running_loop()
            for signum in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(signum, stopped.set)
            self._announce()
            await stopped.wait()
        finally:
            await runner.cleanup()

    def _announce(self) -> None:
        if not is_loopback(self.host):
            print(
                f"diagnose serve: listening on {self.host}: anyone who can reach it and has the token can "
                "run the agent; put it behind authentication",
                file=sys.stderr,
                flush=True,
            )
        print(f"diagnose serve: open {self.url}", flush=True)
        print(
            f"diagnose serve: at most {counted(self.max_consoles, 'console session')} at once; Ctrl+C stops",
            flush=True,
        )

    def _has_token(self, request: web.Request) -> bool:
        presented = request.cookies.get(self.cookie) or request.query.get(TOKEN_PARAM) or ""
        return hmac.compare_digest(presented.encode(), self.token.encode())

    @web.middleware
    async def _guard(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        expected_origin = self.origins.get(request.headers.get("Host", ""))
        if expected_origin is None:
            return _page(403, "Wrong address", f"This console only answers at {self.origin}.")
        origin = request.headers.get("Origin")
        upgrade = request.headers.get("Upgrade", "").lower() == "websocket"
        if (origin is not None or upgrade) and origin != expected_origin:
            return _page(
                403, "Cross-site request refused", f"Only pages of {expected_origin} may use this console."
            )
        if not request.path.startswith(self.base_path):
            return _page(
                404,
                "Not here",
                "Open the URL that `diagnose serve` printed when it started (it changes at every start).",
            )
        if not self._has_token(request):
            return _page(
                403,
                "Access token needed",
                "Open the URL with the access token that `diagnose serve` printed when it started.",
            )
        if request.path == self.base_path and TOKEN_PARAM in request.query:
            # First visit: keep the token in an HttpOnly cookie and out of the address bar and history.
            # The cookie's path is this start's prefix: browsers send it to no other server's pages.
            response = web.Response(status=303, headers={"Location": self.base_path})
            secure = expected_origin.startswith("https:")
            response.set_cookie(
                self.cookie, self.token, httponly=True, samesite="Strict", path=self.base_path, secure=secure
            )
            return response
        if request.path == self.base_path and self.active_consoles >= self.max_consoles:
            return _page(
                503,
                "The console is full",
                f"{counted(self.max_consoles, 'console session')} open, the most this server allows. "
                "Close one of them (its browser tab) and reload this page.",
            )
        return await handler(request)

    async def handle_index(self, request: web.Request) -> web.StreamResponse:
        """textual-serve's page, with its static and WebSocket URLs on the origin the page was loaded
        from (`localhost` or `127.0.0.1`: the cookie of one is not sent to the other)."""
        import aiohttp_jinja2

        origin = self.origins[request.headers["Host"]]
        router = request.app.router
        websocket = f"{origin}{router['websocket'].url_for()}"
        context = {
            "font_size": _font_size(request.query.get("fontsize", "16")),
            "app_websocket_url": ("wss:" if origin.startswith("https:") else "ws:")
            + websocket.split(":", 1)[1],
            "config": {
                "static": {"url": f"{origin}{router['static'].url_for(filename='/')}".rstrip("/") + "/"}
            },
            "application": {"name": self.title},
        }
        return aiohttp_jinja2.render_template("app_index.html", request, context)

    async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
        """One console process per WebSocket, at most `max_consoles` at once (checked before any await)."""
        if self.active_consoles >= self.max_consoles:
            raise web.HTTPServiceUnavailable(text="the console is full: close another session first")
        self.active_consoles += 1
        try:
            response: web.WebSocketResponse = await super().handle_websocket(request)
            return response
        finally:
            self.active_consoles -= 1


def _listen_failure(host: str, port: int, exc: OSError) -> str:
    """One line saying why the address cannot be served (aiohttp's own text repeats the address)."""
    import errno
    import os
    import socket

    if isinstance(exc, socket.gaierror):
        return f"cannot listen on {host}: the name does not resolve ({exc.strerror or exc})"
    if exc.errno == errno.EADDRINUSE:
        return f"cannot listen on {authority(host, port)}: the port is in use (by another server?)"
    reason = os.strerror(exc.errno) if exc.errno else str(exc)
    return f"cannot listen on {authority(host, port)}: {reason}"


def _font_size(value: str) -> int:
    return int(value) if value.isascii() and value.isdigit() and 6 <= int(value) <= 64 else 16


def serve(
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    config: Path | None = None,
    max_consoles: int | None = None,
    public_url: str | None = None,
) -> int:
    import asyncio

    from agent.settings import load_settings
    from console.errors import SetupError

    if max_consoles is None:
        max_consoles = load_settings(config).serve.max_consoles
    if public_url is not None:
        parts = urlsplit(public_url)
        if parts.scheme not in ("http", "https") or not parts.netloc or parts.path not in ("", "/"):
            raise SetupError(f"--public-url must look like https://console.example.com, not {public_url!r}")
    server = GuardedServer(
        console_command(config), host=host, port=port, max_consoles=max_consoles, public_url=public_url
    )
    # Ctrl+C before the server listened: nothing to clean up but the loop.
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(server.run())
    return 0
