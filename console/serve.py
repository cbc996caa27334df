"""`diagnose serve`: the same console in a web browser, through textual-serve.

Every browser session starts its own `diagnose console` process (its own session and runs, one shared
audit file). That process runs the agent with the operator's credentials, so the server admits only
the operator's own browser tab, on a shared laptop too:

- **Host and Origin.** A request whose `Host` is not the served address is refused (a DNS-rebinding
  page reaches 127.0.0.1 under its own name), and so is one whose `Origin` is another site; a WebSocket
  upgrade must carry the served origin (any web page may open a WebSocket to 127.0.0.1).
- **Access token.** A random token is minted at every start and printed with the URL, as Jupyter does
  (`http://127.0.0.1:8000/?token=...`). The first visit with it sets an HttpOnly, SameSite=Strict
  cookie and redirects to the bare URL; every request (page, static files, WebSocket, downloads) needs
  the cookie or the token. Other local users cannot read the token; other sites cannot send the cookie.
- **Console cap.** At most `max_consoles` console processes run at once; past that, the page says the
  console is full and the WebSocket upgrade is refused (503), rather than forking without limit.

The guards are aiohttp middleware added to textual-serve's own application (its `_make_app`), not a
fork of it. The page itself is textual-serve's, with two changes (`console/serve_page/app_index.html`):
its font comes from textual-serve's static folder on this server rather than from a font service on
the internet (no request leaves for a third party, and the page works where the internet is out of
reach), and the terminal takes the keyboard focus with its first frame, so the first keys typed reach
the console without a click.

It binds to 127.0.0.1 unless told otherwise; behind a proxy, `--public-url` names the address the
browser uses, whose Host and Origin are then admitted too.
"""

from __future__ import annotations

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
TOKEN_PARAM = "token"
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
    """textual-serve's server with Host/Origin checks, a per-start access token and a console cap."""

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
        self.hosts = {served, public.netloc} if public else {served}
        super().__init__(
            command=command,
            host=host,
            port=port,
            title="diagnose",
            public_url=self.origin,
            templates_path=PAGE_FOLDER,
        )
        self.token = token or secrets.token_urlsafe(32)
        self.max_consoles = max_consoles
        self.active_consoles = 0
        self.cookie = f"diagnose_token_{port}"  # cookies ignore ports: two servers must not share one

    @property
    def url(self) -> str:
        """What the operator opens: the served address with this start's token."""
        return f"{self.origin}/?{TOKEN_PARAM}={self.token}"

    async def _make_app(self) -> web.Application:
        app = await super()._make_app()
        app.middlewares.append(self._guard)
        return app

    def initialize_logging(self) -> None:
        """textual-serve logs every request with Rich to the terminal; only warnings are worth showing."""
        super().initialize_logging()
        import logging

        logging.getLogger("textual-serve").setLevel(logging.WARNING)
        logging.getLogger("aiohttp.access").setLevel(logging.WARNING)

    async def on_startup(self, app: web.Application) -> None:
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
        if request.headers.get("Host", "") not in self.hosts:
            return _page(403, "Wrong address", f"This console only answers at {self.origin}.")
        origin = request.headers.get("Origin")
        upgrade = request.headers.get("Upgrade", "").lower() == "websocket"
        if (origin is not None or upgrade) and origin != self.origin:
            return _page(
                403, "Cross-site request refused", f"Only pages of {self.origin} may use this console."
            )
        if not self._has_token(request):
            return _page(
                403,
                "Access token needed",
                "Open the URL with the access token that `diagnose serve` printed when it started.",
            )
        if request.path == "/" and TOKEN_PARAM in request.query:
            # First visit: keep the token in an HttpOnly cookie and out of the address bar and history.
            response = web.Response(status=303, headers={"Location": "/"})
            secure = self.origin.startswith("https:")
            response.set_cookie(
                self.cookie, self.token, httponly=True, samesite="Strict", path="/", secure=secure
            )
            return response
        if request.path == "/" and self.active_consoles >= self.max_consoles:
            return _page(
                503,
                "The console is full",
                f"{counted(self.max_consoles, 'console session')} open, the most this server allows. "
                "Close one of them (its browser tab) and reload this page.",
            )
        return await handler(request)

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


def serve(
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    config: Path | None = None,
    max_consoles: int | None = None,
    public_url: str | None = None,
) -> int:
    from agent.settings import ConfigError, load_settings
    from console.errors import SetupError

    if max_consoles is None:
        try:
            max_consoles = load_settings(config).serve.max_consoles
        except ConfigError as exc:
            raise SetupError(str(exc)) from None
    if not is_loopback(host):
        print(
            f"diagnose serve: listening on {host}: anyone who can reach it and has the token can run the "
            "agent; put it behind authentication",
            file=sys.stderr,
        )
    if public_url is not None:
        parts = urlsplit(public_url)
        if parts.scheme not in ("http", "https") or not parts.netloc or parts.path not in ("", "/"):
            raise SetupError(f"--public-url must look like https://console.example.com, not {public_url!r}")
    server = GuardedServer(
        console_command(config), host=host, port=port, max_consoles=max_consoles, public_url=public_url
    )
    server.serve()
    return 0
