"""The system views `query_mysql` may read to diagnose the server itself, and what each one holds.

During an incident an SRE reads other sessions, InnoDB transactions and lock waits, statement digests,
status counters and replication state. Those live in information_schema, performance_schema, sys and
`mysql.slow_log`, next to tables that must never be read (`mysql.user`, `mysql.global_priv`, user
variables of other sessions, stored routine bodies). So the system schemas stay closed, and only the
views named here open, each described by what its columns carry:

- `statement_text`: another session's SQL (or the key of a row it locked), which holds that session's
  literals: a password being set, a customer's e-mail. The adapter shows it only as a digest
  (`tools.mysql.statement_digest`), and the guard lets a statement name it only as a plain result
  column or in `IS [NOT] NULL`, so no WHERE, ORDER BY or function can spell it out by comparison.
- `messages`: server error messages, which quote the values they complain about (`Duplicate entry
  'alice@example.com'`); quoted parts are masked.
- `variables`: a (name, value) view of server variables; the value of a secret-looking variable
  (`SECRET_VARIABLE_PATTERNS`) is hidden inside the statement itself (`variables_view_sql`), so no
  WHERE clause can test it.

MySQL 8 and MariaDB 10.11+ differ (InnoDB lock views moved to performance_schema in MySQL 8; MariaDB
keeps variables in information_schema): a view lists the servers that have it and, for the other one,
the view that answers the same question, which the error names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum


class Flavor(StrEnum):
    """The two server families whose system views differ; the handshake's version string tells them apart."""

    MYSQL = "mysql"
    MARIADB = "mariadb"

    @staticmethod
    def of(server_version: str) -> Flavor:
        return Flavor.MARIADB if "mariadb" in server_version.lower() else Flavor.MYSQL


BOTH = frozenset(Flavor)
MYSQL_ONLY = frozenset({Flavor.MYSQL})
MARIADB_ONLY = frozenset({Flavor.MARIADB})

# The privilege each family of views needs (docs/query-mysql.md, "The monitoring account").
PROCESS = "PROCESS"
PERFORMANCE_SCHEMA = "SELECT on performance_schema"
SYS = "SELECT, EXECUTE on sys (and PROCESS, SELECT on performance_schema)"
SLOW_LOG = "SELECT on mysql.slow_log"
NONE = "none"


@dataclass(frozen=True)
class DiagnosticView:
    schema: str
    name: str  # the server's own spelling, used in the executed statement
    servers: frozenset[Flavor]
    privilege: str
    statement_text: frozenset[str] = frozenset()  # lower-case column names
    messages: frozenset[str] = frozenset()
    variables: tuple[str, ...] = ()  # every column of a (name, value) variables view, value last
    equivalent: str | None = None  # what answers the same question on a server without this view

    @property
    def qualified(self) -> str:
        return f"{self.schema}.{self.name}"


def _views(
    schema: str,
    servers: frozenset[Flavor],
    privilege: str,
    names: str,
    statement_text: frozenset[str] = frozenset(),
    messages: frozenset[str] = frozenset(),
) -> list[DiagnosticView]:
    return [
        DiagnosticView(schema, name, servers, privilege, statement_text, messages) for name in names.split()
    ]


def _text(*columns: str) -> frozenset[str]:
    return frozenset(column.lower() for column in columns)


