"""The `query_mysql` read-only policy: every hostile statement is rejected for its stable reason, every
legitimate one is accepted with the exact text that will run, and random statements never slip through.
"""

from __future__ import annotations

import re
import typing

import pytest
import sqlglot
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.hypothesis_budget import examples
from tests.support.raising import returned_or_raised
from tests.support.sql_corpus import ALLOWED_SCHEMAS, DATABASE, HOSTILE, LEGIT
from tools.mysql.guard import (
    ALLOWED_FUNCTIONS,
    SYSTEM_SCHEMAS,
    GuardedStatement,
    PolicyReason,
    SqlPolicyError,
    guard_sql,
)

MAX_ROWS = 10
CAP = MAX_ROWS + 1
REASONS = frozenset(PolicyReason)


def guard(sql: str, **overrides: typing.Any) -> GuardedStatement:
    options: dict[str, typing.Any] = {
        "database": DATABASE,
        "allowed_schemas": ALLOWED_SCHEMAS,
        "max_rows": MAX_ROWS,
    }
    options.update(overrides)
    return guard_sql(sql, **options)


def rejection(sql: str, **overrides: typing.Any) -> str:
    with pytest.raises(SqlPolicyError) as caught:
        guard(sql, **overrides)
    return caught.value.reason


# --- the corpus -------------------------------------------------------------------------------


def test_corpus_covers_every_reason() -> None:
    assert len(HOSTILE) >= 70
    assert {reason for _, reason in HOSTILE} == REASONS - {"NO_DATABASE"}  # NO_DATABASE needs database=None


@pytest.mark.parametrize(("sql", "reason"), HOSTILE, ids=[f"hostile-{i}" for i in range(len(HOSTILE))])
def test_hostile_statement_is_rejected_with_its_reason(sql: str, reason: str) -> None:
    assert rejection(sql) == reason


@pytest.mark.parametrize("sql", LEGIT, ids=[f"legit-{i}" for i in range(len(LEGIT))])
def test_legit_statement_is_accepted(sql: str) -> None:
    guarded = guard(sql)
    first_word = sql.lstrip("( \n").split()[0].upper()
    expected_kind = {"SHOW": "SHOW", "DESCRIBE": "DESCRIBE", "DESC": "DESCRIBE", "EXPLAIN": "EXPLAIN"}
    if sql.upper().endswith("PROCESSLIST"):  # runs as a SELECT of information_schema.PROCESSLIST
        expected_kind = {}
    assert guarded.kind == expected_kind.get(first_word, "SELECT")
    assert set(guarded.schemas) <= {"shop", "ops"} | _SYSTEM_SCHEMAS
    assert_read_only(guarded)
    if guarded.kind in ("SELECT", "EXPLAIN"):
        assert guarded.row_limit == CAP
        assert outer_limit(guarded) <= CAP
    else:
        assert guarded.row_limit is None


# --- LIMIT clamp ------------------------------------------------------------------------------


def outer_limit(guarded: GuardedStatement) -> int:
    """The LIMIT of the statement as MySQL will read it, parsed independently of the guard's tree."""
    text = guarded.sql.removeprefix("EXPLAIN ")
    limit = sqlglot.parse_one(text, read="mysql").args["limit"]
    return int(limit.expression.this)


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SELECT * FROM orders", "SELECT * FROM `shop`.`orders` LIMIT 11"),
        ("SELECT * FROM orders LIMIT 5", "SELECT * FROM `shop`.`orders` LIMIT 5"),
        ("SELECT * FROM orders LIMIT 11", "SELECT * FROM `shop`.`orders` LIMIT 11"),
        ("SELECT * FROM orders LIMIT 12", "SELECT * FROM `shop`.`orders` LIMIT 11"),
        ("SELECT * FROM orders LIMIT 100000", "SELECT * FROM `shop`.`orders` LIMIT 11"),
        ("SELECT * FROM orders LIMIT 20, 100000", "SELECT * FROM `shop`.`orders` LIMIT 11 OFFSET 20"),
        ("SELECT * FROM orders LIMIT 3 OFFSET 2", "SELECT * FROM `shop`.`orders` LIMIT 3 OFFSET 2"),
        (
            "SELECT id FROM orders UNION SELECT id FROM ops.deploys",
            "SELECT `id` FROM `shop`.`orders` UNION SELECT `id` FROM `ops`.`deploys` LIMIT 11",
        ),
        (
            "(SELECT id FROM orders LIMIT 500) UNION ALL (SELECT id FROM ops.deploys LIMIT 2)",
            "(SELECT `id` FROM `shop`.`orders` LIMIT 500) UNION ALL "
            "(SELECT `id` FROM `ops`.`deploys` LIMIT 2) LIMIT 11",
        ),
        (
            "SELECT * FROM (SELECT * FROM orders LIMIT 500) AS x",
            "SELECT * FROM (SELECT * FROM `shop`.`orders` LIMIT 500) AS `x` LIMIT 11",
        ),
        (
            "WITH c AS (SELECT * FROM orders) SELECT * FROM c LIMIT 50",
            "WITH `c` AS (SELECT * FROM `shop`.`orders`) SELECT * FROM `c` LIMIT 11",
        ),
        ("(SELECT 1)", "SELECT 1 LIMIT 11"),
        ("SELECT 1 FROM DUAL", "SELECT 1 LIMIT 11"),
    ],
)
def test_outer_limit_is_clamped_to_max_rows_plus_one(sql: str, expected: str) -> None:
    guarded = guard(sql)
    assert (guarded.kind, guarded.sql, guarded.row_limit) == ("SELECT", expected, CAP)


