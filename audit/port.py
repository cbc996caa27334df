"""The audit's port: the one store interface every reader and writer of the audit sees.

The sink, the browser, export, replay, the console's audit screen and `diagnose audit` see only
`AuditBackend`, so the embedded SQLite file (`audit.store.AuditStore`) and a team database on
MariaDB/MySQL (`audit.mysql_store.MysqlAuditStore`) serve them alike (docs/architecture.md, "Audit").

SQL reaching a backend is written once, in SQLite's dialect: the statements the sink and browser
spell use `?` placeholders and `INSERT ... ON CONFLICT (...) DO UPDATE SET c = excluded.c`, which the
MariaDB/MySQL backend translates (`audit.mysql_dialect`).
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from datetime import datetime, timedelta
from typing import Any, Protocol

from audit.common import PruneReport


class SqlCursor(Protocol):
    @property
    def rowcount(self) -> int: ...


class SqlConnection(Protocol):
    """What a write transaction offers: one statement at a time, its changed-row count back."""

    def execute(self, sql: str, parameters: tuple[Any, ...], /) -> SqlCursor: ...


class WriteScope(Protocol):
    """Yielded by `AuditBackend.write()`: statements on `conn` commit together when the block ends."""

    @property
    def conn(self) -> SqlConnection: ...


class AuditBackend(Protocol):
    """An open audit: transactions for the sink, queries for the browser, maintenance for the CLI."""

    has_fts: bool  # a text index exists: SQLite's FTS5 trigram tables, or the server's trigram words
    has_trigram_words: bool  # the index is the server's (audit.mysql_text_index), not FTS5

    @property
    def location(self) -> str:
        """Where the rows are, for people (a file path or a URL without secrets)."""
        ...

    def write(self) -> AbstractContextManager[WriteScope]:
        """One committed transaction, queued writes first; failures raise `AuditStoreError`."""
        ...

    def defer(
        self,
        sql: str,
        params: tuple[Any, ...],
        *,
        must_match_one: str | None = None,
        run_id: str | None = None,
    ) -> None:
        """Queue a write that rides in the next `write()` transaction; `run_id`: the run it belongs to."""
        ...

    def flush(self) -> None: ...

    def read(self) -> AbstractContextManager[object]:
        """Several queries over one consistent snapshot."""
        ...

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]: ...

    def recover(self) -> list[str]:
        """Close what crashed writers left open; returns the run IDs it closed."""
        ...

    def hold_lease(self, run_id: str) -> None:
        """Inside the transaction recording a run's start: mark it live for recovery on other hosts."""
        ...

    def keep_lease(self, run_id: str) -> None:
        """Inside a transaction writing a leased run's rows: the lease must still be this process's
        (recovery elsewhere has not closed the run), else `AuditLeaseLost`; it is renewed."""
        ...

    def release_lease(self, run_id: str) -> None:
        """Inside the transaction recording a run's end."""
        ...

    @property
    def open_warnings(self) -> tuple[str, ...]:
        """What opening the audit could not check, one line each, for the operator to read."""
        ...

    def prune(self, older_than: timedelta, *, now: datetime | None = None) -> PruneReport:
        """Delete the runs finished before `now - older_than` (`now`: the time a preview was counted at)."""
        ...

    def vacuum(self) -> None: ...

    def get_run(self, run_id: str) -> dict[str, Any] | None: ...

    def list_runs(self, limit: int = 50) -> list[dict[str, Any]]: ...

    def list_invocations(self, run_id: str) -> list[dict[str, Any]]: ...

    def list_model_rounds(self, run_id: str) -> list[dict[str, Any]]: ...

    def list_protocol_events(self, run_id: str) -> list[dict[str, Any]]: ...

    def close(self) -> None: ...

    def __enter__(self) -> AuditBackend: ...

    def __exit__(self, *exc_info: object) -> None: ...
