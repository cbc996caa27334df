"""The diagnostic allow-list and the server-dependent parts of the surface, without a server: which
spelling each server gets, which view a server lacks and what it has instead, which variables hide."""

from __future__ import annotations

import pytest

from tools.mysql.adapter import _missing_view
from tools.mysql.diagnostic_surface import DIAGNOSTIC_VIEWS, Flavor, diagnostic_view, variable_is_secret
from tools.mysql.guard import GuardedStatement, guard_sql, spelled_for

MARIADB = "10.11.19-MariaDB-0+deb12u1"
MYSQL_80 = "8.0.36"
MYSQL_84 = "8.4.3"


def guard(sql: str) -> GuardedStatement:
    return guard_sql(sql, database="shop", allowed_schemas=["shop"], max_rows=10)


@pytest.mark.parametrize(
    ("sql", "server", "spelled"),
    [
        ("SHOW SLAVE STATUS", MARIADB, "SHOW SLAVE STATUS"),
        ("SHOW REPLICA STATUS", MARIADB, "SHOW SLAVE STATUS"),
        ("SHOW SLAVE STATUS", MYSQL_84, "SHOW REPLICA STATUS"),  # 8.4 dropped the old name
        ("SHOW MASTER STATUS", MYSQL_84, "SHOW BINARY LOG STATUS"),
        ("SHOW BINARY LOG STATUS", MYSQL_80, "SHOW MASTER STATUS"),  # before 8.2 only the old name
        ("SHOW BINLOG STATUS", MARIADB, "SHOW MASTER STATUS"),
        ("SHOW GLOBAL STATUS LIKE 'Threads_%'", MYSQL_84, "SHOW GLOBAL STATUS LIKE 'Threads_%'"),
    ],
)
def test_each_server_gets_the_spelling_it_accepts(sql: str, server: str, spelled: str) -> None:
    assert spelled_for(guard(sql).sql, server) == spelled


@pytest.mark.parametrize(
    ("sql", "server", "reason"),
    [
        ("SELECT * FROM performance_schema.data_lock_waits", MARIADB,
         "NOT_ON_MARIADB:information_schema.INNODB_LOCK_WAITS"),
        ("SELECT * FROM information_schema.INNODB_LOCK_WAITS", MYSQL_80,
         "NOT_ON_MYSQL:performance_schema.data_lock_waits"),
        ("SELECT * FROM information_schema.GLOBAL_VARIABLES", MYSQL_84,
         "NOT_ON_MYSQL:performance_schema.global_variables"),
        ("SELECT * FROM performance_schema.replication_connection_status", MARIADB,
         "NOT_ON_MARIADB:SHOW REPLICA STATUS"),
        ("SHOW ALL SLAVES STATUS", MYSQL_80, "NOT_ON_MYSQL:SHOW REPLICA STATUS"),
        ("SELECT * FROM information_schema.INNODB_TRX", MYSQL_80, None),
        ("SELECT * FROM sys.innodb_lock_waits", MARIADB, None),
    ],
)  # fmt: skip
def test_a_view_the_server_lacks_names_the_one_it_has(sql: str, server: str, reason: str | None) -> None:
    assert _missing_view(guard(sql), server) == reason


def test_every_equivalent_is_something_the_other_server_answers() -> None:
    """An error that names an equivalent names one the guard accepts and the other server has."""
    for view in DIAGNOSTIC_VIEWS.values():
        if view.equivalent is None:
            assert view.servers == frozenset(Flavor), view.qualified
            continue
        (missing_on,) = frozenset(Flavor) - view.servers
        if view.equivalent.startswith("SHOW "):
            guard(view.equivalent)
            continue
        schema, name = view.equivalent.split(".")
        other = diagnostic_view(schema, name)
        assert other is not None, view.qualified
        assert missing_on in other.servers, view.qualified


def test_credential_tables_are_not_on_the_list() -> None:
    for schema, table in [("mysql", "user"), ("mysql", "global_priv"), ("mysql", "general_log"),
                          ("performance_schema", "user_variables_by_thread"),
                          ("performance_schema", "session_connect_attrs"), ("information_schema", "ROUTINES"),
                          ("information_schema", "USER_PRIVILEGES"), ("sys", "sys_config")]:  # fmt: skip
        assert diagnostic_view(schema, table) is None


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("wsrep_sst_auth", True), ("ssl_key", True), ("file_key_management_filekey", True),
        ("WSREP_SST_AUTH", True), ("server_audit_file_password", True),
        ("caching_sha2_password_private_key_path", True),
        ("key_buffer_size", False), ("innodb_lock_wait_timeout", False), ("max_connections", False),
        ("foreign_key_checks", False), ("gtid_executed", False),
    ],
)  # fmt: skip
def test_secret_looking_variables(name: str, secret: bool) -> None:
    assert variable_is_secret(name) is secret
