"""performance_schema, sys, the slow query log and the binary log, on a private MariaDB that has them.

One server for the module (tests/support/private_mariadb.py): performance_schema with the statement
consumers on, the slow log in `mysql.slow_log` for every statement, a binary log, and an `ssl_key` path
holding a canary (a secret-looking variable). The adapter connects as the monitoring account of
docs/query-mysql.md ("The monitoring account"), during the lock-wait incident of
tests/support/mysql_incident.py and after a real deadlock, and never shows a canary.
"""

from __future__ import annotations

import json
import re
import secrets
import shutil
import subprocess
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pymysql
import pytest

from tests.support.mysql import mysql_request
from tests.support.mysql_incident import Incident, by_column, lock_wait, waiting_digest
from tests.support.private_mariadb import PrivateMariaDB, start_private_mariadb, stop_private_mariadb
from tools.adapter import AdapterResult, ToolError
from tools.mysql.adapter import MysqlAdapter
from tools.mysql.diagnostic_surface import DIAGNOSTIC_VIEWS, Flavor
from tools.mysql.guard import SqlPolicyError, guard_sql
from tools.redaction import REDACTED

pytestmark = pytest.mark.mysql

DATABASE = "shop"
MONITOR = "diag_monitor"
MONITOR_PASSWORD = "monitor-" + secrets.token_hex(4)
KEY_CANARY = f"KEYCANARY{secrets.token_hex(4)}"
ROOT = Path(__file__).resolve().parents[2]
# The grants docs/query-mysql.md documents for MariaDB ("The monitoring account"), read from that page itself.
GRANT_BLOCK = re.compile(r"```sql\n-- MariaDB monitoring account\n(.*?)```", re.DOTALL)


# docs/MYSQL.md's table: number, statement, section, server, privilege, answered.
DOCUMENTED_ROW = re.compile(
    r"^\| (\d+) \| `([^`]+)` \| ([^|]+) \| ([^|]+) \| ([^|]+) \| ([^|]+) \|$", re.MULTILINE
)


def documented_statements() -> list[tuple[str, str, bool]]:
    """(statement, server, answered) for every row of docs/MYSQL.md's table."""
    text = (ROOT / "docs" / "MYSQL.md").read_text(encoding="utf-8")
    return [(sql, server.strip(), answered.strip() == "yes")
            for _, sql, _, server, _, answered in DOCUMENTED_ROW.findall(text)]  # fmt: skip


DOCUMENTED = documented_statements()
ON_MARIADB = [sql for sql, server, answered in DOCUMENTED if answered and server in ("both", "MariaDB")]


def documented_grants() -> list[str]:
    text = (ROOT / "docs" / "query-mysql.md").read_text(encoding="utf-8")
    match = GRANT_BLOCK.search(text)
    assert match is not None, "docs/query-mysql.md shows the MariaDB monitoring grants"
    return [line.strip().rstrip(";") for line in match[1].splitlines() if line.strip().startswith("GRANT")]


def tls_options(folder: Path) -> list[str]:
    """A key whose path holds a canary, so `ssl_key` is a secret-looking variable with a value; without
    openssl the server runs without TLS and the test of that variable skips."""
    openssl = shutil.which("openssl")
    if openssl is None:
        return []
    key, cert = folder / f"{KEY_CANARY}.pem", folder / "cert.pem"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-keyout", str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=diagnose-test"],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    return [f"--ssl-key={key}", f"--ssl-cert={cert}"]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivateMariaDB]:
    folder = tmp_path_factory.mktemp("mariadbd")
    started = start_private_mariadb(
        folder,
        [
            "--performance-schema=ON",
            "--performance-schema-consumer-events-statements-current=ON",
            "--performance-schema-consumer-events-statements-history=ON",
            "--performance-schema-instrument=wait/lock/metadata/sql/mdl=ON",
            "--slow-query-log=ON", "--log-output=TABLE", "--long-query-time=0",
            "--log-bin=binlog", "--server-id=7", "--plugin-load-add=metadata_lock_info",
            *tls_options(folder),
        ],
    )  # fmt: skip
    try:
        started.admin(
            f"CREATE DATABASE {DATABASE}",
            f"CREATE USER '{MONITOR}'@'%' IDENTIFIED BY '{MONITOR_PASSWORD}'",
            *(grant.replace("'monitor'@'%'", f"'{MONITOR}'@'%'") for grant in documented_grants()),
            f"GRANT SELECT ON {DATABASE}.* TO '{MONITOR}'@'%'",
        )
        yield started
    finally:
        stop_private_mariadb(started)


