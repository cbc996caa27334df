"""Start `llama-server` on 127.0.0.1 with a shipped model and our chat template, and wait until it serves.

Only the loopback address: the server has no API key, and the console is its only client. A port
already taken is refused before anything starts (llama.cpp would otherwise fail late, or a second
server would answer). The server's own output goes to a log file in the cache folder; if it exits
before `/health` answers 200, the error quotes the log's last lines, made safe for a terminal.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from console.model_server.fetch import ModelServerError
from console.safe_text import neutralize
from tools.file_trust import fresh_file, private_folder
from tools.outbound_http import HttpBounds, bounded_client

HOST = "127.0.0.1"
CONTEXT_TOKENS = 8192


@dataclass(frozen=True)
class ServerSpec:
    binary: Path
    model: Path
    template: Path
    served_name: str
    port: int
    threads: int
    log: Path

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self.port}/v1"

    def command(self) -> list[str]:
        return [
            str(self.binary),
            "-m", str(self.model),
            "--alias", self.served_name,
            "--host", HOST,
            "--port", str(self.port),
            "-t", str(self.threads),
            "-np", "1",
            "-c", str(CONTEXT_TOKENS),
            "--jinja",
            "--chat-template-file", str(self.template),
        ]  # fmt: skip


def port_is_free(port: int) -> bool:
    """No one listens on it (connections of an earlier server still closing, TIME_WAIT, do not count)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((HOST, port))
        except OSError:
            return False
    return True


def start_server(spec: ServerSpec, ready_within_s: float = 300.0) -> subprocess.Popen[bytes]:
    """The running server, answering `/health`; never a half-started one."""
    if not port_is_free(spec.port):
        raise ModelServerError(f"port {spec.port} on {HOST} is in use: pass --port with a free one")
    env = dict(os.environ)
    # A build in the cache keeps its shared libraries next to the binary.
    libs = str(spec.binary.parent)
    env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (libs, env.get("LD_LIBRARY_PATH")) if p)
    private_folder(spec.log.parent)
    log = fresh_file(spec.log)  # never through a link planted at the log's name
    try:
        proc = subprocess.Popen(spec.command(), stdout=log, stderr=subprocess.STDOUT, env=env)  # noqa: S603 - our argument list, no shell
    finally:
        os.close(log)
    deadline = time.monotonic() + ready_within_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise ModelServerError(f"llama-server exited with code {proc.returncode}: {_log_tail(spec.log)}")
        if _healthy(spec.port):
            return proc
        time.sleep(0.5)
    stop_server(proc)
    raise ModelServerError(
        f"llama-server did not answer within {ready_within_s:.0f} s: {_log_tail(spec.log)}"
    )


def stop_server(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


_HEALTH = HttpBounds(max_body_bytes=64 * 1024, deadline_s=2.0, connect_timeout_s=2.0)


def _healthy(port: int) -> bool:
    async def ask() -> int:
        async with bounded_client(f"http://{HOST}:{port}", _HEALTH) as client:
            return (await client.get("/health")).status_code

    try:
        return asyncio.run(ask()) == 200
    except httpx.HTTPError:  # the bounded client's refusals included
        return False


def _log_tail(log: Path, lines: int = 3) -> str:
    try:
        text = log.read_bytes()[-4096:].decode("utf-8", errors="replace")
    except OSError:
        return "(no log)"
    tail = [line.strip() for line in text.splitlines() if line.strip()][-lines:]
    return neutralize(" | ".join(tail), newlines=False) or "(empty log)"
