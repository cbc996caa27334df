"""query_mysql diagnoses MariaDB itself, during a real lock wait on the shared server.

The incident (tests/support/mysql_incident.py): a holder transaction idle on row 1, a waiter blocked
on it with a canary literal in its statement, and a server that is not a replica. Each diagnostic
statement an SRE starts with must answer the right rows, other sessions' SQL only as a digest; a full
`diagnose run` over them must leave the canary in no observation, event, audit row, export, trace or log.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import sqlite3
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from console.commands.main import main
from tests.support.hypothesis_budget import examples
from tests.support.mysql import MysqlTestEnv, mysql_request, root_connection
from tests.support.mysql_incident import Incident, by_column, lock_wait, waiting_digest
from tests.support.otlp import OtlpReceiver
from tools.adapter import AdapterResult, ToolError
from tools.mysql.adapter import MysqlAdapter
from tools.mysql.statement_digest import WITHHELD

pytestmark = pytest.mark.mysql


@pytest.fixture(scope="module")
def incident(mysql_env: MysqlTestEnv) -> Iterator[Incident]:
    with lock_wait(root_connection, mysql_env.shop) as happening:
        yield happening


@pytest.fixture
async def adapter(mysql_env: MysqlTestEnv) -> AsyncIterator[MysqlAdapter]:
    adapter = mysql_env.adapter()
    try:
        yield adapter
    finally:
        await adapter.aclose()


async def rows(adapter: MysqlAdapter, sql: str, incident: Incident) -> AdapterResult:
    """The adapter's answer; the canary is in no part of it, whatever the statement."""
    result = await adapter.execute(mysql_request(sql))
    assert incident.canary not in json.dumps(result.data), sql
    return result


async def test_show_processlist_shows_both_sessions_and_the_waiters_statement_as_a_digest(
    adapter: MysqlAdapter, incident: Incident
) -> None:
    for sql in ("SHOW PROCESSLIST", "SHOW FULL PROCESSLIST"):
        sessions = {row["id"]: row for row in by_column(await rows(adapter, sql, incident))}
        assert sessions[incident.waiter_thread]["info"] == waiting_digest(incident)
        assert sessions[incident.waiter_thread]["command"] == "Query"
        assert sessions[incident.holder_thread]["command"] == "Sleep"
        assert sessions[incident.holder_thread]["info"] is None


async def test_information_schema_processlist_answers_the_sre_query(
    adapter: MysqlAdapter, incident: Incident
) -> None:
    result = await rows(
        adapter,
        "SELECT ID, USER, SUBSTRING_INDEX(HOST, ':', 1) AS client, TIME, INFO "
        "FROM information_schema.PROCESSLIST WHERE COMMAND <> 'Sleep' AND INFO IS NOT NULL "
        "ORDER BY TIME DESC",
        incident,
    )
    found = {row["id"]: row for row in by_column(result)}
    assert found[incident.waiter_thread]["info"] == waiting_digest(incident)
    assert found[incident.waiter_thread]["client"] in ("127.0.0.1", "localhost")
    assert incident.holder_thread not in found  # idle in its transaction: Command = Sleep


async def test_innodb_trx_shows_the_long_transaction_and_the_waiting_one(
    adapter: MysqlAdapter, incident: Incident
) -> None:
    result = await rows(
        adapter,
        "SELECT trx_mysql_thread_id, trx_state, TIMESTAMPDIFF(SECOND, trx_started, NOW()) AS age, trx_query "
        f"FROM information_schema.INNODB_TRX WHERE trx_mysql_thread_id IN "
        f"({incident.holder_thread}, {incident.waiter_thread}) ORDER BY trx_started, trx_mysql_thread_id",
        incident,
    )
    holder, waiter = by_column(result)
    assert (holder["trx_mysql_thread_id"], holder["trx_state"], holder["trx_query"]) == (
        incident.holder_thread,
        "RUNNING",
        None,
    )
    assert holder["age"] >= 1
    assert (waiter["trx_mysql_thread_id"], waiter["trx_state"]) == (incident.waiter_thread, "LOCK WAIT")
    assert waiter["trx_query"] == waiting_digest(incident)