@pytest.fixture(scope="module")
def incident(server: PrivateMariaDB) -> Iterator[Incident]:
    with lock_wait(server.connect, DATABASE) as happening:
        yield happening


@pytest.fixture
async def adapter(server: PrivateMariaDB) -> AsyncIterator[MysqlAdapter]:
    adapter = MysqlAdapter(
        server.dsn(MONITOR, DATABASE), password=MONITOR_PASSWORD, allowed_schemas=[DATABASE]
    )
    try:
        yield adapter
    finally:
        await adapter.aclose()


async def answer(adapter: MysqlAdapter, sql: str, *canaries: str) -> AdapterResult:
    result = await adapter.execute(mysql_request(sql))
    shown = json.dumps(result.data)
    for canary in (KEY_CANARY, *canaries):
        assert canary not in shown, sql
    return result


async def test_the_documented_monitoring_account_reads_every_family(adapter: MysqlAdapter) -> None:
    access = await adapter.diagnostic_access()
    assert access.missing == ()
    assert access.performance_schema_on
    assert "cannot read" not in access.summary()


async def test_performance_schema_shows_the_waiters_statement_as_a_digest(
    adapter: MysqlAdapter, incident: Incident
) -> None:
    threads = by_column(
        await answer(
            adapter,
            "SELECT t.PROCESSLIST_ID, t.PROCESSLIST_INFO, s.SQL_TEXT, s.DIGEST_TEXT "
            "FROM performance_schema.threads AS t JOIN performance_schema.events_statements_current AS s "
            f"ON s.THREAD_ID = t.THREAD_ID WHERE t.PROCESSLIST_ID = {incident.waiter_thread}",
            incident.canary,
        )
    )
    assert len(threads) == 1
    assert threads[0]["processlist_info"] == waiting_digest(incident)
    assert threads[0]["sql_text"] == waiting_digest(incident)
    assert threads[0]["digest_text"] is None  # the server digests a statement once it ends


async def test_metadata_locks_and_the_statement_digests(adapter: MysqlAdapter, incident: Incident) -> None:
    locks = by_column(
        await answer(
            adapter,
            "SELECT OBJECT_SCHEMA, OBJECT_NAME, LOCK_TYPE, LOCK_STATUS "
            "FROM performance_schema.metadata_locks WHERE OBJECT_NAME = 'accounts' "
            "ORDER BY LOCK_STATUS, LOCK_TYPE",
            incident.canary,
        )
    )
    assert {"object_schema": DATABASE, "object_name": "accounts", "lock_type": "SHARED_WRITE",
            "lock_status": "GRANTED"} in locks  # fmt: skip
    digests = await answer(
        adapter,
        "SELECT DIGEST_TEXT, COUNT_STAR FROM performance_schema.events_statements_summary_by_digest "
        "WHERE DIGEST_TEXT LIKE 'INSERT INTO%accounts%' ORDER BY SUM_TIMER_WAIT DESC",
        incident.canary,
    )
    texts = [row[0] for row in digests.data["rows"]]
    assert texts == ["INSERT INTO `shop`.`accounts` VALUES (...)"]  # the server folds the row list


async def test_sys_views_show_sessions_and_statement_analysis(
    adapter: MysqlAdapter, incident: Incident
) -> None:
    sessions = by_column(
        await answer(
            adapter,
            "SELECT conn_id, current_statement FROM sys.`x$processlist` "
            f"WHERE conn_id = {incident.waiter_thread}",
            incident.canary,
        )
    )
    assert sessions == [{"conn_id": incident.waiter_thread, "current_statement": waiting_digest(incident)}]
    analysis = await answer(adapter, "SELECT query, exec_count FROM sys.statement_analysis", incident.canary)
    assert analysis.status == "FOUND"