def test_explain_clamps_the_explained_select_once() -> None:
    guarded = guard("EXPLAIN SELECT * FROM orders WHERE status = 'PENDING'")
    assert guarded.kind == "EXPLAIN"
    assert guarded.sql == "EXPLAIN SELECT * FROM `shop`.`orders` WHERE `status` = 'PENDING' LIMIT 11"
    assert guarded.row_limit == CAP
    small = guard("explain select id from orders limit 3")
    assert small.sql == "EXPLAIN SELECT `id` FROM `shop`.`orders` LIMIT 3"
    assert guard("DESCRIBE SELECT 1").sql == "EXPLAIN SELECT 1 LIMIT 11"


def test_limit_must_be_a_literal() -> None:
    assert rejection("SELECT * FROM orders LIMIT 1e3") == "UNSUPPORTED_STATEMENT"
    assert rejection("(SELECT * FROM orders) LIMIT 3") == "UNSUPPORTED_STATEMENT"


# --- SHOW / DESCRIBE: rebuilt text, never sqlglot's ------------------------------------------------


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SHOW FULL COLUMNS FROM shop.orders", "SHOW FULL COLUMNS FROM `shop`.`orders`"),
        ("show columns in orders from SHOP", "SHOW COLUMNS FROM `shop`.`orders`"),
        ("SHOW FIELDS FROM `ops`.`deploys` LIKE 'st%'", "SHOW COLUMNS FROM `ops`.`deploys` LIKE 'st%'"),
        ("SHOW INDEX FROM shop.payments", "SHOW INDEX FROM `shop`.`payments`"),
        ("SHOW KEYS IN payments", "SHOW INDEX FROM `shop`.`payments`"),
        ("SHOW CREATE TABLE ops.deploys;", "SHOW CREATE TABLE `ops`.`deploys`"),
        ("SHOW TABLES", "SHOW TABLES FROM `shop`"),
        ("SHOW FULL TABLES IN ops LIKE 'dep%'", "SHOW FULL TABLES FROM `ops` LIKE 'dep%'"),
        ("DESC shop.orders", "DESCRIBE `shop`.`orders`"),
        ("EXPLAIN orders", "DESCRIBE `shop`.`orders`"),
        ("DESCRIBE `odd``name`", "DESCRIBE `shop`.`odd``name`"),
    ],
)
def test_show_and_describe_execute_rebuilt_text(sql: str, expected: str) -> None:
    guarded = guard(sql)
    assert guarded.sql == expected
    assert guarded.row_limit is None
    try:
        regenerated = sqlglot.parse_one(sql, read="mysql").sql(dialect="mysql")
    except sqlglot.ParseError:  # sqlglot cannot even read `SHOW COLUMNS IN t FROM db`
        regenerated = None
    assert guarded.sql != regenerated


def test_show_uses_the_configured_spelling_of_the_schema() -> None:
    guarded = guard("SHOW TABLES FROM OPS", allowed_schemas=["Shop", "Ops"], database="shop")
    assert (guarded.sql, guarded.schemas) == ("SHOW TABLES FROM `Ops`", ("ops",))


# --- comments versus quoted text --------------------------------------------------------------


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT '--', '-- x', '#', '/*', '*/', '/*!50000 x*/', ';' FROM orders",
        'SELECT "-- x", "# y", "/*+ z */" FROM orders',
        "SELECT `a--b`, `c#d`, `e/*f` FROM orders",
        "SELECT * FROM orders WHERE note = 'it''s -- fine'",
        "SELECT * FROM orders WHERE note = 'back\\\\slash'",
    ],
)
def test_comment_markers_inside_quotes_are_allowed(sql: str) -> None:
    assert guard(sql).kind == "SELECT"


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT 1 -- x",
        "SELECT 1 #x",
        "SELECT 1 /* x */",
        "SELECT '#' /* x */",
        "SELECT `a` -- x",
        "SELECT 'it''s' -- x",
        "SHOW TABLES -- x",
        "DESCRIBE orders #",
        "SELECT 'a\\' -- '",  # NO_BACKSLASH_ESCAPES ends the string at \\'
    ],
)
def test_comment_outside_quotes_is_rejected(sql: str) -> None:
    assert rejection(sql) == "COMMENT"