async def test_the_lock_wait_names_the_blocking_and_the_waiting_session(
    adapter: MysqlAdapter, incident: Incident
) -> None:
    joined = await rows(
        adapter,
        "SELECT r.trx_mysql_thread_id AS waiting_thread, r.trx_query AS waiting_query, "
        "b.trx_mysql_thread_id AS blocking_thread "
        "FROM information_schema.INNODB_LOCK_WAITS AS w "
        "JOIN information_schema.INNODB_TRX AS b ON b.trx_id = w.blocking_trx_id "
        "JOIN information_schema.INNODB_TRX AS r ON r.trx_id = w.requesting_trx_id",
        incident,
    )
    assert by_column(joined) == [
        {
            "waiting_thread": incident.waiter_thread,
            "waiting_query": waiting_digest(incident),
            "blocking_thread": incident.holder_thread,
        }
    ]
    locks = by_column(
        await rows(
            adapter, "SELECT lock_mode, lock_table, lock_data FROM information_schema.INNODB_LOCKS", incident
        )
    )
    assert locks == [
        {"lock_mode": "X", "lock_table": f"`{incident.database}`.`accounts`", "lock_data": "?"},
        {"lock_mode": "X", "lock_table": f"`{incident.database}`.`accounts`", "lock_data": "?"},
    ]
    # sys.innodb_lock_waits cuts long statements in the middle (sys.format_statement): a cut that may
    # fall inside a literal is withheld; x$innodb_lock_waits has the whole text.
    for view, query in (("x$innodb_lock_waits", waiting_digest(incident)), ("innodb_lock_waits", WITHHELD)):
        found = by_column(
            await rows(
                adapter, f"SELECT waiting_pid, blocking_pid, waiting_query FROM sys.`{view}`", incident
            )
        )
        assert found == [
            {
                "waiting_pid": incident.waiter_thread,
                "blocking_pid": incident.holder_thread,
                "waiting_query": query,
            }
        ]


async def test_show_engine_innodb_status_is_lines_with_the_statement_digested(
    adapter: MysqlAdapter, incident: Incident
) -> None:
    result = await rows(adapter, "SHOW ENGINE INNODB STATUS", incident)
    assert result.data["columns"] == ["section", "line"]
    transactions = [line for section, line in result.data["rows"] if section == "TRANSACTIONS"]
    assert waiting_digest(incident) in transactions
    assert "[record fields withheld]" in transactions
    waiting = transactions.index(waiting_digest(incident))
    assert transactions[waiting - 1].startswith(f"MariaDB thread id {incident.waiter_thread}, ")
    assert any(line.startswith("LOCK WAIT ") for line in transactions[:waiting])


async def test_a_server_that_is_not_a_replica_answers_empty_replica_status(
    adapter: MysqlAdapter, incident: Incident
) -> None:
    for sql in ("SHOW REPLICA STATUS", "SHOW SLAVE STATUS"):
        result = await rows(adapter, sql, incident)
        assert (result.status, result.data["rows"]) == ("EMPTY", [])


async def test_status_and_variables(
    adapter: MysqlAdapter, incident: Incident, mysql_env: MysqlTestEnv
) -> None:
    status = dict(
        map(tuple, (await rows(adapter, "SHOW GLOBAL STATUS LIKE 'Threads_%'", incident)).data["rows"])
    )
    assert set(status) >= {"Threads_connected", "Threads_running", "Threads_created", "Threads_cached"}
    assert int(status["Threads_connected"]) >= 3  # the holder, the waiter and us
    ((expected,),) = mysql_env.admin("SELECT @@max_connections")
    variables = (await rows(adapter, "SHOW VARIABLES LIKE 'max_connections'", incident)).data["rows"]
    assert variables == [["max_connections", str(expected)]]
    selected = await rows(
        adapter,
        "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_VARIABLES "
        "WHERE VARIABLE_NAME = 'MAX_CONNECTIONS'",
        incident,
    )
    assert selected.data["rows"] == [[str(expected)]]


async def test_open_tables_table_status_and_version(
    adapter: MysqlAdapter, incident: Incident, mysql_env: MysqlTestEnv
) -> None:
    open_tables = by_column(await rows(adapter, "SHOW OPEN TABLES WHERE In_use > 0", incident))
    assert {"database": incident.database, "table": "accounts", "in_use": 1, "name_locked": 0} in open_tables
    (status,) = by_column(await rows(adapter, "SHOW TABLE STATUS LIKE 'accounts'", incident))
    assert (status["name"], status["engine"], status["rows"]) == ("accounts", "InnoDB", 2)
    ((version,),) = mysql_env.admin("SELECT VERSION()")
    assert (await rows(adapter, "SELECT VERSION()", incident)).data["rows"] == [[version]]


