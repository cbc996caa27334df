"""A package index on 127.0.0.1 answering the simple API as PyPI documents it (PEP 691 JSON, and the
PEP 503 HTML page for clients that ask for HTML), serving the files a test gives it.

`/simple/<project>/` lists the project's files with their SHA-256; `/files/<name>` serves one. Every
request path is recorded, so a test can show what was (and was not) fetched.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType


class PackageIndex:
    def __init__(self, files: dict[str, dict[str, bytes]], *, html_only: bool = False) -> None:
        """`files`: project name -> {file name: content}; `html_only`: answer PEP 503 pages even to a
        client that asks for JSON, as older mirrors do."""
        self.files = files
        self.html_only = html_only
        self.requested: list[str] = []
        index = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                index.requested.append(self.path)
                body, kind = index.answer(self.path, self.headers.get("Accept", ""))
                self.send_response(200 if body is not None else 404)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body or b"")))
                self.end_headers()
                self.wfile.write(body or b"")

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        ).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/simple"

    def answer(self, path: str, accept: str) -> tuple[bytes | None, str]:
        if match := re.fullmatch(r"/simple/([^/]+)/", path):
            project = {re.sub(r"[-_.]+", "-", p).lower(): p for p in self.files}.get(match[1])
            if project is None:
                return None, "text/plain"
            listed = [
                (name, f"/files/{name}", hashlib.sha256(data).hexdigest())
                for name, data in self.files[project].items()
            ]
            if "application/vnd.pypi.simple.v1+json" in accept and not self.html_only:
                pep691 = [{"filename": n, "url": u, "hashes": {"sha256": h}} for n, u, h in listed]
                body = json.dumps({"meta": {"api-version": "1.0"}, "files": pep691}).encode()
                return body, "application/vnd.pypi.simple.v1+json"
            anchors = "".join(f'<a href="{u}#sha256={h}">{n}</a>' for n, u, h in listed)
            return f"<!DOCTYPE html><html><body>{anchors}</body></html>".encode(), "text/html"
        if match := re.fullmatch(r"/files/([^/]+)", path):
            for project_files in self.files.values():
                if match[1] in project_files:
                    return project_files[match[1]], "application/octet-stream"
        return None, "text/plain"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> PackageIndex:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