# --- functions ----------------------------------------------------------------------------------

# One call per allowlisted MySQL function, written the way a MySQL user would write it.
SAMPLE_CALLS = {
    "COUNT": "COUNT(*)",
    "SUM": "SUM(total)",
    "AVG": "AVG(total)",
    "MIN": "MIN(total)",
    "MAX": "MAX(total)",
    "GROUP_CONCAT": "GROUP_CONCAT(status ORDER BY id SEPARATOR ',')",
    "ROW_NUMBER": "ROW_NUMBER() OVER (ORDER BY id)",
    "RANK": "RANK() OVER (ORDER BY id)",
    "DENSE_RANK": "DENSE_RANK() OVER (PARTITION BY status ORDER BY id)",
    "CONCAT": "CONCAT(status, '-', id)",
    "SUBSTRING": "SUBSTRING(note, 1, 20)",
    "LEFT": "LEFT(note, 3)",
    "RIGHT": "RIGHT(note, 3)",
    "LOWER": "LOWER(status)",
    "UPPER": "UPPER(status)",
    "TRIM": "TRIM(note)",
    "LENGTH": "LENGTH(note)",
    "CHAR_LENGTH": "CHAR_LENGTH(note)",
    "COALESCE": "COALESCE(note, '')",
    "IFNULL": "IFNULL(note, '')",
    "NULLIF": "NULLIF(note, '')",
    "IF": "IF(total > 1, 'a', 'b')",
    "CASE": "CASE status WHEN 'A' THEN 1 ELSE 0 END",
    "CAST": "CAST(total AS CHAR)",
    "GREATEST": "GREATEST(1, total)",
    "LEAST": "LEAST(1, total)",
    "EXISTS": "EXISTS (SELECT 1 FROM ops.payments)",
    "COLLATE": "status COLLATE utf8mb4_bin",
    "NOW": "NOW()",
    "CURRENT_TIMESTAMP": "CURRENT_TIMESTAMP",
    "CURRENT_DATE": "CURRENT_DATE",
    "CURDATE": "CURDATE()",
    "DATE": "DATE(created_at)",
    "TIMESTAMP": "TIMESTAMP(created_at)",
    "DATE_FORMAT": "DATE_FORMAT(created_at, '%Y-%m-%d %H:00')",
    "DATE_SUB": "DATE_SUB(NOW(), INTERVAL 1 HOUR)",
    "DATE_ADD": "DATE_ADD(created_at, INTERVAL 5 MINUTE)",
    "TIMESTAMPDIFF": "TIMESTAMPDIFF(SECOND, created_at, NOW())",
    "DATEDIFF": "DATEDIFF(NOW(), created_at)",
    "UNIX_TIMESTAMP": "UNIX_TIMESTAMP(created_at)",
    "FROM_UNIXTIME": "FROM_UNIXTIME(1700000000)",
    "EXTRACT": "EXTRACT(HOUR FROM created_at)",
    "YEAR": "YEAR(created_at)",
    "MONTH": "MONTH(created_at)",
    "DAY": "DAY(created_at)",
    "HOUR": "HOUR(created_at)",
    "MINUTE": "MINUTE(created_at)",
    "SECOND": "SECOND(created_at)",
    "ROUND": "ROUND(total, 2)",
    "FLOOR": "FLOOR(total)",
    "CEIL": "CEIL(total)",
    "ABS": "ABS(total)",
    "JSON_EXTRACT": "JSON_EXTRACT(payload, '$.error')",
    "JSON_UNQUOTE": "JSON_UNQUOTE(JSON_EXTRACT(payload, '$.error'))",
    "DATABASE": "DATABASE()",
    "VERSION": "VERSION()",
    "SUBSTRING_INDEX": "SUBSTRING_INDEX(note, ':', 1)",
    "TIME_TO_SEC": "TIME_TO_SEC(created_at)",
    "SEC_TO_TIME": "SEC_TO_TIME(total)",
}


def test_every_allowlisted_function_has_a_sample() -> None:
    assert set(SAMPLE_CALLS) == ALLOWED_FUNCTIONS


