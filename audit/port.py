"""The audit's port: the one store interface every reader and writer of the audit sees.

The sink, the browser, export, replay, the console's audit screen and `diagnose audit` see only
`AuditStore`, so the embedded SQLite file (`audit.sqlite.store.SqliteAuditStore`) and a team database on
MariaDB/MySQL (`audit.mysql.store.MysqlAuditStore`) serve them alike (docs/contracts.md, "Audit").

SQL reaching a backend is written once, in SQLite's dialect: the statements the sink and browser
spell use `?` placeholders and `INSERT ... ON CONFLICT (...) DO UPDATE SET c = excluded.c`, which the
MariaDB/MySQL backend translates (`audit.mysql.dialect`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
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
    """Yielded by `AuditStore.write()`: statements on `conn` commit together when the block ends."""

    @property
    def conn(self) -> SqlConnection: ...


class TextSearch(Protocol):
    """A store's own text index: how a finished run's rows enter it, and how a search reads it.

    The sink, the copy and recovery fill it; the browser asks it which terms it answers and how it
    narrows a table to their rows, then checks every term with LIKE on top (`audit.browse`). The
    rows of runs still pending (not indexed yet) are always among the candidates.
    """

    def index_runs(self, conn: SqlConnection, run_ids: Iterable[str]) -> None:
        """Index the rows of these runs if they are still pending, and clear their mark, inside the
        caller's transaction (once a run can write no more indexed text)."""
        ...

    def indexed_terms(self, terms: Sequence[str]) -> list[str]:
        """The terms whose every matching row the index finds; the others are left to the walk."""
        ...

    def term_clauses(self, table: str, terms: Sequence[str]) -> list[tuple[str, list[Any]]]:
        """Per indexed term, a WHERE clause (and its parameters) keeping the index's candidates."""
        ...

    def candidates(
        self, table: str, terms: Sequence[str], rarest: Callable[[Sequence[str]], str]
    ) -> tuple[str, list[Any]] | None:
        """A FROM item (and its parameters) that reads only the candidates of one indexed term, picked
        by `rarest` when it matters; None: the index narrows by `term_clauses` instead."""
        ...


class AuditStore(Protocol):
    """An open audit: transactions for the sink, queries for the browser, maintenance for the CLI."""

    text_search: TextSearch  # the store's text index (SQLite's FTS5 tables, or the server's trigram words)

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

    def close(self) -> None: ...

    def __enter__(self) -> AuditStore: ...

    def __exit__(self, *exc_info: object) -> None: ...