async def test_a_view_this_server_lacks_is_an_error_naming_its_equivalent(
    adapter: MysqlAdapter, incident: Incident
) -> None:
    cases = {
        "performance_schema.data_lock_waits": "information_schema.INNODB_LOCK_WAITS",
        "performance_schema.data_locks": "information_schema.INNODB_LOCKS",
        "performance_schema.global_variables": "information_schema.GLOBAL_VARIABLES",
    }
    for view, equivalent in cases.items():
        with pytest.raises(ToolError) as caught:
            await adapter.execute(mysql_request(f"SELECT * FROM {view}"))
        assert (caught.value.code, caught.value.reason) == ("BACKEND_ERROR", f"NOT_ON_MARIADB:{equivalent}")


async def test_a_view_of_a_plugin_that_is_not_loaded_names_the_view_that_answers_instead(
    adapter: MysqlAdapter, incident: Incident
) -> None:
    """METADATA_LOCK_INFO exists only with MariaDB's metadata_lock_info plugin (not loaded here)."""
    with pytest.raises(ToolError) as caught:
        await adapter.execute(mysql_request("SELECT * FROM information_schema.METADATA_LOCK_INFO"))
    assert (caught.value.code, caught.value.reason) == (
        "BACKEND_ERROR",
        "NOT_ON_THIS_SERVER:performance_schema.metadata_locks",
    )


async def test_comparing_another_sessions_sql_is_refused_before_the_server(incident: Incident) -> None:
    adapter = MysqlAdapter("mysql://nobody@127.0.0.1:1/none", password=None, allowed_schemas=["none"])
    for sql in (
        f"SELECT ID FROM information_schema.PROCESSLIST WHERE INFO LIKE '%{incident.canary[:9]}%'",
        "SELECT trx_id FROM information_schema.INNODB_TRX WHERE LEFT(trx_query, 40) = 'UPDATE x'",
        "SELECT waiting_pid FROM sys.innodb_lock_waits ORDER BY waiting_query",
    ):
        with pytest.raises(ToolError) as caught:
            await adapter.execute(mysql_request(sql))
        assert (caught.value.code, caught.value.reason) == ("POLICY_REJECTED", "STATEMENT_TEXT")
    assert adapter.pool_stats()["opened"] == 0


async def test_the_start_up_check_names_what_a_business_account_cannot_read(mysql_env: MysqlTestEnv) -> None:
    user = mysql_env.create_user("pw-business", [f"GRANT SELECT ON `{mysql_env.shop}`.* TO {{user}}"])
    business = MysqlAdapter(
        mysql_env.dsn(mysql_env.shop, user=user), password="pw-business", allowed_schemas=[mysql_env.shop]
    )
    root = mysql_env.adapter()
    try:
        limited, full = await business.diagnostic_access(), await root.diagnostic_access()
    finally:
        await business.aclose()
        await root.aclose()
    assert dict(limited.missing) == {
        "other sessions and InnoDB transactions and locks": "PROCESS",
        "performance_schema": "SELECT on performance_schema.*",
        "sys": "SELECT, EXECUTE on sys.* (with PROCESS)",
        "replication status": "SLAVE MONITOR",
        "binary log status": "BINLOG MONITOR",
        "the slow query log": "SELECT on mysql.slow_log",
    }
    assert limited.readable == ()
    assert full.missing == ()
    assert not full.performance_schema_on  # the shared server runs without it
    assert full.summary().endswith("performance_schema is off on the server (its tables are empty)")


# --- a whole run over the diagnostic statements: the canary nowhere -----------------------------

DIAGNOSTIC_CALLS = [
    "SHOW FULL PROCESSLIST",
    "SELECT trx_id, trx_state, trx_query FROM information_schema.INNODB_TRX",
    "SHOW ENGINE INNODB STATUS",
    "SELECT * FROM information_schema.PROCESSLIST",
    "SELECT * FROM sys.innodb_lock_waits",
    "SELECT * FROM information_schema.INNODB_LOCKS",
]
DRAFT = {
    "conclusion": None,
    "analysis": [
        {
            "kind": "NEGATIVE_OBSERVATION",
            "statement": "a lock wait",
            "scope": "accounts",
            "evidence": "NO_EVIDENCE",
        }
    ],
    "action_plan": [],
    "recommendations": [],
    "limitations": {"checked_scope": ["accounts"], "missing_info": ["the holder's intent"]},
}