def test_json_arrows() -> None:
    guarded = guard("SELECT payload->'$.a' FROM ops.deploys")
    assert guarded.sql == "SELECT JSON_EXTRACT(`payload`, '$.a') FROM `ops`.`deploys` LIMIT 11"
    # sqlglot keeps `->>` as an operator, which MariaDB lacks: JSON_UNQUOTE(JSON_EXTRACT(...)) runs on both.
    assert rejection("SELECT payload->>'$.a' FROM ops.deploys") == "FUNCTION_NOT_ALLOWED"
    # Inside a call sqlglot reads `->` as a lambda: rejected rather than guessed.
    assert rejection("SELECT JSON_UNQUOTE(payload->'$.a') FROM ops.deploys") == "UNSUPPORTED_STATEMENT"


@pytest.mark.parametrize(("name", "call"), sorted(SAMPLE_CALLS.items()))
def test_allowlisted_function_is_accepted(name: str, call: str) -> None:
    guarded = guard(f"SELECT {call} FROM orders")
    assert guarded.kind == "SELECT"
    assert_read_only(guarded)


@pytest.mark.parametrize(
    "call",
    [
        "SLEEP(1)",
        "BENCHMARK(10, 1)",
        "LOAD_FILE('/etc/passwd')",
        "GET_LOCK('x', 1)",
        "RELEASE_LOCK('x')",
        "IS_FREE_LOCK('x')",
        "MASTER_POS_WAIT('f', 4)",
        "SOURCE_POS_WAIT('f', 4)",
        "WAIT_FOR_EXECUTED_GTID_SET('x')",
        "USER()",
        "CURRENT_USER()",
        "CONNECTION_ID()",
        "SYS_EVAL('id')",
        "LAST_INSERT_ID()",
        "ROW_COUNT()",
        "FOUND_ROWS()",
        "UUID()",
        "RAND()",
        "SPACE(100000000)",
        "LPAD('a', 100000000, 'b')",
        "a REGEXP 'x'",
        "a SOUNDS LIKE 'x'",
        "MATCH(note) AGAINST ('x')",
        "CHAR(65)",
        "LOCALTIME",
        "UTC_DATE()",
        "NEXTVAL(seq)",
        "SETVAL(seq, 1)",
        "AES_DECRYPT(note, 'k')",
        "`NOW`()",
        "shop.cleanup(1)",
        "REPLACE(note, 'a', 'b')",
        "LOCATE('x', note)",
        "CONCAT_WS(',', status, id)",
    ],
)
def test_function_outside_the_allowlist_is_rejected(call: str) -> None:
    assert rejection(f"SELECT {call} FROM orders") == "FUNCTION_NOT_ALLOWED"


# --- schemas and CTE scoping --------------------------------------------------------------------


def test_unqualified_table_needs_a_database() -> None:
    assert rejection("SELECT * FROM orders", database=None) == "NO_DATABASE"
    assert rejection("SHOW TABLES", database=None) == "NO_DATABASE"
    assert rejection("DESCRIBE orders", database=None) == "NO_DATABASE"
    assert guard("SELECT * FROM ops.deploys", database=None).schemas == ("ops",)
    assert guard("SELECT 1", database=None).schemas == ()


def test_the_database_itself_must_be_allowed() -> None:
    assert rejection("SELECT 1", database="billing") == "SCHEMA_NOT_ALLOWED"
    assert rejection("SELECT 1", database="mysql", allowed_schemas=["mysql", "shop"]) == "SYSTEM_SCHEMA"
    for schema in SYSTEM_SCHEMAS:
        sql = f"SELECT * FROM {schema}.anything"
        assert rejection(sql, allowed_schemas=[*ALLOWED_SCHEMAS, schema]) == "SYSTEM_SCHEMA"


def test_schema_match_is_case_insensitive_and_executes_the_configured_spelling() -> None:
    guarded = guard("SELECT SHOP.orders.id FROM SHOP.orders", allowed_schemas=["Shop"], database=None)
    assert guarded.sql == "SELECT `Shop`.`orders`.`id` FROM `Shop`.`orders` LIMIT 11"
    assert guarded.schemas == ("shop",)


def test_cte_names_are_not_tables_but_only_where_mysql_sees_them() -> None:
    assert guard("WITH c AS (SELECT 1 AS x) SELECT * FROM c", database=None).schemas == ()
    recursive = (
        "WITH RECURSIVE r AS (SELECT 1 AS n UNION ALL SELECT n + 1 FROM r WHERE n < 3) SELECT * FROM r"
    )
    assert guard(recursive, database=None).schemas == ()
    # A non-recursive CTE cannot see itself or later CTEs: those names are tables in `database`.
    shadow = guard("WITH orders AS (SELECT * FROM orders) SELECT * FROM orders")
    assert shadow.sql == "WITH `orders` AS (SELECT * FROM `shop`.`orders`) SELECT * FROM `orders` LIMIT 11"
    assert rejection("WITH a AS (SELECT * FROM b), b AS (SELECT 1) SELECT * FROM a", database=None) == (
        "NO_DATABASE"
    )
    assert rejection("WITH user AS (SELECT 1) SELECT * FROM mysql.user") == "SYSTEM_SCHEMA"


