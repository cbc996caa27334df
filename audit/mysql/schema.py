"""The audit's tables on MariaDB/MySQL: versioned migrations, run once per database under a lock.

The same tables and columns as the SQLite file at its current version (docs/contracts.md, "Audit"),
so every reader sees the same rows. InnoDB for transactions and row locks; utf8mb4 so any query or
projection is stored as written; `utf8mb4_bin` so text compares and sorts by code point, as SQLite
does, and keyset pages come back in the same order from both stores. Timestamps stay ISO-8601 text,
exactly as the sink writes them. `runs.listed_at` (COALESCE(started_at, finished_at), the runs' page
order) is a stored generated column, INVISIBLE so `SELECT *` returns the file's columns: MariaDB
has no expression indexes, so the column carries the index the file builds on the expression.
The text index is the server's own: trigram words in side tables under FULLTEXT
(`audit.mysql.text_search`, step 2). Two tables exist only here: `run_leases` (a running run's lease,
renewed by its writer, see `audit.mysql.leases`) and `audit_write_tokens` (one row per committed write
transaction, so a retry after a lost connection can tell whether its commit happened).

Migrations: `audit_schema_version` holds the version. Whoever opens the database first takes
`GET_LOCK` on a name derived from the database, reads the version again under the lock and applies
what is missing; DDL commits on its own in MariaDB/MySQL, so every step is idempotent
(`CREATE TABLE IF NOT EXISTS`, indexes inside the table definitions), and a step interrupted halfway
is completed by the next opener. Append-only: never edit a shipped step.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from audit.mysql.text_search import end_marked_words, trigram_tables

_TABLE_OPTIONS = "ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"
# Key columns are bounded so every index fits InnoDB's 3072-byte key limit at 4 bytes a character.
_ID = "VARCHAR(191)"
_STAMP = "VARCHAR(40)"  # ISO-8601 UTC with microseconds, as audit_timestamp writes it
_WORD = "VARCHAR(64)"  # statuses, codes, tool names
MIGRATION_LOCK_TIMEOUT_S = 60
# Browse pages walk these indexes in page order (audit.browse): a page is a range scan, never a sort.
_ORDER = "started_at, run_id, tool_call_id"

Execute = Callable[[str], Any]


def _v1_tables(execute: Execute) -> None:
    """The four audit tables at SQLite schema v5, and the two tables only a server audit needs.

    `runs.fts_pending` means what it means in the file (the run's rows are not in a text index yet);
    the server has no text index of its own yet, so a run's finish only clears it."""
    statuses = "'STARTED', 'FOUND', 'EMPTY', 'ERROR', 'CANCELLED', 'INTERRUPTED'"
    statements = [
        f"""CREATE TABLE IF NOT EXISTS runs (
            run_id {_ID} NOT NULL PRIMARY KEY,
            session_id {_ID} NOT NULL,
            query MEDIUMTEXT,
            outcome {_WORD},
            stop_reason {_WORD},
            started_at {_STAMP},
            finished_at {_STAMP},
            model_calls BIGINT,
            prompt_tokens BIGINT,
            completion_tokens BIGINT,
            total_tokens BIGINT,
            result_json MEDIUMTEXT,
            failure_json MEDIUMTEXT,
            pid BIGINT,
            pid_start VARCHAR(128),
            interrupted TINYINT NOT NULL DEFAULT 0,
            model VARCHAR(255),
            max_model_calls BIGINT,
            max_total_tokens BIGINT,
            deadline_s DOUBLE,
            max_run_bytes BIGINT,
            max_consecutive_no_gain BIGINT,
            max_protocol_violations BIGINT,
            fts_pending TINYINT,
            listed_at {_STAMP} AS (COALESCE(started_at, finished_at)) STORED INVISIBLE,
            KEY idx_runs_listed (listed_at, run_id),
            KEY idx_runs_session_listed (session_id, listed_at, run_id),
            KEY idx_runs_outcome_listed (outcome, listed_at, run_id),
            KEY idx_runs_interrupted_listed (interrupted, listed_at, run_id),
            KEY idx_runs_unfinished (finished_at, run_id)
        ) {_TABLE_OPTIONS}""",
        f"""CREATE TABLE IF NOT EXISTS model_rounds (
            run_id {_ID} NOT NULL,
            round BIGINT NOT NULL,
            started_at {_STAMP},
            finished_at {_STAMP},
            prompt_tokens BIGINT,
            completion_tokens BIGINT,
            tool_call_ids MEDIUMTEXT,
            has_text TINYINT,
            duration_ms BIGINT,
            seq BIGINT,
            usage_estimated TINYINT NOT NULL DEFAULT 0,
            PRIMARY KEY (run_id, round)
        ) {_TABLE_OPTIONS}""",
        f"""CREATE TABLE IF NOT EXISTS invocations (
            run_id {_ID} NOT NULL,
            tool_call_id {_ID} NOT NULL,
            session_id {_ID} NOT NULL,
            tool {_WORD} NOT NULL,
            round BIGINT,
            status {_WORD} NOT NULL CHECK (status IN ({statuses})),
            error_code {_WORD},
            reason VARCHAR(255),
            input_json MEDIUMTEXT,
            projection_json MEDIUMTEXT,
            evaluation {_WORD},
            started_at {_STAMP} NOT NULL,
            finished_at {_STAMP},
            duration_ms BIGINT,
            seq BIGINT,
            input_key MEDIUMTEXT,
            PRIMARY KEY (run_id, tool_call_id),
            KEY idx_invocations_started ({_ORDER}),
            KEY idx_invocations_run (run_id, started_at, tool_call_id),
            KEY idx_invocations_tool_status ({"tool, status, " + _ORDER}),
            KEY idx_invocations_tool ({"tool, " + _ORDER}),
            KEY idx_invocations_status ({"status, " + _ORDER}),
            KEY idx_invocations_error ({"error_code, " + _ORDER}),
            KEY idx_invocations_session ({"session_id, " + _ORDER})
        ) {_TABLE_OPTIONS}""",
        # (run_id, seq) is unique: a protocol event is one event of one run, written once.
        f"""CREATE TABLE IF NOT EXISTS protocol_events (
            id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
            run_id {_ID} NOT NULL,
            tool_call_id {_ID},
            code {_WORD} NOT NULL,
            detail_json MEDIUMTEXT,
            at {_STAMP} NOT NULL,
            seq BIGINT,
            KEY idx_protocol_events_run (run_id, id),
            UNIQUE KEY uq_protocol_events_seq (run_id, seq)
        ) {_TABLE_OPTIONS}""",
        # Server time only: writers on several hosts never compare their own clocks.
        f"""CREATE TABLE IF NOT EXISTS run_leases (
            run_id {_ID} NOT NULL PRIMARY KEY,
            holder VARCHAR(255) NOT NULL,
            expires_at DATETIME(6) NOT NULL,
            KEY idx_run_leases_expires (expires_at)
        ) {_TABLE_OPTIONS}""",
        f"""CREATE TABLE IF NOT EXISTS audit_write_tokens (
            token CHAR(32) NOT NULL PRIMARY KEY,
            at DATETIME(6) NOT NULL,
            KEY idx_audit_write_tokens_at (at)
        ) {_TABLE_OPTIONS}""",
    ]
    for statement in statements:
        execute(statement)


def _v3_pending_index_and_end_marks(execute: Execute) -> None:
    """Step 3. An index on `runs.fts_pending` (the file's is partial): every index-plan search reads
    the pending runs, and without it that was a scan of every run (1.3 s at 357,000 runs). Then the
    runs' query words again with the end mark (`audit.mysql.text_search.end_marked_words`)."""
    present = execute(
        "SELECT 1 FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE()"
        " AND TABLE_NAME = 'runs' AND INDEX_NAME = 'idx_runs_fts_pending'"
    )
    if not present:  # MySQL has no ADD INDEX IF NOT EXISTS
        execute("ALTER TABLE runs ADD INDEX idx_runs_fts_pending (fts_pending)")
    end_marked_words(execute)


MIGRATIONS: list[Callable[[Execute], Any]] = [_v1_tables, trigram_tables, _v3_pending_index_and_end_marks]

# Every table the migrations create (a test keeps this equal to what they create). Anything else in
# the audit database was put there by someone else.
OWN_TABLES = frozenset(
    {
        "audit_schema_version",
        "runs",
        "model_rounds",
        "invocations",
        "protocol_events",
        "run_leases",
        "audit_write_tokens",
        "invocation_trigrams",
        "run_trigrams",
    }
)


# The server refuses SHOW EVENTS to an account without the EVENT privilege on the database.
_ACCESS_DENIED = frozenset({1044, 1142, 1227})


@dataclass(frozen=True)
class ObjectCheck:
    """What `foreign_objects` found that this program did not create, and which kinds of object the
    account could not see at all (so could not check)."""

    found: list[str]
    unseen: list[str]


def foreign_objects(cursor: Any) -> ObjectCheck:
    """What in the audit database this program did not create, described for an error message.

    Read before anything is written (README, "Grants"): a trigger fires on our writes with its
    definer's rights (it could copy every audit row elsewhere, or drop them), a view or an event runs
    whatever it was given, a table we do not know means the URL names a database that is not (only)
    an audit, and a table on another engine than InnoDB loses the transactions the audit relies on.
    The server shows an account only the objects it has some privilege on; the audit account holds no
    TRIGGER grant, so planting one takes another account, and this check is the second line behind
    the grants. Tables, views and triggers are visible with the table grants the account needs; events
    only with the EVENT privilege (information_schema.EVENTS is empty without it, and SHOW EVENTS is
    refused, which is how their absence from view is told from their absence).
    """
    found: list[str] = []
    cursor.execute(
        "SELECT TABLE_NAME, TABLE_TYPE, ENGINE FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE()"
        " ORDER BY TABLE_NAME"
    )
    for name, kind, engine in cursor.fetchall():
        if kind == "VIEW":
            found.append(f"view {name!r}")
        elif name not in OWN_TABLES:
            found.append(f"table {name!r}")
        elif kind != "BASE TABLE" or (engine or "").lower() != "innodb":
            found.append(f"table {name!r} on engine {engine or kind!r} (not InnoDB)")
    cursor.execute(
        "SELECT TRIGGER_NAME, EVENT_OBJECT_TABLE FROM information_schema.TRIGGERS"
        " WHERE TRIGGER_SCHEMA = DATABASE() ORDER BY TRIGGER_NAME"
    )
    found += [f"trigger {name!r} on {table!r}" for name, table in cursor.fetchall()]
    try:
        cursor.execute("SHOW EVENTS")  # the current database's: (Db, Name, ...)
    except Exception as exc:  # the driver's error type: this module takes any DB-API cursor
        if not (exc.args and exc.args[0] in _ACCESS_DENIED):
            raise
        return ObjectCheck(found, unseen=["events"])
    found += [f"event {row[1]!r}" for row in sorted(cursor.fetchall(), key=lambda row: str(row[1]))]
    return ObjectCheck(found, unseen=[])


VERSION_TABLE = (
    "CREATE TABLE IF NOT EXISTS audit_schema_version (id TINYINT NOT NULL PRIMARY KEY, version INT NOT NULL)"
    f" {_TABLE_OPTIONS}"
)


def migration_lock_name(database: str) -> str:
    """One lock per audit database on the server (GET_LOCK names are server-wide, 64 characters)."""
    return f"diagnose-audit-migrate:{database}"[:64]