_IS, _PS, _SYS = "information_schema", "performance_schema", "sys"
_VARIABLE_PAIR = ("VARIABLE_NAME", "VARIABLE_VALUE")
_VIEWS: list[DiagnosticView] = [
    # information_schema: sessions and InnoDB need PROCESS; schema metadata shows what the account may see
    DiagnosticView(_IS, "PROCESSLIST", BOTH, PROCESS, _text("INFO", "INFO_BINARY")),
    DiagnosticView(_IS, "INNODB_TRX", BOTH, PROCESS, _text("trx_query"), _text("trx_last_foreign_key_error")),
    DiagnosticView(_IS, "INNODB_LOCKS", MARIADB_ONLY, PROCESS, _text("lock_data"),
                   equivalent="performance_schema.data_locks"),
    DiagnosticView(_IS, "INNODB_LOCK_WAITS", MARIADB_ONLY, PROCESS,
                   equivalent="performance_schema.data_lock_waits"),
    DiagnosticView(_IS, "METADATA_LOCK_INFO", MARIADB_ONLY, PROCESS,
                   equivalent="performance_schema.metadata_locks"),
    *_views(_IS, BOTH, PROCESS, "INNODB_METRICS INNODB_BUFFER_POOL_STATS"),
    *_views(_IS, BOTH, NONE, "TABLES STATISTICS COLUMNS PARTITIONS SCHEMATA ENGINES TABLE_CONSTRAINTS "
            "KEY_COLUMN_USAGE REFERENTIAL_CONSTRAINTS"),
    DiagnosticView(_IS, "TABLE_STATISTICS", MARIADB_ONLY, NONE, equivalent="sys.schema_table_statistics"),
    DiagnosticView(_IS, "INDEX_STATISTICS", MARIADB_ONLY, NONE, equivalent="sys.schema_index_statistics"),
    DiagnosticView(_IS, "GLOBAL_STATUS", MARIADB_ONLY, NONE, equivalent="performance_schema.global_status"),
    DiagnosticView(_IS, "SESSION_STATUS", MARIADB_ONLY, NONE, equivalent="performance_schema.session_status"),
    DiagnosticView(_IS, "GLOBAL_VARIABLES", MARIADB_ONLY, NONE, variables=_VARIABLE_PAIR,
                   equivalent="performance_schema.global_variables"),
    DiagnosticView(_IS, "SESSION_VARIABLES", MARIADB_ONLY, NONE, variables=_VARIABLE_PAIR,
                   equivalent="performance_schema.session_variables"),
    # performance_schema: SELECT on the schema, and the server started with performance_schema=ON
    DiagnosticView(_PS, "data_locks", MYSQL_ONLY, PERFORMANCE_SCHEMA, _text("LOCK_DATA"),
                   equivalent="information_schema.INNODB_LOCKS"),
    DiagnosticView(_PS, "data_lock_waits", MYSQL_ONLY, PERFORMANCE_SCHEMA,
                   equivalent="information_schema.INNODB_LOCK_WAITS"),
    DiagnosticView(_PS, "processlist", MYSQL_ONLY, PERFORMANCE_SCHEMA, _text("INFO"),
                   equivalent="information_schema.PROCESSLIST"),
    DiagnosticView(_PS, "threads", BOTH, PERFORMANCE_SCHEMA, _text("PROCESSLIST_INFO")),
    *_views(_PS, BOTH, PERFORMANCE_SCHEMA,
            "events_statements_current events_statements_history events_statements_history_long",
            statement_text=_text("SQL_TEXT", "DIGEST_TEXT"), messages=_text("MESSAGE_TEXT")),
    DiagnosticView(_PS, "events_statements_summary_by_digest", BOTH, PERFORMANCE_SCHEMA,
                   _text("DIGEST_TEXT", "QUERY_SAMPLE_TEXT")),
    DiagnosticView(_PS, "prepared_statements_instances", BOTH, PERFORMANCE_SCHEMA, _text("SQL_TEXT")),
    *_views(_PS, BOTH, PERFORMANCE_SCHEMA,
            "metadata_locks events_statements_summary_global_by_event_name events_transactions_current "
            "events_transactions_history events_waits_current events_waits_summary_global_by_event_name "
            "events_stages_current table_io_waits_summary_by_table table_io_waits_summary_by_index_usage "
            "table_lock_waits_summary_by_table file_summary_by_event_name "
            "memory_summary_global_by_event_name global_status session_status status_by_thread hosts "
            "users accounts host_cache setup_consumers setup_instruments replication_applier_configuration "
            "replication_applier_status replication_connection_configuration"),
    *_views(_PS, BOTH, PERFORMANCE_SCHEMA,
            "replication_applier_status_by_coordinator replication_applier_status_by_worker",
            messages=_text("LAST_ERROR_MESSAGE")),
    DiagnosticView(_PS, "replication_connection_status", MYSQL_ONLY, PERFORMANCE_SCHEMA,
                   messages=_text("LAST_ERROR_MESSAGE"), equivalent="SHOW REPLICA STATUS"),
    # MariaDB's clusters are Galera: their state is in SHOW GLOBAL STATUS LIKE 'wsrep%'
    *(DiagnosticView(_PS, name, MYSQL_ONLY, PERFORMANCE_SCHEMA, equivalent="SHOW GLOBAL STATUS LIKE 'wsrep%'")
      for name in ("replication_group_members", "replication_group_member_stats")),
    DiagnosticView(_PS, "global_variables", MYSQL_ONLY, PERFORMANCE_SCHEMA, variables=_VARIABLE_PAIR,
                   equivalent="information_schema.GLOBAL_VARIABLES"),
    DiagnosticView(_PS, "session_variables", MYSQL_ONLY, PERFORMANCE_SCHEMA, variables=_VARIABLE_PAIR,
                   equivalent="information_schema.SESSION_VARIABLES"),
    DiagnosticView(_PS, "variables_by_thread", MYSQL_ONLY, PERFORMANCE_SCHEMA,
                   variables=("THREAD_ID", *_VARIABLE_PAIR), equivalent="SHOW VARIABLES"),
    # sys: views over the two above, with readable units
    *_views(_SYS, BOTH, SYS, "innodb_lock_waits x$innodb_lock_waits",
            statement_text=_text("waiting_query", "blocking_query")),
    *_views(_SYS, BOTH, SYS, "schema_table_lock_waits x$schema_table_lock_waits",
            statement_text=_text("waiting_query")),
    *_views(_SYS, BOTH, SYS, "processlist x$processlist session x$session",
            statement_text=_text("current_statement", "last_statement")),
    *_views(_SYS, BOTH, SYS,
            "statement_analysis x$statement_analysis statements_with_full_table_scans "
            "statements_with_errors_or_warnings statements_with_runtimes_in_95th_percentile "
            "statements_with_sorting statements_with_temp_tables",
            statement_text=_text("query")),
    *_views(_SYS, BOTH, SYS,
            "schema_table_statistics schema_index_statistics schema_unused_indexes schema_redundant_indexes "
            "schema_auto_increment_columns schema_tables_with_full_table_scans host_summary user_summary "
            "memory_global_total memory_global_by_current_bytes io_global_by_file_by_bytes "
            "waits_global_by_latency metrics version"),
    # the slow query log, when log_output includes TABLE
    DiagnosticView("mysql", "slow_log", BOTH, SLOW_LOG, _text("sql_text")),
]  # fmt: skip