# --- size and shape -----------------------------------------------------------------------------


def test_size_cap_counts_utf8_bytes() -> None:
    sql = "SELECT '" + "é" * 30 + "'"  # 39 characters, 69 bytes
    assert rejection(sql, max_bytes=50) == "TOO_LONG"
    assert guard(sql, max_bytes=69).kind == "SELECT"


def test_trailing_semicolon_is_allowed_once() -> None:
    assert guard("SELECT 1 ;  ").sql == "SELECT 1 LIMIT 11"
    assert rejection("SELECT 1; ;") == "MULTI_STATEMENT"


def test_deep_nesting_is_a_parse_error_not_a_crash() -> None:
    assert rejection("SELECT " + "(" * 1500 + "1" + ")" * 1500, max_bytes=10_000) == "PARSE_ERROR"


def test_text_that_cannot_be_sent_is_a_parse_error() -> None:
    assert rejection("SELECT '\ud800'") == "PARSE_ERROR"  # lone surrogate: not encodable as UTF-8


def test_invalid_limits_are_programming_errors() -> None:
    with pytest.raises(ValueError, match="max_rows and max_bytes must be positive"):
        guard("SELECT 1", max_rows=0)


# --- property: whatever is accepted is read-only by an independent reading -------------------------

_QUOTED = re.compile(r"'(?:[^'\\]|\\.|'')*'|\"(?:[^\"\\]|\\.|\"\")*\"|`(?:[^`]|``)*`", re.DOTALL)
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*")
_READ_STARTS = frozenset({"SELECT", "WITH", "SHOW", "DESCRIBE", "DESC", "EXPLAIN"})
# Words that never appear unquoted in an accepted statement: statements that change something,
# clauses that write or lock, and functions that wait, lock, read files or reveal the account.
_FORBIDDEN_WORDS = frozenset({
    "INSERT", "UPDATE", "DELETE", "MERGE", "DROP", "TRUNCATE", "ALTER", "RENAME", "CREATE", "GRANT",
    "REVOKE", "LOAD", "CALL", "HANDLER", "LOCK", "UNLOCK", "DO", "KILL", "FLUSH", "PREPARE", "EXECUTE",
    "DEALLOCATE", "XA", "START", "BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "INTO", "OUTFILE", "DUMPFILE",
    "ANALYZE", "OPTIMIZE", "REPAIR", "INSTALL", "UNINSTALL", "SHUTDOWN", "RESET", "PURGE", "CHANGE", "USE",
    "SHARE", "PROCESSLIST", "GRANTS", "VARIABLES", "STATUS", "DATABASES", "SLEEP", "BENCHMARK", "LOAD_FILE",
    "GET_LOCK", "RELEASE_LOCK", "RELEASE_ALL_LOCKS", "IS_FREE_LOCK", "IS_USED_LOCK", "MASTER_POS_WAIT",
    "SOURCE_POS_WAIT", "MASTER_GTID_WAIT", "WAIT_FOR_EXECUTED_GTID_SET", "WAIT_UNTIL_SQL_THREAD_AFTER_GTIDS",
    "SYS_EVAL", "SYS_EXEC", "USER", "CURRENT_USER", "SESSION_USER", "SYSTEM_USER", "CONNECTION_ID",
    "NEXTVAL", "SETVAL", "LASTVAL",
})  # fmt: skip
_TABLE_REFERENCE = re.compile(r"\b(?:FROM|JOIN)\s+\(*\s*`((?:[^`]|``)+)`\.`((?:[^`]|``)+)`", re.IGNORECASE)
_SYSTEM_SCHEMAS = frozenset({"mysql", "information_schema", "performance_schema", "sys"})
# System tables that hold credentials, other sessions' variables or every statement ever run: whatever
# the guard's allow-list says, no accepted statement names one.
_NEVER_READ = frozenset(
    {
        ("mysql", "user"), ("mysql", "global_priv"), ("mysql", "general_log"), ("mysql", "servers"),
        ("mysql", "db"), ("mysql", "proxies_priv"), ("information_schema", "user_privileges"),
        ("information_schema", "routines"), ("information_schema", "user_variables"),
        ("performance_schema", "user_variables_by_thread"), ("performance_schema", "session_connect_attrs"),
        ("performance_schema", "session_account_connect_attrs"),
    }
)  # fmt: skip
# Columns holding another session's SQL or a server message: an accepted statement only shows them
# (`SELECT ..., x, ...` or `x AS y`) or tests them for NULL; comparing them is an oracle on their text.
_OTHER_SESSIONS_TEXT = frozenset({
    "info", "info_binary", "trx_query", "lock_data", "processlist_info", "sql_text", "query_sample_text",
    "waiting_query", "blocking_query", "current_statement", "last_statement", "query", "message_text",
    "last_error_message", "trx_last_foreign_key_error",
})  # fmt: skip
_TEXT_REFERENCE = re.compile(r"(?:`[^`]+`\.)*`([^`]+)`")
_SHOWN_BEFORE = ("SELECT ", "SELECT DISTINCT ", ", ", " AS ")  # " AS `info`": a result name
_SHOWN_AFTER = (", ", " AS `", " FROM ")
_DIAGNOSTIC_SHOW = re.compile(
    r"SHOW (?:(?:(?:GLOBAL|SESSION) )?(?:STATUS|VARIABLES)(?: LIKE '[A-Za-z0-9_%$]*')?"
    r"|ENGINE INNODB (?:STATUS|MUTEX)|REPLICA STATUS|ALL SLAVES STATUS|BINARY LOG STATUS|BINARY LOGS"
    r"|OPEN TABLES(?: FROM `\w+`)?"
    r"(?: WHERE (?:In_use|Name_locked) (?:>=|<=|<>|!=|=|>|<) \d+| LIKE '[A-Za-z0-9_%$]*')?"
    r"|TABLE STATUS FROM `\w+`(?: LIKE '[A-Za-z0-9_%$]*')?)"
)