async def test_the_slow_log_shows_digests(adapter: MysqlAdapter, server: PrivateMariaDB) -> None:
    canary = f"SLOWCANARY{secrets.token_hex(4)}"
    server.admin(f"SELECT '{canary}' AS finished_statement")
    logged = by_column(
        await answer(
            adapter,
            "SELECT sql_text, query_time FROM mysql.slow_log WHERE sql_text IS NOT NULL "
            "ORDER BY start_time DESC LIMIT 50",
            canary,
        )
    )
    assert {"sql_text": "SELECT ? AS finished_statement"} in [{"sql_text": row["sql_text"]} for row in logged]


async def test_a_secret_looking_variable_is_hidden_and_cannot_be_tested(
    adapter: MysqlAdapter, server: PrivateMariaDB
) -> None:
    ((raw,),) = server.admin("SELECT @@ssl_key")
    if raw is None:
        pytest.skip("no openssl to make the key whose path is the canary")
    assert KEY_CANARY in str(raw)  # the server really holds it
    shown = await answer(adapter, "SHOW GLOBAL VARIABLES LIKE 'ssl_key'")
    assert shown.data["rows"] == [["ssl_key", REDACTED]]
    selected = await answer(
        adapter,
        "SELECT VARIABLE_NAME, VARIABLE_VALUE FROM information_schema.GLOBAL_VARIABLES "
        "WHERE VARIABLE_NAME = 'SSL_KEY'",
    )
    assert selected.data["rows"] == [["SSL_KEY", REDACTED]]
    oracle = await answer(
        adapter,
        "SELECT COUNT(*) FROM information_schema.GLOBAL_VARIABLES "
        f"WHERE VARIABLE_NAME = 'SSL_KEY' AND VARIABLE_VALUE LIKE '%{KEY_CANARY[:8]}%'",
    )
    assert oracle.data["rows"] == [[0]]  # the value it compares is already hidden
    ordinary = await answer(adapter, "SHOW GLOBAL VARIABLES LIKE 'key_buffer_size'")
    assert ordinary.data["rows"][0][1].isdigit()


async def test_binary_log_and_replica_status_on_a_primary(adapter: MysqlAdapter) -> None:
    for sql in ("SHOW BINARY LOG STATUS", "SHOW MASTER STATUS"):
        (status,) = by_column(await answer(adapter, sql))
        assert status["file"] == "binlog.000001"
    logs = by_column(await answer(adapter, "SHOW BINARY LOGS"))
    assert logs[0]["log_name"] == "binlog.000001"
    replica = await answer(adapter, "SHOW REPLICA STATUS")
    assert (replica.status, replica.data["rows"]) == ("EMPTY", [])
    workers = await answer(adapter, "SELECT * FROM performance_schema.replication_applier_status_by_worker")
    assert workers.status == "EMPTY"


def _deadlock(server: PrivateMariaDB, canary: str) -> None:
    """Two sessions each hold one row and ask for the other's: InnoDB rolls one back."""
    server.admin(
        f"CREATE TABLE {DATABASE}.pairs (id INT PRIMARY KEY, v VARCHAR(80))",
        f"INSERT INTO {DATABASE}.pairs VALUES (1, 'one'), (2, 'two')",
    )
    first, second = server.connect(), server.connect()
    try:
        for conn, row in ((first, 1), (second, 2)):
            with conn.cursor() as cur:
                cur.execute("START TRANSACTION")
                cur.execute(f"UPDATE {DATABASE}.pairs SET v = 'mine' WHERE id = {row}")
        failures: list[BaseException] = []

        def cross() -> None:
            try:
                with first.cursor() as cur:
                    cur.execute(f"UPDATE {DATABASE}.pairs SET v = %s WHERE id = 2", (canary,))
            except pymysql.err.OperationalError as exc:
                failures.append(exc)

        waiting = threading.Thread(target=cross)
        waiting.start()
        time.sleep(0.5)
        try:
            with second.cursor() as cur:
                cur.execute(f"UPDATE {DATABASE}.pairs SET v = %s WHERE id = 1", (canary,))
        except pymysql.err.OperationalError as exc:
            failures.append(exc)
        second.rollback()
        waiting.join(timeout=20)
        first.rollback()
        assert [exc.args[0] for exc in failures] == [1213]  # one deadlock victim
    finally:
        first.close()
        second.close()


