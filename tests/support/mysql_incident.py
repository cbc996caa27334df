"""A real lock-wait incident on a MariaDB server, for the diagnostic surface's tests.

Two sessions of our own: the holder opens a transaction, updates row 1 of `accounts` and then stays
idle in it (a long-running transaction); the waiter updates the same row with a canary literal in its
statement and blocks on the holder's lock (a statement in flight, and a real lock wait). The canary is
what must never reach the model: it exists only in the waiter's statement text.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pymysql

from tools.adapter import AdapterResult

Connect = Callable[..., pymysql.connections.Connection]  # takes read_timeout=
_WAIT_S = 20.0
# The two sessions wait on each other for as long as the tests of a module take.
_SESSION_READ_TIMEOUT_S = 900.0


@dataclass(frozen=True)
class Incident:
    database: str
    holder_thread: int
    waiter_thread: int
    canary: str


@contextmanager
def lock_wait(connect: Connect, database: str) -> Iterator[Incident]:
    """The incident, in progress until the block ends; then both transactions roll back."""
    canary = f"CANARY-{secrets.token_hex(6)}"
    with connect() as admin, admin.cursor() as cur:
        cur.execute(
            f"CREATE TABLE `{database}`.accounts (id INT PRIMARY KEY, email VARCHAR(120)) ENGINE=InnoDB"
        )
        cur.execute(f"INSERT INTO `{database}`.accounts VALUES (1, 'a@example.com'), (2, 'b@example.com')")
    holder, waiter = (
        connect(read_timeout=_SESSION_READ_TIMEOUT_S),
        connect(read_timeout=_SESSION_READ_TIMEOUT_S),
    )
    blocked = threading.Thread(target=_update, args=(waiter, database, canary), daemon=True)
    try:
        with holder.cursor() as cur:
            cur.execute("START TRANSACTION")
            cur.execute(f"UPDATE `{database}`.accounts SET email = 'holder@example.com' WHERE id = 1")
        with waiter.cursor() as cur:
            cur.execute("SET SESSION innodb_lock_wait_timeout = 600")
            cur.execute("START TRANSACTION")
        blocked.start()
        _wait_for_the_lock_wait(connect, waiter.thread_id())
        yield Incident(database, holder.thread_id(), waiter.thread_id(), canary)
    finally:
        holder.rollback()  # the waiter's update then goes through
        blocked.join(timeout=_WAIT_S)
        waiter.rollback()
        holder.close()
        waiter.close()
        with connect() as admin, admin.cursor() as cur:
            cur.execute(f"DROP TABLE IF EXISTS `{database}`.accounts")


def _update(conn: pymysql.connections.Connection, database: str, canary: str) -> None:
    with conn.cursor() as cur:
        cur.execute(f"UPDATE `{database}`.accounts SET email = %s WHERE id = 1", (canary,))


def _wait_for_the_lock_wait(connect: Connect, waiter: int) -> None:
    deadline = time.monotonic() + _WAIT_S
    with connect() as conn, conn.cursor() as cur:
        while time.monotonic() < deadline:
            cur.execute(
                "SELECT COUNT(*) FROM information_schema.INNODB_TRX "
                "WHERE trx_mysql_thread_id = %s AND trx_state = 'LOCK WAIT'",
                (waiter,),
            )
            row = cur.fetchone()
            assert row is not None  # COUNT(*) answers one row
            if row[0]:
                time.sleep(1.1)  # so the holder's transaction is over a second old (TIME, trx age)
                return
            time.sleep(0.05)
    raise RuntimeError("the waiter never blocked on the holder's lock")


def waiting_digest(incident: Incident) -> str:
    """The waiter's statement as query_mysql shows it: its shape, the canary a `?`."""
    return f"UPDATE `{incident.database}`.accounts SET email = ? WHERE id = ?"


def by_column(result: AdapterResult) -> list[dict[str, Any]]:
    """A query_mysql answer's rows as dicts keyed by lower-case column name."""
    columns = [name.lower() for name in result.data["columns"]]
    return [dict(zip(columns, row, strict=True)) for row in result.data["rows"]]
