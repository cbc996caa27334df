"""What both audit stores do alike, written once: the queue of deferred writes, flush and close, and
the prune loop (docs/contracts.md, "Audit").

A store subclasses `AuditStoreBase` and supplies its transactions (`write`), one prune batch and how
it lets its connection go; the queue's promises then hold for both: a queued row rides in the next
`write()` transaction, stays queued (ahead of newer rows) when that transaction fails, and is applied
before any read of the same store.
"""

from __future__ import annotations

import logging
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Self

from audit.common import AuditStoreError, PruneReport, audit_timestamp
from audit.port import SqlConnection

log = logging.getLogger(__name__)

# Runs deleted per prune transaction: each stays short while runs keep writing.
PRUNE_BATCH = 500
# A pruned run's rows, children first (the run row goes last).
PRUNED_TABLES = ("invocations", "model_rounds", "protocol_events", "runs")


@dataclass(frozen=True)
class QueuedWrite:
    """A write waiting for the next transaction (`defer`), and the run it belongs to."""

    sql: str
    params: tuple[Any, ...]
    must_match_one: str | None
    run_id: str | None


class AuditStoreBase(ABC):
    """The write queue, flush/close and prune of an audit store (`audit.port.AuditStore`)."""

    def __init__(self) -> None:
        # The console may write from a run worker while the UI thread reads: one connection, one lock.
        self._lock = threading.RLock()
        self._deferred: list[QueuedWrite] = []

    # --- what each store supplies ---------------------------------------------------------------------

    @abstractmethod
    def write(self) -> AbstractContextManager[Any]:
        """One committed transaction, queued writes first (`_apply_queue`)."""

    @abstractmethod
    def _in_transaction(self) -> bool:
        """A write is open on this store's connection: queued rows ride in it, not in one of their own."""

    @abstractmethod
    def _prune_batch(self, cutoff: str, limit: int) -> dict[str, int] | None:
        """Delete up to `limit` runs finished before `cutoff` with their rows, in one committed
        transaction; the rows deleted per table, or None when no such run is left."""

    @abstractmethod
    def _release(self) -> None:
        """Let the connection (and whatever else the store holds open) go, once and for good."""

    def _run_closed_elsewhere(self, run_id: str | None) -> bool:
        """The run's rows are no longer this store's to write (a team audit's lost lease)."""
        return False

    @contextmanager
    def _pruning(self) -> Iterator[None]:
        """Around the prune loop: what the store needs for maintenance."""
        yield

    # --- the write queue ----------------------------------------------------------------------------

    def defer(
        self,
        sql: str,
        params: tuple[Any, ...],
        *,
        must_match_one: str | None = None,
        run_id: str | None = None,
    ) -> None:
        """Queue a write that needs no commit of its own: it rides in the next `write()` transaction.

        Run events that prove nothing on their own (round rows, finishes, protocol rows) are written
        this way, so a run commits once per tool call instead of once per event. Every read and
        `close()` applies the queue first, so this store never reads around it. If `must_match_one`
        is given, the statement must change exactly one row, else the commit fails with that message.
        `run_id` names the run the row belongs to.
        """
        with self._lock:
            if not self._run_closed_elsewhere(run_id):
                self._deferred.append(QueuedWrite(sql, params, must_match_one, run_id))

    @property
    def deferred_writes(self) -> int:
        """How many queued writes wait for the next commit."""
        return len(self._deferred)

    def _take_queue(self) -> list[QueuedWrite]:
        """The queued writes, for the transaction starting now (`_requeue` them if it fails)."""
        pending, self._deferred = self._deferred, []
        return pending

    def _apply_queue(self, conn: SqlConnection, pending: list[QueuedWrite]) -> None:
        for queued in pending:
            if self._run_closed_elsewhere(queued.run_id):
                continue
            if conn.execute(queued.sql, queued.params).rowcount != 1 and queued.must_match_one is not None:
                raise AuditStoreError(queued.must_match_one)

    def _requeue(self, pending: list[QueuedWrite]) -> None:
        """After a rolled-back transaction: its queued rows stay queued, ahead of anything queued since,
        so a failure met by a reader's flush is met again by the run's next write, which then stops the
        run; no row is dropped silently (but those of a run closed elsewhere: it is closed)."""
        self._deferred[:0] = [queued for queued in pending if not self._run_closed_elsewhere(queued.run_id)]

    def flush(self) -> None:
        """Commit the queued writes now (no-op when there are none, or inside a write)."""
        with self._lock:
            if self._deferred and not self._in_transaction():
                with self.write():
                    pass

    def close(self) -> None:
        with self._lock:
            try:
                self.flush()
            except AuditStoreError as exc:
                # Only rows of a run that never finished can be queued here; say so, then close anyway.
                log.warning("audit rows queued for commit were lost on close: %s", exc)
            finally:
                self._release()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # --- maintenance --------------------------------------------------------------------------------

    def prune(self, older_than: timedelta, *, now: datetime | None = None) -> PruneReport:
        """Delete runs finished before `now` (default: the current time) - `older_than`, with their
        rounds, invocations and protocol events. A run still going has no finished_at, so it is never
        pruned. Small batches keep each write transaction short while runs keep writing."""
        if older_than < timedelta(0):
            raise ValueError("older_than must not be negative")
        cutoff = audit_timestamp((now or datetime.now(UTC)) - older_than)
        counts = dict.fromkeys(("runs", "model_rounds", "invocations", "protocol_events"), 0)
        with self._pruning():
            while (deleted := self._prune_batch(cutoff, PRUNE_BATCH)) is not None:
                for table, number in deleted.items():
                    counts[table] += number
        return PruneReport(cutoff=cutoff, **counts)