async def test_the_latest_deadlock_shows_its_statements_as_digests(
    adapter: MysqlAdapter, server: PrivateMariaDB
) -> None:
    canary = f"DEADCANARY{secrets.token_hex(4)}"
    _deadlock(server, canary)
    (raw,) = server.admin("SHOW ENGINE INNODB STATUS")
    assert canary in str(raw[2])  # the server's own text quotes it
    result = await answer(adapter, "SHOW ENGINE INNODB STATUS", canary)
    deadlock = [line for section, line in result.data["rows"] if section == "LATEST DETECTED DEADLOCK"]
    assert deadlock.count(f"UPDATE {DATABASE}.pairs SET v = ? WHERE id = ?") == 2
    assert "*** WE ROLL BACK TRANSACTION (2)" in deadlock or "*** WE ROLL BACK TRANSACTION (1)" in deadlock
    assert "[record fields withheld]" in deadlock


async def test_a_missing_grant_is_access_denied_not_empty(server: PrivateMariaDB) -> None:
    """Without PROCESS the InnoDB views refuse rather than answer empty; the reason says so."""
    server.admin(
        "CREATE USER IF NOT EXISTS 'diag_business'@'%' IDENTIFIED BY 'pw-b'",
        f"GRANT SELECT ON {DATABASE}.* TO 'diag_business'@'%'",
    )
    business = MysqlAdapter(
        server.dsn("diag_business", DATABASE), password="pw-b", allowed_schemas=[DATABASE]
    )
    try:
        for sql in ("SELECT * FROM information_schema.INNODB_TRX", "SHOW ENGINE INNODB STATUS",
                    "SELECT * FROM performance_schema.threads", "SHOW REPLICA STATUS"):  # fmt: skip
            with pytest.raises(ToolError) as caught:
                await business.execute(mysql_request(sql))
            assert (caught.value.code, caught.value.reason) == ("POLICY_REJECTED", "ACCESS_DENIED"), sql
    finally:
        await business.aclose()


def test_the_documented_table_is_answered_as_it_says() -> None:
    """At least 90 % of the manuals' statements are answered, and each row's claim holds for the guard:
    an answered statement is accepted, an unanswered one refused before any server."""
    assert len(DOCUMENTED) == 63
    answered = [sql for sql, _, yes in DOCUMENTED if yes]
    assert len(answered) == 58
    assert len(answered) / len(DOCUMENTED) >= 0.9
    for sql, _, yes in DOCUMENTED:
        try:
            guard_sql(sql, database=DATABASE, allowed_schemas=[DATABASE], max_rows=100)
        except SqlPolicyError:
            assert not yes, sql
        else:
            assert yes, sql


@pytest.mark.parametrize("sql", ON_MARIADB, ids=[f"row-{i}" for i in range(len(ON_MARIADB))])
async def test_each_documented_mariadb_statement_is_answered(
    adapter: MysqlAdapter, incident: Incident, sql: str
) -> None:
    """Run as the monitoring account during the lock wait: rows or an honest EMPTY, never an error."""
    result = await answer(adapter, sql, incident.canary)
    assert result.status in ("FOUND", "EMPTY")


def test_every_view_the_allow_list_places_on_mariadb_exists_there(server: PrivateMariaDB) -> None:
    """The allow-list's MariaDB column is true of a real MariaDB (its MySQL column cannot be checked
    here: no MySQL server is installable on this system)."""
    on_mariadb = [view for view in DIAGNOSTIC_VIEWS.values() if Flavor.MARIADB in view.servers]
    with server.connect() as conn, conn.cursor() as cur:
        for view in on_mariadb:
            cur.execute(f"SELECT 1 FROM `{view.schema}`.`{view.name}` LIMIT 0")
    assert len(on_mariadb) >= 60