def unquoted(sql: str) -> str:
    """The text with every string literal and quoted identifier blanked out."""
    return _QUOTED.sub(" q ", sql)


def assert_read_only(guarded: GuardedStatement) -> None:
    """An independent reading of the text that will run: no regular expression here shares code
    with the guard."""
    bare = unquoted(guarded.sql)
    words = [word.upper() for word in _WORD.findall(bare)]
    assert words, guarded.sql
    assert words[0] in _READ_STARTS, guarded.sql
    allowed = {schema.lower() for schema in ALLOWED_SCHEMAS}
    if guarded.kind == "SHOW" and _DIAGNOSTIC_SHOW.fullmatch(guarded.sql):
        assert set(guarded.schemas) <= allowed
        assert guarded.row_limit is None
        return
    for marker in ("@", "--", "#", "/*", ";", ":=", "?", "\\"):
        assert marker not in bare, (marker, guarded.sql)
    body = words[3:] if words[:3] == ["SHOW", "CREATE", "TABLE"] else words
    for word in body:
        assert word not in _FORBIDDEN_WORDS, (word, guarded.sql)
    # REPLACE only as the string function, SET only as in CAST(x AS CHAR CHARACTER SET utf8mb4)
    assert not re.search(r"\bREPLACE\b(?!\()", bare, re.IGNORECASE), guarded.sql
    assert not re.search(r"(?<!\bCHARACTER )\bSET\b", bare, re.IGNORECASE), guarded.sql
    assert set(guarded.schemas) <= allowed | _SYSTEM_SCHEMAS
    reads_system = False
    for schema, table in _TABLE_REFERENCE.findall(guarded.sql):
        if schema.lower() in _SYSTEM_SCHEMAS:
            reads_system = True
            assert (schema.lower(), table.lower()) not in _NEVER_READ, guarded.sql
        else:
            assert schema.lower() in allowed, guarded.sql
    if reads_system:
        assert_other_sessions_text_only_shown(guarded.sql)
    if guarded.kind in ("SELECT", "EXPLAIN"):
        assert guarded.row_limit == CAP
        assert re.search(r"\bLIMIT \d+( OFFSET \d+)?\Z", guarded.sql), guarded.sql
        assert outer_limit(guarded) <= CAP
    else:
        assert guarded.kind in ("SHOW", "DESCRIBE")
        assert guarded.row_limit is None


def assert_other_sessions_text_only_shown(sql: str) -> None:
    for match in _TEXT_REFERENCE.finditer(sql):
        if match[1].lower() not in _OTHER_SESSIONS_TEXT:
            continue
        before, after = sql[: match.start()], sql[match.end() :]
        if after.startswith((" IS NULL", " IS NOT NULL")):
            continue
        assert before.endswith(_SHOWN_BEFORE), sql
        assert after.startswith(_SHOWN_AFTER), sql


def first_word_is_read(sql: str) -> bool:
    words = _WORD.findall(unquoted(sql))
    return bool(words) and words[0].upper() in _READ_STARTS


