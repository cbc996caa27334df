"""Holes 3 and 4: what a `query_mysql` statement can cost is bounded by construction.

- The guard admits only functions whose value cannot grow faster than their inputs' total size. The
  property test feeds every allowed function the largest arguments a statement allows and evaluates it
  on the real MariaDB: the value stays within the `FUNCTION_COSTS` bound (factor x input + a constant).
- After a TIMEOUT the adapter kills the query and the connection and checks the process list; a thread
  that outlives that (one row's evaluation cannot be interrupted) is reported, in the audit too.
- Only a bounded prefix of each value crosses the wire: 100 rows of 3 MB cells cost a few MB, not 300.
"""

from __future__ import annotations

import asyncio
import dataclasses
import secrets
import time
import tracemalloc
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.mysql import MysqlTestEnv, mysql_request, root_connection
from tools.adapter import ToolError
from tools.boundary import ToolBoundary
from tools.definitions import MAX_SQL_BYTES, ToolName
from tools.mysql.guard import (
    ALLOWED_FUNCTIONS,
    BUILT_STRING_BYTES,
    CONSTANT_BYTES,
    FUNCTION_COSTS,
    SqlPolicyError,
    guard_sql,
)

pytestmark = pytest.mark.mysql

# --- the guard: functions that outgrow or outlast their input -------------------------------------------


@pytest.mark.parametrize(
    ("sql", "reason"),
    [
        # The statement of hole 3: accepted before, quadratic in size, not interruptible mid-row.
        (
            "SELECT REPLACE(REPLACE(note, 'a', '" + "a" * 200 + "'), 'a', 'bb') FROM orders",
            "FUNCTION_NOT_ALLOWED",
        ),
        ("SELECT LOCATE(CONCAT(note, 'b'), CONCAT(note, note)) FROM orders", "FUNCTION_NOT_ALLOWED"),
        ("SELECT CONCAT_WS('" + "x" * 500 + "', note, note, note) FROM orders", "FUNCTION_NOT_ALLOWED"),
        ("SELECT CAST('a' AS BINARY(1000000)) FROM orders", "COSTLY_EXPRESSION"),
        ("SELECT GROUP_CONCAT(note SEPARATOR '" + "x" * 100 + "') FROM orders", "COSTLY_EXPRESSION"),
        ("SELECT JSON_EXTRACT(note, '$', '$', '$', '$') FROM orders", "COSTLY_EXPRESSION"),
        ("SELECT id FROM orders WHERE note LIKE CONCAT('%', note, 'b%')", "COSTLY_EXPRESSION"),
    ],
)
def test_functions_that_outgrow_or_outlast_their_input_are_rejected(sql: str, reason: str) -> None:
    with pytest.raises(SqlPolicyError) as rejected:
        guard_sql(sql, database="shop", allowed_schemas=["shop"], max_rows=10)
    assert rejected.value.reason == reason


def test_strings_built_inside_a_query_are_capped() -> None:
    """CTEs that each double a value would reach the server's 16 MB packet in 8 steps."""
    guarded = guard_sql(
        "WITH a AS (SELECT CONCAT(note, note) AS x FROM orders), b AS (SELECT CONCAT(x, x) AS y FROM a) "
        "SELECT CONCAT(y, y) FROM b",
        database="shop",
        allowed_schemas=["shop"],
        max_rows=10,
    )
    assert guarded.sql.count("LEFT(CONCAT(") == 2
    assert guarded.sql.count(f", {BUILT_STRING_BYTES})") == 2


# --- the property: every allowed function stays within its bound on MariaDB ----------------------------

# Characters whose case mapping changes their UTF-8 length (ɐ -> Ɐ: 2 -> 3 bytes, ı -> I: 2 -> 1),
# CJK, and the characters of JSON and date formats; no quote or backslash (they are escaped below).
_TEXT = st.text(alphabet="abcXYZ019 ,:%-_.ɐıſß中文😀", min_size=1)
_FORMATS = st.lists(st.sampled_from(["%W", "%M", "%D", "%j", "%Y", "%x", "%p", "%r", "%T", "%a"]), min_size=1)


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


@dataclasses.dataclass(frozen=True)
class Case:
    """`call` over a one-row (or, for aggregates, many-row) table `t` of string columns a, b."""

    call: str
    a: str
    b: str = "x"
    rows: int = 1  # aggregates see the row `rows` times
    inputs: str = "GREATEST(1, LENGTH(a))"  # the inputs' total size, in bytes, per row