def scenario(statements: list[str]) -> dict[str, Any]:
    rounds: list[dict[str, Any]] = []
    for index, sql in enumerate(statements):
        previous = None if index == 0 else {"tool_call_id": f"d{index - 1}", "evaluation": "GAINED"}
        arguments = {"previous_observation": previous, "input": {"sql": sql, "database": None}}
        rounds.append({"tool_calls": [{"id": f"d{index}", "name": "query_mysql", "arguments": arguments}]})
    rounds.append({"text": json.dumps(DRAFT)})
    return {"name": "lock-wait", "query": "账户更新卡住了，请排查锁等待", "rounds": rounds}


def test_a_run_over_the_diagnostic_surface_leaks_the_canary_nowhere(
    incident: Incident, mysql_env: MysqlTestEnv, tmp_path: Path
) -> None:
    (tmp_path / "s.yaml").write_text(json.dumps(scenario(DIAGNOSTIC_CALLS)), encoding="utf-8")
    (tmp_path / "c.toml").write_text(
        f'[mysql]\ndsn = "{mysql_env.dsn(mysql_env.shop)}"\n[budget]\nmax_model_calls = 8\n', encoding="utf-8"
    )
    audit, events, export = tmp_path / "audit.db", tmp_path / "events.ndjson", tmp_path / "export.jsonl"
    out, err = io.StringIO(), io.StringIO()
    with OtlpReceiver() as receiver:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["run", "--config", str(tmp_path / "c.toml"), "--scenario", str(tmp_path / "s.yaml"),
                         "--audit-db", str(audit), "--events", str(events), "--json",
                         "--trace-endpoint", receiver.endpoint])  # fmt: skip
            assert main(["audit", "export", "--audit-db", str(audit), "--output", str(export)]) == 0
        traces = b"".join(receiver.bodies)
    assert code == 0, err.getvalue()
    finished = [
        e
        for e in map(json.loads, events.read_text(encoding="utf-8").splitlines())
        if e["type"] == "tool_finished"
    ]
    assert [event["status"] for event in finished] == ["FOUND"] * len(DIAGNOSTIC_CALLS)
    assert waiting_digest(incident) in json.dumps([event["observation"] for event in finished])
    with sqlite3.connect(audit) as db:
        dump = "\n".join(db.iterdump())
    state = Path(os.environ["XDG_STATE_HOME"])
    texts = {
        "stdout": out.getvalue(),
        "stderr": err.getvalue(),
        "events": events.read_text(encoding="utf-8"),
        "audit": dump,
        "export": export.read_text(encoding="utf-8"),
        "log": "\n".join(path.read_text(encoding="utf-8") for path in state.rglob("*.log")),
    }
    assert traces, "the trace reached the receiver"
    assert incident.canary.encode() not in traces
    for where, text in texts.items():
        assert incident.canary not in text, where


def test_the_incident_is_still_in_progress_after_the_reads(incident: Incident) -> None:
    """Reading never disturbed it: the waiter still waits (nothing was killed or committed)."""
    with root_connection() as conn, conn.cursor() as cur:
        cur.execute(
            "SELECT trx_state FROM information_schema.INNODB_TRX WHERE trx_mysql_thread_id = %s",
            (incident.waiter_thread,),
        )
        assert cur.fetchall() == (("LOCK WAIT",),)


async def test_the_reads_take_no_lock_the_incident_waits_for(
    adapter: MysqlAdapter, incident: Incident
) -> None:
    """A diagnostic read answers while the lock wait goes on: nothing it reads is locked."""
    async with asyncio.timeout(5):
        result = await adapter.execute(mysql_request("SELECT COUNT(*) AS n FROM accounts"))
    assert result.data["rows"] == [[2]]


# --- generated statements over the diagnostic views, on the server, during the incident -------------

