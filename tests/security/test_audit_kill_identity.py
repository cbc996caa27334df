"""The team-audit writer KILLs its cut connection only on the server that held it
(docs/RELIABILITY.md, "Threat model").

Behind a fail-over address the reconnect may reach another server, where the old thread id is
another client's session. Two private MariaDB servers started together (so their uptimes agree, as a
cluster's members' may) sit behind one TCP proxy; the writer's flow to the first is cut, the proxy
now leads to the second, and a bystander there holds the writer's old thread id. The writer tells
the servers apart by `@@server_id`, `@@hostname` and `@@port` (MariaDB has no `@@server_uuid`) and
leaves the bystander alone.

Private servers on an empty data folder without grant tables: they start in well under a second,
need no installation, and let any local client in; they are stopped by their PIDs.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pymysql
import pytest

from audit.location import MysqlLocation
from audit.mysql.store import MysqlAuditStore
from tests.support.mysql import closed_port
from tests.support.resilience import MARIADBD
from tests.support.tcp_proxy import TcpProxy

pytestmark = pytest.mark.skipif(shutil.which(MARIADBD) is None, reason="needs mariadbd")


def connect(port: int) -> pymysql.connections.Connection:
    return pymysql.connect(host="127.0.0.1", port=port, user="root", connect_timeout=2)


def start_server(folder: Path, server_id: int) -> tuple[subprocess.Popen[bytes], int]:
    data = folder / f"data-{server_id}"
    data.mkdir()
    port = closed_port()
    process = subprocess.Popen(
        [
            MARIADBD,
            "--no-defaults",
            "--user=root",
            f"--datadir={data}",
            f"--port={port}",
            "--bind-address=127.0.0.1",
            f"--socket={folder / f'{server_id}.sock'}",
            f"--pid-file={folder / f'{server_id}.pid'}",
            f"--log-error={folder / f'{server_id}.err'}",
            f"--server-id={server_id}",
            "--skip-grant-tables",
            "--innodb-buffer-pool-size=16M",
            "--innodb-log-file-size=4M",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return process, port


def wait_until_serving(port: int, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            connect(port).close()
            return
        except pymysql.err.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


@pytest.fixture
def two_servers(tmp_path: Path) -> Iterator[tuple[int, int]]:
    started = [start_server(tmp_path, server_id) for server_id in (1, 2)]
    try:
        for _, port in started:
            wait_until_serving(port)
            with connect(port) as conn, conn.cursor() as cursor:
                cursor.execute("CREATE DATABASE team_audit")
        yield started[0][1], started[1][1]
    finally:
        for process, _ in started:
            process.terminate()
        for process, _ in started:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def test_a_reconnect_that_reaches_another_server_kills_nobody_there(two_servers: tuple[int, int]) -> None:
    first, second = two_servers
    with TcpProxy("127.0.0.1", first) as proxy:
        location = MysqlLocation("127.0.0.1", proxy.port, "root", "team_audit")
        store = MysqlAuditStore(location, retry_deadline_s=6.0, read_timeout_s=0.5, connect_timeout_s=2.0)
        try:
            store.query("SELECT 1")
            writer = store._conn.thread_id()
            # The bystander on the second server gets the writer's thread id (ids count up from 1).
            bystanders = [connect(second)]
            while bystanders[-1].thread_id() < writer:
                bystanders.append(connect(second))
            bystander = bystanders[-1]
            assert bystander.thread_id() == writer
            # The flow is cut without a word, and the address now leads to the second server.
            proxy.retarget("127.0.0.1", second)
            proxy.freeze()
            store.query("SELECT 1")
            assert store._conn is not None
            assert store._conn.thread_id() != writer
            with bystander.cursor() as cursor:
                cursor.execute("SELECT 1")
                assert cursor.fetchone() == (1,)
            for conn in bystanders:
                conn.close()
        finally:
            store.close()
