"""A private `mariadbd` for tests that need what the shared server has switched off.

The shared MariaDB runs with performance_schema off (it costs memory on every server of the suite), so
performance_schema, the sys views over it and the slow query log table are tested on a server of our
own: a fresh data directory made by `mariadb-install-db`, another port, started as a child process and
stopped by its PID (SIGTERM, then SIGKILL), its directory removed. One per test module: it takes a few
seconds to create.
"""

from __future__ import annotations

import getpass
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pymysql
import pytest

from tests.support.mysql import MYSQL_HOST, closed_port

MARIADBD = "/usr/sbin/mariadbd"
INSTALL_DB = shutil.which("mariadb-install-db") or "/usr/bin/mariadb-install-db"
_START_TIMEOUT_S = 30.0
_STOP_TIMEOUT_S = 20.0


@dataclass
class PrivateMariaDB:
    folder: Path
    port: int
    process: subprocess.Popen[bytes]

    def connect(
        self, user: str = "root", password: str = "", database: str | None = None, read_timeout: float = 60
    ) -> pymysql.connections.Connection:
        return pymysql.connect(
            host=MYSQL_HOST,
            port=self.port,
            user=user,
            password=password,
            database=database,
            connect_timeout=3,
            read_timeout=read_timeout,
            autocommit=True,
            charset="utf8mb4",
        )

    def dsn(self, user: str = "root", database: str | None = None) -> str:
        return f"mysql://{user}@{MYSQL_HOST}:{self.port}" + ("" if database is None else f"/{database}")

    def admin(self, *statements: str) -> list[tuple[object, ...]]:
        """Run statements as root; the rows of the last one."""
        rows: list[tuple[object, ...]] = []
        with self.connect() as conn, conn.cursor() as cur:
            for statement in statements:
                cur.execute(statement)
                rows = list(cur.fetchall())
        return rows


def start_private_mariadb(folder: Path, options: Sequence[str] = ()) -> PrivateMariaDB:
    """Create a data directory in `folder` and start a server on a free port (skip when the binaries
    are missing, as on a machine without MariaDB)."""
    if not (os.access(MARIADBD, os.X_OK) and os.access(INSTALL_DB, os.X_OK)):
        pytest.skip("mariadbd and mariadb-install-db are needed for a private server")
    datadir = folder / "data"
    user = getpass.getuser()
    subprocess.run(
        [INSTALL_DB, "--no-defaults", f"--datadir={datadir}", f"--user={user}",
         "--auth-root-authentication-method=normal", "--skip-test-db"],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    port = closed_port()
    process = subprocess.Popen(
        [MARIADBD, "--no-defaults", f"--datadir={datadir}", f"--user={user}", f"--port={port}",
         f"--socket={folder / 'mariadbd.sock'}", f"--pid-file={folder / 'mariadbd.pid'}",
         f"--log-error={folder / 'error.log'}", "--bind-address=127.0.0.1", "--skip-name-resolve",
         "--innodb-buffer-pool-size=16M", *options],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    server = PrivateMariaDB(folder, port, process)
    deadline = time.monotonic() + _START_TIMEOUT_S
    while True:
        try:
            server.admin("SELECT 1")
            return server
        except pymysql.err.MySQLError:
            if process.poll() is not None or time.monotonic() > deadline:
                stop_private_mariadb(server)
                log = (folder / "error.log").read_text(encoding="utf-8", errors="replace")[-2000:]
                raise RuntimeError(f"the private mariadbd did not start:\n{log}") from None
            time.sleep(0.1)


def stop_private_mariadb(server: PrivateMariaDB) -> None:
    """Stop our server by its PID and remove its data directory."""
    if server.process.poll() is None:
        os.kill(server.process.pid, signal.SIGTERM)
        try:
            server.process.wait(timeout=_STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.kill(server.process.pid, signal.SIGKILL)
            server.process.wait(timeout=_STOP_TIMEOUT_S)
    shutil.rmtree(server.folder / "data", ignore_errors=True)