_VIEWS = {
    "information_schema.PROCESSLIST": ["ID", "USER", "COMMAND", "TIME", "STATE", "INFO"],
    "information_schema.INNODB_TRX": [
        "trx_id",
        "trx_state",
        "trx_started",
        "trx_mysql_thread_id",
        "trx_query",
    ],
    "information_schema.INNODB_LOCKS": ["lock_id", "lock_mode", "lock_table", "lock_data"],
    "sys.`x$innodb_lock_waits`": ["waiting_pid", "blocking_pid", "waiting_query", "blocking_query"],
    "information_schema.GLOBAL_VARIABLES": ["VARIABLE_NAME", "VARIABLE_VALUE"],
}
_WRAPPERS = ["{c}", "{c} AS shown", "LEFT({c}, 12)", "COUNT({c})", "LENGTH({c})",
             "SUBSTRING_INDEX({c}, ' ', 2)", "CONCAT({c}, '')", "GROUP_CONCAT({c})", "MAX({c})"]  # fmt: skip
_CONDITIONS = ["{c} IS NOT NULL", "{c} LIKE '%CANARY%'", "{c} = 'x'", "{c} > 'M'", "LEFT({c}, 1) = 'U'",
               "{c} IN (SELECT {c} FROM {v})", "LENGTH({c}) > 10", "1 = 1"]  # fmt: skip
_SUFFIXES = ["", "ORDER BY {c}", "ORDER BY 1", "GROUP BY {c}", "LIMIT 3", "UNION SELECT {c} FROM {v}"]


@st.composite
def diagnostic_statements(draw: st.DrawFn) -> str:
    view = draw(st.sampled_from(sorted(_VIEWS)))
    columns = _VIEWS[view]
    picked = draw(st.lists(st.sampled_from(columns), min_size=1, max_size=3, unique=True))
    items = ", ".join(draw(st.sampled_from(_WRAPPERS)).format(c=column) for column in picked)
    sql = f"SELECT {items} FROM {view}"
    if draw(st.booleans()):
        sql += " WHERE " + draw(st.sampled_from(_CONDITIONS)).format(c=draw(st.sampled_from(columns)), v=view)
    return sql + " " + draw(st.sampled_from(_SUFFIXES)).format(c=draw(st.sampled_from(columns)), v=view)


_REASONS = {
    "STATEMENT_TEXT",
    "SECRET_COLUMN",
    "UNSUPPORTED_STATEMENT",
    "FUNCTION_NOT_ALLOWED",
    "COSTLY_EXPRESSION",
}


@settings(
    max_examples=examples(20, long=400), deadline=None, database=None, suppress_health_check=list(HealthCheck)
)
@given(statements=st.lists(diagnostic_statements(), min_size=1, max_size=6))
def test_generated_statements_over_the_diagnostic_views_never_show_the_canary(
    incident: Incident, mysql_env: MysqlTestEnv, statements: list[str]
) -> None:
    check_generated_statements(incident, mysql_env, statements)


def check_generated_statements(incident: Incident, mysql_env: MysqlTestEnv, statements: list[str]) -> None:
    """Whatever a model composes over the views (functions, comparisons, sorting, unions on statement
    text), the answer holds no canary and the server is unchanged; what is refused is refused for a
    stable reason, before the server."""
    before = server_state(mysql_env)

    async def run_all() -> None:
        adapter = mysql_env.adapter()
        try:
            for sql in statements:
                try:
                    result = await adapter.execute(mysql_request(sql))
                except ToolError as refused:
                    refusal = refused
                else:
                    assert incident.canary not in json.dumps(result.data), sql
                    continue
                assert refusal.code in ("POLICY_REJECTED", "BACKEND_ERROR"), sql
                if refusal.code == "POLICY_REJECTED":
                    assert refusal.reason in _REASONS, (sql, refusal.reason)
        finally:
            await adapter.aclose()

    asyncio.run(run_all())
    assert server_state(mysql_env) == before


def server_state(env: MysqlTestEnv) -> list[Any]:
    """What a write reaching the server would change, read on one connection without waiting on the
    incident's locks (the fixture's full fingerprint checksums `accounts`, whose row the holder locks)."""
    with root_connection() as conn, conn.cursor() as cur:
        state: list[Any] = []
        for sql in (
            "SELECT @@global.read_only, @@global.max_connections, @@global.sql_mode",
            f"SHOW TABLES FROM `{env.shop}`",
            f"SHOW TABLES FROM `{env.ops}`",
            f"SELECT id, secret FROM `{env.shop}`.canary ORDER BY id",
            f"SELECT COUNT(*), MAX(id) FROM `{env.shop}`.orders",
        ):
            cur.execute(sql)
            state.append(cur.fetchall())
    return state
