"""An existing team audit database is checked before anything is written to it (docs/RELIABILITY.md).

The server-side twin of test_audit_file_trust: a trigger, a view, an event, a table the tool did not
create or one of its tables moved off InnoDB is refused with a message that names it, and a database
that holds something else (a URL pointing at the wrong database) gets no audit table. A password
variable that is not set is named before any connection is tried. Events are visible only to an
account holding EVENT on the database: without it, opening says plainly that events could not be
checked. Real MariaDB, no mock.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from audit import AuditStoreError
from audit.location import MysqlLocation
from audit.mysql.schema import OWN_TABLES
from audit.mysql.store import MysqlAuditStore
from console.commands.main import main
from tests.support.audit_backends import AuditTarget, audit_account
from tests.support.mysql import closed_port, root_connection


def _tables(database: str) -> set[str]:
    with root_connection() as conn, conn.cursor() as cursor:
        cursor.execute(
            "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s", (database,)
        )
        return {name for (name,) in cursor.fetchall()}


def _server(database: str, *statements: str) -> None:
    with root_connection(database) as conn, conn.cursor() as cursor:
        for statement in statements:
            cursor.execute(statement)


@pytest.fixture
def migrated(mariadb_audit: AuditTarget) -> MysqlLocation:
    """A current audit schema holding one finished run."""
    assert isinstance(mariadb_audit.location, MysqlLocation)
    mariadb_audit.open().close()
    _server(
        mariadb_audit.location.database,
        "INSERT INTO runs (run_id, session_id, query, outcome, started_at, finished_at)"
        " VALUES ('run-1', 's-1', 'q', 'DRAFT',"
        " '2026-01-01T00:00:00.000000Z', '2026-01-01T00:00:01.000000Z')",
    )
    return mariadb_audit.location


def test_the_migrations_create_exactly_the_tables_the_check_trusts(migrated: MysqlLocation) -> None:
    assert _tables(migrated.database) == OWN_TABLES


PLANTED = {
    "trigger": (
        "CREATE TRIGGER copy_every_call AFTER INSERT ON invocations FOR EACH ROW SET @seen = NEW.input_json",
        "trigger 'copy_every_call' on 'invocations'",
    ),
    "view": ("CREATE VIEW everything AS SELECT * FROM runs", "view 'everything'"),
    "event": (
        "CREATE EVENT wipe_audit ON SCHEDULE EVERY 1 DAY DISABLE DO DELETE FROM runs",
        "event 'wipe_audit'",
    ),
    "foreign table": ("CREATE TABLE orders (id INT PRIMARY KEY) ENGINE=InnoDB", "table 'orders'"),
    "our table off InnoDB": (
        "ALTER TABLE run_leases ENGINE=MyISAM",
        "table 'run_leases' on engine 'MyISAM' (not InnoDB)",
    ),
}


@pytest.mark.parametrize("planted", list(PLANTED))
def test_an_audit_database_holding_what_the_tool_did_not_create_is_refused(
    migrated: MysqlLocation, planted: str
) -> None:
    statement, named = PLANTED[planted]
    _server(migrated.database, statement)
    with pytest.raises(AuditStoreError) as refused:
        MysqlAuditStore(migrated, connect_timeout_s=3)
    assert named in str(refused.value)
    assert "refusing to use it" in str(refused.value)
    with root_connection(migrated.database) as conn, conn.cursor() as cursor:
        cursor.execute("SELECT run_id, finished_at IS NOT NULL, interrupted FROM runs")
        assert cursor.fetchall() == (("run-1", 1, 0),)  # untouched: not even recovery ran


def test_the_check_runs_for_an_account_without_ddl_grants(
    migrated: MysqlLocation, mariadb_audit: AuditTarget
) -> None:
    """The fixed-schema account (docs/audit.md, "Grants") still sees a foreign table on its database."""
    _server(migrated.database, "CREATE TABLE orders (id INT PRIMARY KEY) ENGINE=InnoDB")
    with audit_account(mariadb_audit, "Trust-Check-Pw-71") as user, pytest.MonkeyPatch.context() as env:
        env.setenv("TRUST_CHECK_PW", "Trust-Check-Pw-71")
        account = MysqlLocation(migrated.host, migrated.port, user, migrated.database, "TRUST_CHECK_PW")
        with pytest.raises(AuditStoreError, match="table 'orders'"):
            MysqlAuditStore(account, connect_timeout_s=3)


def test_a_url_naming_a_database_that_holds_something_else_creates_no_audit_table(
    mariadb_audit: AuditTarget,
) -> None:
    """The wrong database in `[audit] url` (say, the shop's): refused before the first CREATE TABLE."""
    assert isinstance(mariadb_audit.location, MysqlLocation)
    database = mariadb_audit.location.database
    _server(database, "CREATE TABLE orders (id INT PRIMARY KEY)", "INSERT INTO orders VALUES (7)")
    with pytest.raises(AuditStoreError, match="table 'orders'"):
        MysqlAuditStore(mariadb_audit.location, connect_timeout_s=3)
    assert _tables(database) == {"orders"}


def test_an_unset_password_variable_is_named_before_any_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing listens on the port: a connection attempt would fail with a different message."""
    monkeypatch.delenv("TEAM_AUDIT_PW_UNSET", raising=False)
    location = MysqlLocation("127.0.0.1", closed_port(), "auditor", "team_audit", "TEAM_AUDIT_PW_UNSET")
    with pytest.raises(AuditStoreError, match="password variable TEAM_AUDIT_PW_UNSET is not set"):
        MysqlAuditStore(location)


# docs/audit.md, "Grants", without the EVENT line: the server lists this account no event of its database.
WITHOUT_EVENT = "SELECT, INSERT, UPDATE, DELETE"
EVENT_PLANTED = "CREATE EVENT wipe_audit ON SCHEDULE EVERY 1 DAY DISABLE DO DELETE FROM runs"


def _account_location(migrated: MysqlLocation, user: str, variable: str) -> MysqlLocation:
    return MysqlLocation(migrated.host, migrated.port, user, migrated.database, variable)


def test_events_the_account_cannot_see_are_reported_on_open_not_passed_over(
    migrated: MysqlLocation,
    mariadb_audit: AuditTarget,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Before, an event planted in the audit database went unseen and nothing said the check was blind
    to events. Now opening says so: one line on stderr for every command, and in the log."""
    _server(migrated.database, EVENT_PLANTED)
    with audit_account(mariadb_audit, "Trust-Check-Pw-72", WITHOUT_EVENT) as user:
        monkeypatch.setenv("TRUST_CHECK_PW", "Trust-Check-Pw-72")
        account = _account_location(migrated, user, "TRUST_CHECK_PW")
        config = tmp_path / "audit.toml"
        config.write_text(
            f'[audit]\nurl = "{account.describe()}"\npassword_env = "TRUST_CHECK_PW"\n', encoding="utf-8"
        )
        said = []
        for argv in (
            ["audit", "runs", "--config", str(config)],
            ["run", "--scenario", "evidence-backed-diagnosis", "--json", "--config", str(config)],
        ):
            code = main(argv)
            err = capsys.readouterr().err
            assert code == 0, err
            said.append(err.splitlines())
        warning = (
            f"audit {account.describe()}: events in its database could not be checked (the account lacks"
            ' the EVENT privilege there, see README "Grants"): an event another account planted would go'
            " unseen"
        )
        assert said == [[f"diagnose audit: warning: {warning}"], [f"diagnose: warning: {warning}"]]
        logged = "".join(path.read_text(encoding="utf-8") for path in (tmp_path / "state").rglob("*.log"))
        assert logged.count(f"WARNING audit.mysql.store: {warning}") == 2
        with MysqlAuditStore(account) as store:
            assert store.open_warnings == (warning,)


def test_with_the_event_grant_the_audit_account_sees_a_planted_event_and_refuses_it(
    migrated: MysqlLocation, mariadb_audit: AuditTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The grants of docs/audit.md (EVENT included): the check sees what root planted, and opening says
    nothing about events when there are none."""
    with audit_account(mariadb_audit, "Trust-Check-Pw-73") as user:
        monkeypatch.setenv("TRUST_CHECK_PW", "Trust-Check-Pw-73")
        account = _account_location(migrated, user, "TRUST_CHECK_PW")
        with MysqlAuditStore(account) as store:
            assert store.open_warnings == ()
        _server(migrated.database, EVENT_PLANTED)
        with pytest.raises(AuditStoreError, match=r"event 'wipe_audit'.*refusing to use it"):
            MysqlAuditStore(account)