def _fill(room: int) -> st.SearchStrategy[str]:
    """A string filling `room` bytes of the statement (the statement limit is the real bound on literals)."""
    return _TEXT.map(lambda seed: seed * (room // max(1, len(seed.encode())) + 1))


def _sized(text: str, limit: int) -> str:
    out = []
    used = 0
    for ch in text:
        size = len(ch.encode())
        if used + size > limit:
            break
        out.append(ch)
        used += size
    return "".join(out) or "a"


CAST_TARGETS = (
    "CHAR", "NCHAR", "BINARY", "DECIMAL(65, 30)", "SIGNED", "UNSIGNED", "DOUBLE", "FLOAT", "DATE",
    "DATETIME(6)", "TIME", "CHAR CHARACTER SET latin1",
)  # fmt: skip


def _numeric_or(text: str, choice: str) -> str:
    """Half the draws a number as long as DECIMAL allows, half the big string itself."""
    return "9" * 35 + "." + "9" * 30 if len(choice) % 2 else text


BIG = 1600  # each of a and b: together with the rest of the statement, under MAX_SQL_BYTES
TWO = "GREATEST(1, LENGTH(a)) + GREATEST(1, LENGTH(b))"

# Per allowed function: how to build its call from drawn values (a big string, another string, formats).
TEMPLATES: dict[str, Callable[[str, str, str], Case]] = {
    "COUNT": lambda a, b, f: Case("COUNT(a)", a, rows=200),
    "SUM": lambda a, b, f: Case("SUM(LENGTH(a))", a, rows=200),
    "AVG": lambda a, b, f: Case("AVG(LENGTH(a))", a, rows=200),
    "MIN": lambda a, b, f: Case("MIN(a)", a, rows=50),
    "MAX": lambda a, b, f: Case("MAX(a)", a, rows=50),
    "GROUP_CONCAT": lambda a, b, f: Case("GROUP_CONCAT(a SEPARATOR '||||')", a[:3], rows=2000),
    "ROW_NUMBER": lambda a, b, f: Case("ROW_NUMBER() OVER (ORDER BY a)", a),
    "RANK": lambda a, b, f: Case("RANK() OVER (ORDER BY a)", a),
    "DENSE_RANK": lambda a, b, f: Case("DENSE_RANK() OVER (ORDER BY a)", a),
    "CONCAT": lambda a, b, f: Case("CONCAT(a, b, a, b)", a, b, inputs=f"2 * ({TWO})"),
    "SUBSTRING": lambda a, b, f: Case("SUBSTRING(a, 1, 1000000)", a),
    "LEFT": lambda a, b, f: Case("LEFT(a, 1000000)", a),
    "RIGHT": lambda a, b, f: Case("RIGHT(a, 1000000)", a),
    "TRIM": lambda a, b, f: Case("TRIM(BOTH 'x' FROM a)", a),
    "LOWER": lambda a, b, f: Case("LOWER(a)", a.upper()),
    "UPPER": lambda a, b, f: Case("UPPER(a)", a),
    "LENGTH": lambda a, b, f: Case("LENGTH(a)", a),
    "CHAR_LENGTH": lambda a, b, f: Case("CHAR_LENGTH(a)", a),
    "COALESCE": lambda a, b, f: Case("COALESCE(NULL, a, b)", a, b, inputs=TWO),
    "IFNULL": lambda a, b, f: Case("IFNULL(a, b)", a, b, inputs=TWO),
    "NULLIF": lambda a, b, f: Case("NULLIF(a, b)", a, b, inputs=TWO),
    "IF": lambda a, b, f: Case("IF(a < b, a, b)", a, b, inputs=TWO),
    "CASE": lambda a, b, f: Case("CASE WHEN a < b THEN a ELSE b END", a, b, inputs=TWO),
    "CAST": lambda a, b, f: Case(f"CAST(a AS {CAST_TARGETS[len(f) % len(CAST_TARGETS)]})", _numeric_or(a, f)),
    "GREATEST": lambda a, b, f: Case("GREATEST(a, b)", a, b, inputs=TWO),
    "LEAST": lambda a, b, f: Case("LEAST(a, b)", a, b, inputs=TWO),
    "EXISTS": lambda a, b, f: Case("EXISTS (SELECT 1)", a),
    "COLLATE": lambda a, b, f: Case("a COLLATE utf8mb4_bin", a),
    "NOW": lambda a, b, f: Case("NOW(6)", a),
    "CURRENT_TIMESTAMP": lambda a, b, f: Case("CURRENT_TIMESTAMP", a),
    "CURRENT_DATE": lambda a, b, f: Case("CURRENT_DATE", a),
    "CURDATE": lambda a, b, f: Case("CURDATE()", a),
    "DATE": lambda a, b, f: Case("DATE(a)", "2026-11-30 02:10:00.123456"),
    "TIMESTAMP": lambda a, b, f: Case("TIMESTAMP(a)", "2026-11-30 02:10:00.123456"),
    "DATE_SUB": lambda a, b, f: Case("DATE_SUB(a, INTERVAL 1 DAY)", "2026-11-30 02:10:00.123456"),
    "DATE_ADD": lambda a, b, f: Case("DATE_ADD(a, INTERVAL 1 DAY)", "2026-11-30 02:10:00.123456"),
    "TIMESTAMPDIFF": lambda a, b, f: Case(
        "TIMESTAMPDIFF(SECOND, a, b)", "1970-01-01", "2100-01-01", inputs=TWO
    ),
    "DATEDIFF": lambda a, b, f: Case("DATEDIFF(a, b)", "1000-01-01", "9999-12-31", inputs=TWO),
    "UNIX_TIMESTAMP": lambda a, b, f: Case("UNIX_TIMESTAMP(a)", "2026-11-30 02:10:00.123456"),
    "FROM_UNIXTIME": lambda a, b, f: Case("FROM_UNIXTIME(1700000000, a)", f),
    "EXTRACT": lambda a, b, f: Case("EXTRACT(MICROSECOND FROM a)", "2026-11-30 02:10:00.123456"),
    "YEAR": lambda a, b, f: Case("YEAR(a)", "2026-11-30"),
    "MONTH": lambda a, b, f: Case("MONTH(a)", "2026-11-30"),
    "DAY": lambda a, b, f: Case("DAY(a)", "2026-11-30"),
    "HOUR": lambda a, b, f: Case("HOUR(a)", "02:10:00"),
    "MINUTE": lambda a, b, f: Case("MINUTE(a)", "02:10:00"),
    "SECOND": lambda a, b, f: Case("SECOND(a)", "02:10:00"),
    "DATE_FORMAT": lambda a, b, f: Case("DATE_FORMAT('2026-09-30 02:10:00', a)", f),
    "ROUND": lambda a, b, f: Case("ROUND(a, 30)", "9" * 60),
    "FLOOR": lambda a, b, f: Case("FLOOR(a)", "-" + "9" * 60),
    "CEIL": lambda a, b, f: Case("CEIL(a)", "9" * 60 + ".5"),
    "ABS": lambda a, b, f: Case("ABS(a)", "-" + "9" * 60),
    # A JSON array of one-character numbers: MariaDB re-serializes `1,1` as `1, 1`.
    "JSON_EXTRACT": lambda a, b, f: Case(
        "JSON_EXTRACT(a, '$')", "[" + ",".join("1" * (len(a) // 2 or 1)) + "]"
    ),
    "JSON_UNQUOTE": lambda a, b, f: Case("JSON_UNQUOTE(a)", '"' + a.replace('"', "") + '"'),
    "DATABASE": lambda a, b, f: Case("DATABASE()", a),
    "VERSION": lambda a, b, f: Case("VERSION()", a),
    # The delimiter is a short literal (the guard refuses longer ones): the value is a prefix of `a`.
    "SUBSTRING_INDEX": lambda a, b, f: Case("SUBSTRING_INDEX(a, 'x', 1000000)", a),
    "TIME_TO_SEC": lambda a, b, f: Case("TIME_TO_SEC(a)", "838:59:59.999999"),
    "SEC_TO_TIME": lambda a, b, f: Case("SEC_TO_TIME(a)", "9" * 60),
}


def test_every_allowed_function_has_a_cost_and_a_template() -> None:
    assert set(FUNCTION_COSTS) == ALLOWED_FUNCTIONS == set(TEMPLATES)


def _statement(case: Case) -> str:
    row = f"(SELECT {_literal(case.a)} AS a, {_literal(case.b)} AS b) AS r"
    if case.rows == 1:
        return f"SELECT LENGTH({case.call}) AS out_bytes, {case.inputs} AS in_bytes FROM {row}"
    # Aggregates: the same row `rows` times, through the numbers table.
    rows = f"{row} CROSS JOIN numbers AS k WHERE k.n <= {case.rows}"
    return f"SELECT LENGTH({case.call}) AS out_bytes, SUM({case.inputs}) AS in_bytes FROM {rows}"


@pytest.fixture(scope="module")
def evaluate(mysql_env: MysqlTestEnv) -> Iterator[Callable[[str], tuple[int, int]]]:
    """Runs the guarded statement on MariaDB in the session the adapter sets up (GROUP_CONCAT cap)."""
    conn = root_connection(mysql_env.shop)
    with conn.cursor() as cur:
        cur.execute(f"SET SESSION group_concat_max_len = {BUILT_STRING_BYTES}, max_statement_time = 30")

    def run(sql: str) -> tuple[int, int]:
        guarded = guard_sql(sql, database=mysql_env.shop, allowed_schemas=[mysql_env.shop], max_rows=10)
        with conn.cursor() as cur:
            cur.execute(guarded.sql)
            row = cur.fetchone()
        assert row is not None
        out, total = row
        return int(out or 0), int(total or 0)

    try:
        yield run
    finally:
        conn.close()


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_each_function_stays_within_its_cost_bound(
    name: str, evaluate: Callable[[str], tuple[int, int]]
) -> None:
    cost = FUNCTION_COSTS[name]
    template = TEMPLATES[name]

    @settings(
        max_examples=24 if name == "CAST" else 6,  # CAST: enough draws to meet every target type
        deadline=None,
        database=None,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.large_base_example,
        ],
    )
    @given(a=_fill(BIG), b=_fill(BIG // 4), formats=_FORMATS)
    def check(a: str, b: str, formats: list[str]) -> None:
        fmt = "".join(formats * (BIG // (2 * len(formats)) + 1))
        case = template(_sized(a, BIG), _sized(b, BIG // 4), fmt[: BIG - 2])
        sql = _statement(case)
        assert len(sql.encode()) <= MAX_SQL_BYTES, len(sql.encode())
        out, inputs = evaluate(sql)
        assert out <= cost.factor * inputs + CONSTANT_BYTES, (name, out, inputs, cost)

    check()


# --- after a TIMEOUT: KILL QUERY, KILL CONNECTION, and a check of the process list ----------------------


def _marker() -> str:
    return f"dc_sec_{secrets.token_hex(4)}"


def _uninterruptible(marker: str) -> str:
    """A naive substring search over 1 MB (what LOCATE did before the guard refused it): seconds spent
    inside one row's evaluation, which neither KILL QUERY nor KILL CONNECTION can interrupt."""
    return (
        "WITH RECURSIVE s (x, n) AS (SELECT CAST('a' AS CHAR(2000000)), 1 UNION ALL "
        "SELECT CONCAT(x, x), n + 1 FROM s WHERE n < 21) "
        f"SELECT '{marker}' AS marker, LOCATE(CONCAT(LEFT(x, 8000), 'b'), x) AS found FROM s WHERE n = 21"
    )


async def _threads_with(env: MysqlTestEnv, marker: str) -> list[tuple[Any, ...]]:
    """Server threads whose statement carries `marker`, in any state (a killed one shows `Killed`)."""
    return await env.admin_async(
        "SELECT id, command, state FROM information_schema.processlist "
        "WHERE id <> CONNECTION_ID() AND info LIKE CONCAT('%%', %s, %s, '%%')",
        (marker[:4], marker[4:]),
    )


async def _gone(env: MysqlTestEnv, marker: str, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while await _threads_with(env, marker):
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.2)
    return True


async def test_a_thread_that_outlives_the_kill_is_reported_to_the_audit(
    mysql_env: MysqlTestEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Defence in depth behind the guard: a statement it should never have let through."""
    marker = _marker()
    smuggled = _uninterruptible(marker)

    def broken_guard(_: str, **kwargs: Any) -> Any:
        return dataclasses.replace(guard_sql("SELECT 1", **kwargs), sql=smuggled, columns_sql=None)

    monkeypatch.setattr("tools.mysql.adapter.guard_sql", broken_guard)
    # The kill lands ~1.2 s in (the limit plus the client's margin); the search runs ~4 s, so it
    # outlives the 0.5 s verification by seconds, not by a margin a busy server could eat.
    adapter = mysql_env.adapter(statement_timeout_ms=200, kill_verify_s=0.5)
    boundary = ToolBoundary({ToolName.QUERY_MYSQL: adapter})
    try:
        outcome = await boundary.invoke(mysql_request("SELECT 1"))
        # The invocation (and so its audit row, whose `reason` column this fills) says the query lives on.
        assert (outcome.status, outcome.error_code, outcome.reason) == (
            "ERROR",
            "TIMEOUT",
            "QUERY_STILL_RUNNING",
        )
    finally:
        await adapter.aclose()
        # Never leave a runaway query behind: the killed thread ends once its row is evaluated.
        assert await _gone(mysql_env, marker, timeout_s=180), "the killed statement is still running"


async def test_a_killed_statement_leaves_no_thread_behind_when_the_call_returns(
    mysql_env: MysqlTestEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = _marker()
    adapter = mysql_env.adapter(statement_timeout_ms=300)
    monkeypatch.setattr(adapter, "_time_limit_sql", lambda conn: "SET SESSION max_statement_time = 0")
    heavy = (
        f"SELECT '{marker}' AS marker, COUNT(*) FROM numbers a, numbers b, numbers c "
        "WHERE a.n + b.n + c.n = -1"
    )
    try:
        with pytest.raises(ToolError) as err:
            await adapter.execute(mysql_request(heavy))
        assert (err.value.code, err.value.reason) == ("TIMEOUT", None)
        # No waiting here: the adapter returned only after the process list showed the thread gone.
        assert await _threads_with(mysql_env, marker) == []
    finally:
        await adapter.aclose()
        assert await _gone(mysql_env, marker, timeout_s=30)


# --- hole 4: a byte cap on what crosses the wire ----------------------------------------------------------

# 100 rows of 3 MB cells, built in the returned projection from a CTE (each of its values is capped at
# 64 KB inside the query; 47 of them end to end make 3 MB).
HUGE_CELLS = (
    "WITH c AS (SELECT CONCAT(" + ", ".join(["note"] * 13) + ") AS x FROM artifacts) "
    "SELECT n, CONCAT("
    + ", ".join(["x"] * 47)
    + ") AS body FROM c, numbers WHERE n <= 100 ORDER BY n LIMIT 100"
)
PEAK_BOUND_BYTES = 16 * 1024 * 1024


async def test_a_hundred_3mb_cells_cost_a_few_mb_not_300(mysql_env: MysqlTestEnv) -> None:
    adapter = mysql_env.adapter(max_rows=100, statement_timeout_ms=120_000)
    try:
        await adapter.execute(mysql_request("SELECT 1"))  # connection and imports before measuring
        tracemalloc.start()
        try:
            result = await adapter.execute(mysql_request(HUGE_CELLS))
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    finally:
        await adapter.aclose()
    rows = result.data["rows"]
    assert result.status == "FOUND"
    assert len(rows) == 100
    assert result.data["truncated"] is True
    assert all(len(body) == 200 and set(body) == {"x"} for _, body in rows)  # a prefix, cut to the cell cap
    assert [n for n, _ in rows] == list(range(1, 101))  # the statement's order survives the wrapping
    assert peak < PEAK_BOUND_BYTES, f"peak {peak / 2**20:.1f} MiB for one call"


async def test_each_column_crosses_the_wire_in_the_form_its_type_needs(mysql_env: MysqlTestEnv) -> None:
    """Numbers and times come as they are, long text as its prefix, long binary data as a pair (so it is
    still known to be cut): whatever the form, the projection is the same bounded, typed one."""
    adapter = mysql_env.adapter()
    sql = (
        "SELECT id, CAST('2026-01-02 03:04:05' AS DATETIME) AS d, 12.50 AS amount, note, 'short' AS short,"
        " digest, CAST(note AS BINARY) AS long_blob FROM artifacts"
    )
    try:
        result = await adapter.execute(mysql_request(sql))
    finally:
        await adapter.aclose()
    ((n, d, amount, note, short, digest, long_blob),) = result.data["rows"]
    assert (n, d, amount, short) == (1, "2026-01-02T03:04:05", 12.5, "short")
    assert note == "x" * 200  # 5,000 characters in the table
    # The wire cap: 4 bytes a character of the 200 shown, one more, and 256 of redaction context.
    assert (digest, long_blob) == ("<16 bytes>", "<more than 1828 bytes>")
    assert result.data["truncated"] is True