DIAGNOSTIC_VIEWS: dict[tuple[str, str], DiagnosticView] = {
    (view.schema, view.name.lower()): view for view in _VIEWS
}

# Every column name that carries another session's SQL, or a server message, in any allowed view: a
# statement reading any of the views is judged against all of them (a correlated subquery can reach a
# column of another view than the one it reads).
STATEMENT_TEXT_COLUMNS = frozenset(name for view in _VIEWS for name in view.statement_text)
MESSAGE_COLUMNS = frozenset(name for view in _VIEWS for name in view.messages)
# performance_schema's DIGEST_TEXT is the server's own digest, its literals already `?`: a statement may
# filter and sort on it (`WHERE DIGEST_TEXT LIKE 'UPDATE%'`); it is still shown through our digest.
SERVER_DIGEST_COLUMNS = frozenset({"digest_text"})


def diagnostic_view(schema: str, table: str) -> DiagnosticView | None:
    """The allowed view `schema.table` (names compared case-insensitively), or None."""
    return DIAGNOSTIC_VIEWS.get((schema.lower(), table.lower()))


# Server variables whose value may be a credential or a key: `wsrep_sst_auth` is `user:password`,
# `file_key_management_filekey` the key itself, `ssl_key` a key file. SQL LIKE patterns on the lower-case
# name, so the same rule runs inside a statement and on SHOW VARIABLES rows; a few harmless variables
# (`innodb_force_primary_key`) are hidden too.
SECRET_VARIABLE_PATTERNS = (
    "%password%", "%passwd%", "%secret%", "%key", "%auth%", "%token%", "%credential%", "%private%",
)  # fmt: skip
_SECRET_VARIABLE = re.compile(
    "|".join(re.escape(pattern).replace("%", ".*") for pattern in SECRET_VARIABLE_PATTERNS), re.DOTALL
)


def variable_is_secret(name: str) -> bool:
    return _SECRET_VARIABLE.fullmatch(name.lower()) is not None