_FRAGMENTS = sorted(
    {word for sql, _ in HOSTILE for word in sql.split()}
    | {word for sql in LEGIT for word in sql.split()}
    | set(_FORBIDDEN_WORDS)
    | {
        "SELECT",
        "FROM",
        "WHERE",
        "UNION",
        "WITH",
        "AS",
        "(",
        ")",
        ",",
        ";",
        "'",
        '"',
        "`",
        "@",
        "--",
        "#",
        "/*",
    }
    | {"*/", "/*!", ":=", "*", "=", "1", "orders", "ops.deploys", "mysql.user", "sys.x", "LIMIT", "FOR"}
)
_TOKEN = st.one_of(
    st.sampled_from(_FRAGMENTS),
    st.text(alphabet="abcdefSELCTUPDA_();'\"`@#-*/ .,=\\\n\t", max_size=4),
)


_SELECT_ITEMS = [
    "*", "id", "o.status", "1", "'x -- y'", "\"#\"", "NULL", "(SELECT COUNT(*) FROM ops.payments)",
    *SAMPLE_CALLS.values(), "SLEEP(1)", "BENCHMARK(1, 1)", "GET_LOCK('a', 1)", "USER()", "@x", "@@version",
    "INFO", "p.INFO AS i", "LEFT(INFO, 5)", "trx_query", "q", "sql_text", "waiting_query", "VARIABLE_VALUE",
    "@x := 1", "(SELECT host FROM mysql.user)", "?", "`weird``name`", "id AS `a`",
]  # fmt: skip
_SOURCES = [
    "orders", "orders AS o", "shop.orders", "ops.deploys", "SHOP.orders", "`ops`.`payments`", "c",
    "mysql.user", "information_schema.tables", "hr.salaries", "orders, ops.deploys",
    "information_schema.PROCESSLIST", "information_schema.innodb_trx AS t", "performance_schema.threads",
    "sys.innodb_lock_waits", "mysql.slow_log", "information_schema.GLOBAL_VARIABLES",
    "performance_schema.user_variables_by_thread",
    "information_schema.PROCESSLIST p JOIN orders o ON o.id = p.ID",
    "(SELECT ID, INFO AS q FROM information_schema.PROCESSLIST) AS s",
    "orders o JOIN ops.payments p ON p.order_id = o.id", "(SELECT * FROM orders) AS s",
    "(SELECT * FROM mysql.user) AS s", "DUAL",
]  # fmt: skip
_CONDITIONS = [
    "id = 1", "status IN ('A', 'B')", "note LIKE '%--%'", "created_at > NOW() - INTERVAL 1 DAY",
    "id IN (SELECT order_id FROM ops.payments)", "EXISTS (SELECT 1 FROM sys.x)", "SLEEP(1) = 0",
    "id = @target", "note = 'a'';DROP TABLE orders;--'", "total BETWEEN 1 AND 2",
    "INFO IS NOT NULL", "INFO LIKE '%password%'", "q = 'x'", "VARIABLE_VALUE LIKE 'a%'",
    "'guess' IN (SELECT INFO FROM information_schema.PROCESSLIST)", "trx_query > 'm'",
]  # fmt: skip
_SUFFIXES = [
    "", "ORDER BY id DESC", "LIMIT 5", "LIMIT 100000", "LIMIT 5, 100000", "GROUP BY status",
    "UNION SELECT id FROM ops.deploys", "UNION ALL SELECT host FROM mysql.user", "FOR UPDATE",
    "LOCK IN SHARE MODE", "INTO OUTFILE '/tmp/x'", "INTO @v", ";", "; DROP TABLE orders", "-- x", "# x",
    "/*!50000 , SLEEP(1)*/", "PROCEDURE ANALYSE()", "LIMIT ?", "ORDER BY INFO", "ORDER BY 2", "GROUP BY q",
    "UNION SELECT 'guess'",
]  # fmt: skip
_PREFIXES = [
    "",
    "",
    "",
    "WITH c AS (SELECT * FROM orders) ",
    "EXPLAIN ",
    "EXPLAIN ANALYZE ",
    "DESCRIBE ",
    "(",
]


@st.composite
def select_like(draw: st.DrawFn) -> str:
    """SELECT statements assembled from plausible and hostile pieces, so that many get accepted."""
    items = ", ".join(draw(st.lists(st.sampled_from(_SELECT_ITEMS), min_size=1, max_size=3)))
    sql = f"SELECT {items} FROM {draw(st.sampled_from(_SOURCES))}"
    if draw(st.booleans()):
        sql += f" WHERE {draw(st.sampled_from(_CONDITIONS))}"
    prefix = draw(st.sampled_from(_PREFIXES))
    sql = f"{prefix}{sql} {draw(st.sampled_from(_SUFFIXES))}"
    sql = sql + ")" if prefix == "(" else sql
    return draw(st.sampled_from([sql, sql.lower(), sql.upper(), sql.replace(" ", "\n\t ")]))


