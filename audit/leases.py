"""Run leases: how a team audit tells a crashed writer's run from a live one on another host.

Process liveness (audit.liveness) only works among the processes of one machine. On a shared server
each running run holds a lease row (`run_leases`) taken in the same transaction as its `runs` row, and
its writer renews it every `heartbeat_s` from a thread of its own, on a connection of its own (a
long tool call or a busy write connection never delays a beat). Expiry is computed with the server's
clock alone, so writers on several hosts never compare their clocks. Recovery closes a run whose
lease is older than `lease_s` as INTERRUPTED; a run whose writer still beats is never touched. A
finished run's lease is deleted in the transaction that records its end.

Keeping the lease costs about 1 ms per tool round on a local MariaDB
(tests/benchmarks/bench_audit_lease.py).
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
from collections.abc import Callable
from typing import Any

from audit.common import AuditStoreError

log = logging.getLogger(__name__)

# PyMySQL placeholders: this runs on the heartbeat's own connection, not through a store transaction.
# `expires_at` = server time + lease; recovery compares it with the server's time too.
RENEW_SQL = (
    "UPDATE run_leases SET expires_at = TIMESTAMPADD(MICROSECOND, %s, UTC_TIMESTAMP(6))"
    " WHERE run_id = %s AND holder = %s"
)
TAKE_SQL = (
    "INSERT INTO run_leases (run_id, holder, expires_at)"
    " VALUES (?, ?, TIMESTAMPADD(MICROSECOND, ?, UTC_TIMESTAMP(6)))"
    " ON CONFLICT (run_id) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at"
)
RELEASE_SQL = "DELETE FROM run_leases WHERE run_id = ?"
# RENEW_SQL inside a store transaction (the audit's SQLite dialect): it must match the lease row.
KEEP_SQL = (
    "UPDATE run_leases SET expires_at = TIMESTAMPADD(MICROSECOND, ?, UTC_TIMESTAMP(6))"
    " WHERE run_id = ? AND holder = ?"
)


class AuditLeaseLost(AuditStoreError):
    """The run's lease is gone: recovery elsewhere closed the run while this writer was away, so the
    run must stop rather than write into a run the audit already shows as interrupted."""


def lease_holder() -> str:
    """Who holds a lease, for people reading the table: host and pid."""
    return f"{socket.gethostname()}:{os.getpid()}"[:255]


class Heartbeat:
    """Renews the leases of the runs this process is writing, every `interval_s`, until closed.

    `connect` opens a fresh autocommit connection (a lost one is replaced at the next beat). A beat
    that fails is logged and tried again at the next one: the lease is several beats long.
    """

    def __init__(self, connect: Callable[[], Any], interval_s: float, lease_s: float) -> None:
        self._connect = connect
        self._interval_s = interval_s
        self._lease_us = int(lease_s * 1_000_000)
        self._holder = lease_holder()
        self._runs: set[str] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._conn: Any = None
        self._thread: threading.Thread | None = None

    @property
    def holder(self) -> str:
        return self._holder

    @property
    def lease_us(self) -> int:
        return self._lease_us

    def hold(self, run_id: str) -> None:
        with self._lock:
            self._runs.add(run_id)
            if self._thread is None:
                self._thread = threading.Thread(target=self._beat, name="audit-lease-heartbeat", daemon=True)
                self._thread.start()

    def release(self, run_id: str) -> None:
        with self._lock:
            self._runs.discard(run_id)

    def holds(self, run_id: str) -> bool:
        with self._lock:
            return run_id in self._runs

    def _beat(self) -> None:
        while not self._stop.wait(self._interval_s):
            with self._lock:
                runs = sorted(self._runs)
            if runs:
                self._renew(runs)

    def _renew(self, runs: list[str]) -> None:
        try:
            if self._conn is None:
                self._conn = self._connect()
            with self._conn.cursor() as cursor:
                for run_id in runs:
                    if cursor.execute(RENEW_SQL, (self._lease_us, run_id, self._holder)) != 1:
                        log.warning("audit lease of run %s was lost (closed by recovery?)", run_id)
        except Exception as exc:  # a beat must never end the thread: the next one tries again
            log.warning("audit lease heartbeat failed: %s", exc)
            self._drop_connection()

    def _drop_connection(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    def close(self) -> None:
        self._stop.set()
        thread = self._thread
        if thread is not None:
            thread.join(timeout=5)
        self._drop_connection()