@st.composite
def statements(draw: st.DrawFn) -> str:
    """Random statements: assembled SELECTs, token soup, corpus statements with tokens spliced in,
    or plain text."""
    shape = draw(st.sampled_from(["select", "select", "soup", "splice", "prefixed", "text"]))
    if shape == "select":
        return draw(select_like())
    if shape == "text":
        return draw(st.text(max_size=120))
    tokens = draw(st.lists(_TOKEN, min_size=1, max_size=12))
    if shape == "soup":
        return " ".join(tokens)
    if shape == "prefixed":
        start = draw(st.sampled_from(["SELECT", "WITH x AS (SELECT 1)", "SHOW", "DESCRIBE", "EXPLAIN", "("]))
        return " ".join([start, *tokens])
    base = draw(st.sampled_from(LEGIT + [sql for sql, _ in HOSTILE])).split()
    at = draw(st.integers(0, len(base)))
    joiner = draw(st.sampled_from([" ", ""]))
    return (
        joiner.join([*base[:at], *tokens, *base[at:]])
        if joiner
        else " ".join([*base[:at], "".join(tokens), *base[at:]])
    )


def check_random_statement(sql: str) -> None:
    guarded = returned_or_raised(lambda: guard(sql), SqlPolicyError)
    if isinstance(guarded, SqlPolicyError):
        assert guarded.reason in REASONS
        return
    assert first_word_is_read(sql), sql
    assert "@" not in unquoted(sql), sql
    assert_read_only(guarded)
    assert guard(guarded.sql) == guarded  # what runs is itself an accepted statement, unchanged


@settings(
    max_examples=examples(300, long=10_000),
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(statements())
def test_random_statements_are_rejected_or_read_only(sql: str) -> None:
    check_random_statement(sql)


# --- MariaDB syntax spliced into the random statements (with the resilience suite's fuzzing budget) ---------

MARIADB_ODDITIES = [
    "TABLE orders",
    "VALUES (1)",
    "SELECT * FROM orders FOR SHARE",
    "LOCK TABLES orders READ",
    "HELP 'x'",
    "SHOW GRANTS",
    "SHOW PROCESSLIST",
    "KILL 1",
    "PREPARE s FROM 'DROP TABLE orders'",
    "EXECUTE s",
    "XA START 'x'",
    "SELECT {fn NOW()}",
    "SELECT {oj orders}",
    "SELECT N'x'",
    "SELECT _utf8mb4'x'",
    "SELECT x'41'",
    "SELECT 0x41",
    "SELECT b'1'",
    "SELECT \\N",
    "SELECT 1 INTO @x",
    "(SELECT 1) INTO @x",
    "SELECT * FROM orders PROCEDURE ANALYSE()",
    "WITH RECURSIVE r AS (SELECT 1 UNION SELECT 1 FROM r) SELECT * FROM r",
    "SELECT 1\u00a0FROM orders",
    "SELECT 1 FROM orders\u2028; DROP TABLE orders",
    "SELECT `a``;DROP` FROM orders",
    "SELECT 'a' 'b' FROM orders",
    "SELECT * FROM shop.orders, mysql.user",
    "SELECT 1 FROM DUAL WHERE 1 = 1 LIMIT 1 INTO OUTFILE '/tmp/x'",
    "SELECT LOAD_FILE('/etc/passwd')",
    "SELECT * FROM information_schema.processlist",
    "DO SLEEP(1)",
    "SELECT 1 /*!*/",
    "SELECT 1 /*M!100000 , SLEEP(1)*/",
    "SELECT 1 -- \nFROM orders",
    "SELECT $$x$$",
]


@st.composite
def more_statements(draw: st.DrawFn) -> str:
    """The guard test's generator, plus MariaDB-specific syntax spliced into it."""
    base = draw(statements())
    if draw(st.booleans()):
        return base
    oddity = draw(st.sampled_from(MARIADB_ODDITIES))
    return draw(st.sampled_from([oddity, f"{base} {oddity}", f"{oddity} {base}", f"{base} UNION {oddity}"]))


def check_sql(sql: str) -> None:
    check_random_statement(sql)


@settings(
    max_examples=examples(200, long=10_000),
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)
@given(more_statements())
def test_sql_guard_rejects_or_is_read_only(sql: str) -> None:
    check_sql(sql)


@pytest.mark.parametrize(
    "sql",
    [
        "( 1) UNION TABLE orders",
        "(1) UNION SELECT 1",
        "('a') INTERSECT SELECT note FROM orders",
        "SELECT 1 UNION TABLE orders",
    ],
)
def test_the_guard_accepts_only_selects_in_set_operations(sql: str) -> None:
    try:
        accepted = guard(sql)
    except SqlPolicyError:
        return
    raise AssertionError(f"accepted {sql!r} as {accepted.sql!r}")
