"""Issue 20, item 1: a `query_mysql` statement that reads a secret-named column or JSON key anywhere is
refused (`POLICY_REJECTED` / `SECRET_COLUMN`) before it reaches the server, not only one that selects it.

Before, only result columns were judged: a secret column in a JOIN condition, WHERE, GROUP BY, a CTE, a
window or a function argument spelled its value out in columns that look harmless (a recursive CTE of
positions joined on `SUBSTRING(u.password, n, 1)`), `WHERE password = '...'` answered guesses, and
`JSON_EXTRACT(doc, '$.password')` read a secret key. A `*` could rename a secret column out of sight (a
CTE column list, a UNION's first branch, a scalar subquery), and a whole JSON document came back with its
secret members in clear.

- tables of statements: one per clause kind that must be refused, and facts ABOUT a secret that must pass;
- a property over generated statements: the secret name alone turns an accepted statement into a refusal;
- the server's own spelling rules: any spelling MariaDB resolves to a secret column is refused;
- JSON inside values: the secret members of generated documents never come out, whole or cut;
- end to end on MariaDB: generated statements over a table of canary secrets go through real runs; no
  canary reaches an observation, a run event, the audit, its export, the printed result or the log.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import secrets
import sqlite3
import string
import tempfile
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pymysql
import pytest
import sqlglot
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from console.commands.main import main
from tests.support.hypothesis_budget import examples, long_profile
from tests.support.mysql import closed_port, mysql_request, root_connection
from tools.adapter import ToolError
from tools.canonical import canonical_sql
from tools.mysql.adapter import MysqlAdapter
from tools.mysql.guard import GuardedStatement, SqlPolicyError, guard_sql
from tools.mysql.json_members import hide_secret_members
from tools.mysql.secret_reads import identifier_names_secret, secret_read
from tools.secret_names import names_secret

SECRET_COLUMN = "SECRET_COLUMN"


def guard(sql: str) -> GuardedStatement:
    return guard_sql(sql, database="shop", allowed_schemas=["shop", "ops"], max_rows=10)


def outcome(sql: str) -> str:
    """The rejection reason, or ACCEPTED."""
    try:
        guard(sql)
    except SqlPolicyError as exc:
        return exc.reason
    return "ACCEPTED"


# --- one statement per clause kind ----------------------------------------------------------------------

REFUSED = [
    ("select list", "SELECT password FROM users"),
    ("select list, renamed", "SELECT id, password AS p FROM users"),
    ("qualified by schema and table", "SELECT id FROM shop.users WHERE shop.users.password IS NULL"),
    ("JOIN ON", "SELECT u.id FROM users AS u JOIN sessions AS s ON s.token = u.api_token"),
    ("WHERE, as an oracle", "SELECT id FROM users WHERE password = 'hunter2'"),
    ("WHERE LIKE, one character at a time", "SELECT COUNT(*) FROM users WHERE password LIKE 'a%'"),
    ("HAVING", "SELECT status, COUNT(*) FROM users GROUP BY status HAVING MAX(password) > 'm'"),
    ("GROUP BY", "SELECT COUNT(*) AS n FROM users GROUP BY password"),
    ("ORDER BY", "SELECT id FROM users ORDER BY password"),
    (
        "window PARTITION BY",
        "SELECT id, ROW_NUMBER() OVER (PARTITION BY password ORDER BY id) AS r FROM users",
    ),
    ("window ORDER BY", "SELECT id, RANK() OVER (ORDER BY api_token) AS r FROM users"),
    ("named window", "SELECT id, ROW_NUMBER() OVER w AS r FROM users WINDOW w AS (ORDER BY password)"),
    ("GROUP_CONCAT ORDER BY", "SELECT GROUP_CONCAT(id ORDER BY password) AS ids FROM users"),
    ("CTE body", "WITH c AS (SELECT id FROM users WHERE client_secret > 'm') SELECT id FROM c"),
    (
        "recursive CTE of positions (the issue's example)",
        "WITH RECURSIVE n (i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 64) "
        "SELECT u.id, n.i, c.ch FROM users AS u JOIN n JOIN alphabet AS c "
        "ON SUBSTRING(u.password, n.i, 1) = c.ch",
    ),
    (
        "subquery in WHERE",
        "SELECT id FROM orders WHERE customer_id IN (SELECT id FROM users WHERE password = 'x')",
    ),
    ("scalar subquery", "SELECT (SELECT MAX(password) FROM users) AS m"),
    ("EXISTS", "SELECT id FROM orders WHERE EXISTS (SELECT 1 FROM users WHERE users.password = 'x')"),
    ("derived table", "SELECT d.x FROM (SELECT LENGTH(password) AS x FROM users) AS d"),
    ("function argument", "SELECT LENGTH(password) AS n FROM users"),
    ("nested function arguments", "SELECT id FROM users WHERE LEFT(UPPER(TRIM(password)), 1) = 'A'"),
    ("CASE", "SELECT CASE WHEN password LIKE 'a%' THEN 1 ELSE 0 END AS bit FROM users"),
    ("IF", "SELECT IF(SUBSTRING(api_key, 1, 1) = 'a', 1, 0) AS bit FROM users"),
    ("set operation branch", "SELECT id FROM orders UNION ALL SELECT LENGTH(password) FROM users"),
    ("USING", "SELECT COUNT(*) FROM users JOIN guesses USING (id, password)"),
    ("NATURAL JOIN compares same-named columns", "SELECT COUNT(*) FROM users NATURAL JOIN guesses"),
    ("EXPLAIN", "EXPLAIN SELECT id FROM users WHERE password = 'x'"),
    ("DESCRIBE of a SELECT", "DESCRIBE SELECT id FROM users ORDER BY token"),
    ("an encoding suffix", "SELECT id FROM users WHERE password_hash = 'x'"),
    ("camel case", "SELECT id FROM users WHERE passwordHash = 'x'"),
    ("MySQL's own hash column", "SELECT id FROM users WHERE authentication_string = 'x'"),
    ("a Chinese head noun", "SELECT id FROM users WHERE 登录密码 = 'x'"),
    ("a cookie", "SELECT id FROM users WHERE session_cookie = 'x'"),
    ("upper case, quoted", "SELECT id FROM users WHERE `PassWord` = 'x'"),
    ("a camel-case secret in capitals", "SELECT id FROM users WHERE PASSWORDHASH = 'x'"),
    ("an accent the server may ignore", "SELECT id FROM users WHERE `pàssword` = 'x'"),
    ("full-width letters", "SELECT id FROM users WHERE `ｐａｓｓｗｏｒｄ` = 'x'"),
    # JSON keys, in every path spelling MySQL accepts
    ("JSON_EXTRACT", "SELECT JSON_EXTRACT(doc, '$.password') FROM users"),
    ("JSON quoted key", "SELECT JSON_EXTRACT(doc, '$.\"password\"') FROM users"),
    ("JSON nested key", "SELECT JSON_EXTRACT(doc, '$.a.password') FROM users"),
    ("JSON array then key", "SELECT JSON_EXTRACT(doc, '$[0].password') FROM users"),
    ("JSON key then index", "SELECT JSON_EXTRACT(doc, '$.password[0]') FROM users"),
    ("JSON path through a secret key", "SELECT JSON_EXTRACT(doc, '$.credentials.user') FROM users"),
    ("JSON key with a SQL escape", "SELECT JSON_EXTRACT(doc, '$.pass\\word') FROM users"),
    ("JSON key with a JSON escape", "SELECT JSON_EXTRACT(doc, '$.\"pass\\\\u0077ord\"') FROM users"),
    ("JSON upper case key", "SELECT JSON_EXTRACT(doc, '$.API_TOKEN') FROM users"),
    ("JSON ->", "SELECT doc->'$.password' FROM users"),
    ("JSON_UNQUOTE", "SELECT JSON_UNQUOTE(JSON_EXTRACT(doc, '$.password')) FROM users"),
    ("JSON path in WHERE", "SELECT id FROM users WHERE JSON_EXTRACT(doc, '$.api_token') = 'x'"),
    ("JSON path in ORDER BY", "SELECT id FROM users ORDER BY doc->'$.secret'"),
    # a * whose columns are compared or renamed without being named
    ("* in a later set operation branch", "SELECT 1, 'a', 'b' UNION ALL SELECT * FROM users"),
    ("* in the first set operation branch", "SELECT * FROM users UNION SELECT 1, 'alice', 'guess'"),
    ("t.* in a set operation", "SELECT 1, 2 UNION SELECT u.* FROM users AS u"),
    (
        "* of a CTE in a set operation",
        "WITH c AS (SELECT * FROM users) SELECT 1, 2, 3 UNION ALL SELECT * FROM c",
    ),
    ("* renamed by a CTE column list", "WITH c (a, b, x) AS (SELECT * FROM users) SELECT x FROM c"),
    ("* renamed by a derived column list", "SELECT x FROM (SELECT * FROM users) AS d (a, b, x)"),
    ("a column list on a table alias", "SELECT x FROM users AS u (a, b, x)"),
    ("* compared with IN", "SELECT 1 FROM orders WHERE (1, 'a', 'b') IN (SELECT * FROM users)"),
    ("* compared with ANY", "SELECT 1 FROM orders WHERE 'guess' = ANY (SELECT * FROM vault)"),
    ("* as a scalar subquery", "SELECT (SELECT * FROM vault LIMIT 1) AS v"),
    ("ORDER BY a position over *", "SELECT * FROM users ORDER BY 3"),
    ("GROUP BY a position over *", "SELECT *, COUNT(*) FROM users GROUP BY 3"),
    ("ORDER BY a position over t.*", "SELECT u.*, 1 FROM users AS u ORDER BY 3"),
]

ALLOWED = [
    ("facts about a password", "SELECT password_expired, password_changed_at FROM users"),
    ("facts about tokens", "SELECT id FROM users WHERE token_count > 3 ORDER BY TOKENCOUNT"),
    ("a secret's name, not its value", "SELECT secret_name, api_key_id FROM users"),
    ("* keeps its columns' names", "SELECT * FROM users"),
    ("t.* keeps them too", "SELECT u.* FROM users AS u"),
    ("COUNT(*) reads no value", "SELECT COUNT(*) FROM users"),
    ("* of a derived table, then *", "SELECT * FROM (SELECT * FROM users) AS d"),
    ("* of a CTE, then *", "WITH c AS (SELECT * FROM users) SELECT * FROM c WHERE c.id > 1"),
    ("* inside EXISTS", "SELECT id FROM orders WHERE EXISTS (SELECT * FROM users)"),
    ("* over a join", "SELECT * FROM users JOIN orders ON orders.customer_id = users.id"),
    ("ORDER BY a column over *", "SELECT * FROM users ORDER BY id"),
    ("ORDER BY a position over named columns", "SELECT id, status FROM users ORDER BY 2"),
    ("an output named like a secret reads nothing secret", "SELECT note AS password FROM orders"),
    ("a table named like a secret", "SELECT id FROM secrets"),
    ("a table alias named like a secret", "SELECT token.id FROM users AS token"),
    ("USING a column that is no secret", "SELECT COUNT(*) FROM users JOIN orders USING (id)"),
    ("a string that says password", "SELECT 'password' AS label, \"token\" AS other FROM users"),
    ("a JSON key about a secret", "SELECT JSON_EXTRACT(doc, '$.token_count') FROM users"),
    ("a JSON key that is no secret", "SELECT doc->'$.error' FROM users"),
    (
        "a CTE column list over named columns",
        "WITH c (a, b) AS (SELECT id, status FROM users) SELECT a, b FROM c",
    ),
    ("SHOW COLUMNS lists names, not values", "SHOW COLUMNS FROM users LIKE 'pass%'"),
    ("DESCRIBE lists names, not values", "DESCRIBE users"),
]


@pytest.mark.parametrize(("kind", "sql"), REFUSED, ids=[kind for kind, _ in REFUSED])
def test_a_statement_reading_a_secret_anywhere_is_refused(kind: str, sql: str) -> None:
    assert outcome(sql) == SECRET_COLUMN


@pytest.mark.parametrize(("kind", "sql"), ALLOWED, ids=[kind for kind, _ in ALLOWED])
def test_a_statement_that_reads_no_secret_still_passes(kind: str, sql: str) -> None:
    assert outcome(sql) == "ACCEPTED"


@pytest.mark.parametrize(
    ("sql", "reason"),
    [
        ("SELECT doc->>'$.password' FROM users", "FUNCTION_NOT_ALLOWED"),  # MariaDB has no ->>
        ("SELECT JSON_VALUE(doc, '$.password') FROM users", "UNSUPPORTED_STATEMENT"),
        ("SELECT JSON_EXTRACT(doc, '$**.password') FROM users", "COSTLY_EXPRESSION"),  # any depth
        ("SELECT JSON_EXTRACT(doc, '$.*') FROM users", "COSTLY_EXPRESSION"),  # a wildcard: any key
        ("SELECT user, authentication_string FROM mysql.user", "SYSTEM_SCHEMA"),
    ],
)
def test_a_secret_read_that_breaks_another_rule_keeps_that_rule_and_is_still_seen(
    sql: str, reason: str
) -> None:
    """Refused for the rule it breaks first; the secret-read check sees the key too, so allowing `->>` or
    JSON_VALUE later cannot open the hole (the wildcard stays refused: it may reach any key)."""
    assert outcome(sql) == reason
    parsed = sqlglot.parse_one(sql, read="mysql")
    assert (secret_read(parsed) is not None) == ("$.*" not in sql)


async def test_the_adapter_refuses_before_it_connects() -> None:
    """The refusal is typed and no connection is opened: the server is not even reachable here."""
    adapter = MysqlAdapter(
        f"mysql://u@127.0.0.1:{closed_port()}/shop", password=None, allowed_schemas=["shop"]
    )
    try:
        for _, sql in REFUSED:
            with pytest.raises(ToolError) as refused:
                await adapter.execute(mysql_request(sql))
            assert (refused.value.code, refused.value.reason) == ("POLICY_REJECTED", SECRET_COLUMN)
        assert adapter.pool_stats()["opened"] == 0
    finally:
        await adapter.aclose()


# --- generated statements: only the name decides --------------------------------------------------------

SECRET_NAMES = [
    "password", "api_token", "secret", "passwordHash", "db_passwd", "authentication_string", "client_secret",
    "private_key", "session_cookie", "access_token_enc", "登录密码", "auth",
]  # fmt: skip
BENIGN_NAMES = [
    "password_expired", "token_count", "secret_name", "password_changed_at", "note", "status", "tokens",
    "api_key_id", "auth_method", "密码过期时间",
]  # fmt: skip
# Where a reference can sit; `{r}` reads a column of `u` (users) or a JSON key of `u.doc`.
POSITIONS = [
    "SELECT {r} FROM users AS u",
    "SELECT {r} AS shown FROM users AS u",
    "SELECT u.id FROM users AS u WHERE {r} = 'x'",
    "SELECT u.id FROM users AS u WHERE {r} LIKE 'a%'",
    "SELECT u.id FROM users AS u JOIN orders AS o ON o.note = {r}",
    "SELECT COUNT(*) AS n FROM users AS u GROUP BY {r}",
    "SELECT u.id FROM users AS u ORDER BY {r}",
    "SELECT MAX(u.id) AS m FROM users AS u GROUP BY u.id HAVING MIN({r}) > 'm'",
    "SELECT ROW_NUMBER() OVER (PARTITION BY {r} ORDER BY u.id) AS r FROM users AS u",
    "SELECT RANK() OVER (ORDER BY {r}) AS r FROM users AS u",
    "WITH c AS (SELECT u.id FROM users AS u WHERE {r} IS NOT NULL) SELECT id FROM c",
    "WITH RECURSIVE n (i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 32) "
    "SELECT n.i FROM users AS u JOIN n ON SUBSTRING({r}, n.i, 1) = 'a'",
    "SELECT o.id FROM orders AS o WHERE o.customer_id IN (SELECT u.id FROM users AS u WHERE {r} > 'm')",
    "SELECT (SELECT MAX({r}) FROM users AS u) AS m",
    "SELECT CASE WHEN {r} LIKE 'a%' THEN 1 ELSE 0 END AS bit FROM users AS u",
    "SELECT LENGTH(CONCAT('x', LOWER({r}))) AS n FROM users AS u",
    "SELECT GROUP_CONCAT(u.id ORDER BY {r}) AS ids FROM users AS u",
    "SELECT o.id FROM orders AS o UNION ALL SELECT LENGTH({r}) FROM users AS u",
    "EXPLAIN SELECT u.id FROM users AS u WHERE {r} = 'x'",
    "SELECT d.x FROM (SELECT {r} AS x FROM users AS u) AS d",
    "SELECT u.id FROM users AS u WHERE EXISTS (SELECT 1 FROM orders AS o WHERE o.note = {r})",
]
JSON_PATHS = ["$.{k}", '$."{k}"', "$.a.{k}", "$[0].{k}", "$.{k}[0]", "$.{k}.a"]


@dataclass(frozen=True)
class Spelling:
    """How a reference is written, whatever name it carries."""

    kind: str  # "column" | "json"
    upper: tuple[bool, ...]
    quoted: bool
    qualified: bool
    path: str
    unquote: bool

    def column(self, name: str) -> str:
        cased = "".join(
            ch.upper() if flip else ch
            for ch, flip in zip(name, self.upper + (False,) * len(name), strict=False)
        )
        ident = f"`{cased}`" if self.quoted else cased
        return f"u.{ident}" if self.qualified else ident

    def reference(self, name: str) -> str:
        if self.kind == "column":
            return self.column(name)
        extract = f"JSON_EXTRACT(u.doc, '{self.path.replace('{k}', name)}')"
        return f"JSON_UNQUOTE({extract})" if self.unquote else extract


spellings = st.builds(
    Spelling,
    kind=st.sampled_from(["column", "json"]),
    upper=st.lists(st.booleans(), max_size=24).map(tuple),
    quoted=st.booleans(),
    qualified=st.booleans(),
    path=st.sampled_from(JSON_PATHS),
    unquote=st.booleans(),
)


def check_only_the_name_decides(position: str, spelling: Spelling, secret: str, benign: str) -> None:
    benign_outcome = outcome(position.replace("{r}", spelling.reference(benign)))
    secret_outcome = outcome(position.replace("{r}", spelling.reference(secret)))
    assert benign_outcome == "ACCEPTED", position
    assert secret_outcome == SECRET_COLUMN, (position, spelling.reference(secret))


@settings(max_examples=examples(150, long=5_000), deadline=None, database=None)
@given(st.sampled_from(POSITIONS), spellings, st.sampled_from(SECRET_NAMES), st.sampled_from(BENIGN_NAMES))
def test_only_the_secret_name_turns_an_accepted_statement_into_a_refusal(
    position: str, spelling: Spelling, secret: str, benign: str
) -> None:
    check_only_the_name_decides(position, spelling, secret, benign)


# --- JSON inside values: what the guard cannot see, the projection hides --------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            '{"password": "c1", "a": {"token": "c2"}, "n": 1}',
            '{"password": "[REDACTED]", "a": {"token": "[REDACTED]"}, "n": 1}',
        ),
        ('{"auth": {"user": "svc", "pw": "c1"}, "ok": [1]}', '{"auth": "[REDACTED]", "ok": [1]}'),
        ('{"passwordHash": 42, "api_token": null}', '{"passwordHash": "[REDACTED]", "api_token": null}'),
        ('{"pass\\u0077ord": "c1"}', '{"pass\\u0077ord": "[REDACTED]"}'),
        ('{"cfg": "{\\"credentials\\": \\"c1\\"}"}', '{"cfg": "{\\"credentials\\": \\"[REDACTED]\\"}"}'),
        ('"{\\"credentials\\": \\"c1\\"}"', '"{\\"credentials\\": \\"[REDACTED]\\"}"'),
        ('{"a": 1, "client_secret": {"k": [1, {"z": "c1', '{"a": 1, "client_secret": "[REDACTED]"'),
        ('svc:{"service": "a", "secret": "c1"}', 'svc:{"service": "a", "secret": "[REDACTED]"}'),
        ('eckout", "passwordHash": "c1"}', 'eckout", "passwordHash": "[REDACTED]"}'),
        ('{"password_expired": true, "token_count": 3}', '{"password_expired": true, "token_count": 3}'),
        ("password rotation is due", "password rotation is due"),
    ],
)
def test_secret_members_of_json_in_a_value_are_hidden(text: str, expected: str) -> None:
    assert hide_secret_members(text) == expected


CANARY_ALPHABET = string.ascii_lowercase + string.digits


@st.composite
def documents(draw: st.DrawFn) -> tuple[Any, list[str]]:
    """A JSON value whose secret-named members hold canaries (also deep inside), with those canaries."""
    canaries: list[str] = []

    def canary() -> str:
        value = "qz" + draw(st.text(CANARY_ALPHABET, min_size=10, max_size=10))
        canaries.append(value)
        return value

    keys = st.sampled_from(SECRET_NAMES + BENIGN_NAMES + ["a", "msg", "Pass Word"])
    leaves = st.one_of(
        st.none(), st.booleans(), st.integers(), st.text(string.ascii_letters + ' :,{}[]"\\', max_size=12)
    )

    def build(depth: int) -> Any:
        if depth > 3 or draw(st.integers(0, 3)) == 0:
            return draw(leaves)
        if draw(st.booleans()):
            return [build(depth + 1) for _ in range(draw(st.integers(0, 3)))]
        out: dict[str, Any] = {}
        for _ in range(draw(st.integers(0, 4))):
            key = draw(keys)
            if names_secret(key):
                shape = draw(st.integers(0, 3))
                out[key] = (
                    canary()
                    if shape == 0
                    else [canary()]
                    if shape == 1
                    else {"v": canary()}
                    if shape == 2
                    else json.dumps({key: canary()})
                )
            elif draw(st.integers(0, 4)) == 0:
                out[key] = json.dumps({draw(st.sampled_from(SECRET_NAMES)): canary()})  # JSON inside JSON
            else:
                out[key] = build(depth + 1)
        return out

    return build(0), canaries


def check_no_canary_survives(
    document: tuple[Any, list[str]], ascii_only: bool, spaced: bool, cut: float, prefix: str
) -> None:
    value, canaries = document
    separators = (", ", ": ") if spaced else (",", ":")
    text = prefix + json.dumps(value, ensure_ascii=ascii_only, separators=separators)
    text = text[: max(1, int(len(text) * cut))]
    hidden = hide_secret_members(text)
    for canary in canaries:
        assert canary not in hidden, (text, hidden)
    if not canaries:
        assert hidden == text


# The default run cuts at a few lengths after a few prefixes; the `long` profile, anywhere after a quote too.
CUTS = st.floats(0.05, 1.0) if long_profile() else st.sampled_from([1.0, 1.0, 0.9, 0.5, 0.3])
PREFIXES = st.sampled_from(["", "x", "svc:", '"'] if long_profile() else ["", "x", "svc:"])


@settings(max_examples=examples(300, long=10_000), deadline=None, database=None)
@given(documents(), st.booleans(), st.booleans(), CUTS, PREFIXES)
def test_no_secret_member_of_a_generated_document_survives(
    document: tuple[Any, list[str]], ascii_only: bool, spaced: bool, cut: float, prefix: str
) -> None:
    check_no_canary_survives(document, ascii_only, spaced, cut, prefix)


# --- MariaDB: a schema of canary secrets --------------------------------------------------------------------


@dataclass
class SecretWorld:
    database: str
    canaries: list[str] = field(default_factory=list)
    column_count: int = 8


def _canary(world: SecretWorld) -> str:
    value = "qz" + secrets.token_hex(6)
    world.canaries.append(value)
    return value


@pytest.fixture(scope="module")
def secret_world(mysql_server: str) -> Iterator[SecretWorld]:
    """`accounts` with canary secrets in secret-named columns and in secret keys of a JSON column (deep, in
    JSON inside JSON, under keys the value patterns do not know); `vault`, one secret column; `numbers` and
    `alphabet` for statements that spell a value out one character at a time. Case-exact collation, so a
    character comparison is an exact one."""
    world = SecretWorld(database=f"dc_secret_{secrets.token_hex(4)}")
    with root_connection() as conn, conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{world.database}` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
        try:
            conn.select_db(world.database)
            cur.execute(
                "CREATE TABLE accounts (id INT PRIMARY KEY, name VARCHAR(32) NOT NULL, password VARCHAR(64),"
                " api_token VARCHAR(64), password_expired TINYINT NOT NULL, token_count INT NOT NULL,"
                " note VARCHAR(200), doc JSON)"
            )
            for row in (1, 2, 3):
                doc = {
                    "service": "checkout",
                    "password": _canary(world),
                    "auth": {"user": f"svc{row}", "pw": _canary(world)},
                    "nested": {"api_token": _canary(world), "region": "eu"},
                    "cfg": json.dumps({"credentials": _canary(world)}),
                    "passwordHash": _canary(world),
                    "token_count": row,
                }
                secrets_of_row = (_canary(world), _canary(world))
                cur.execute(
                    "INSERT INTO accounts VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                    (
                        row,
                        f"svc{row}",
                        *secrets_of_row,
                        row % 2,
                        row,
                        "rotation due in 30 days",
                        json.dumps(doc),
                    ),
                )
            cur.execute("CREATE TABLE vault (secret VARCHAR(64) NOT NULL)")
            cur.execute("INSERT INTO vault VALUES (%s)", (_canary(world),))
            cur.execute("CREATE TABLE numbers (n INT PRIMARY KEY)")
            cur.executemany("INSERT INTO numbers VALUES (%s)", [(n,) for n in range(1, 65)])
            cur.execute("CREATE TABLE alphabet (ch CHAR(1) PRIMARY KEY)")
            cur.executemany("INSERT INTO alphabet VALUES (%s)", [(ch,) for ch in CANARY_ALPHABET])
            yield world
        finally:
            cur.execute(f"DROP DATABASE IF EXISTS `{world.database}`")


# --- MariaDB: every spelling the server resolves to a secret column is refused ----------------------------

LOOKALIKES = {"a": "àáâäａ", "s": "ｓŝš", "o": "òóôöｏ", "w": "ŵｗ", "r": "ŕřｒ", "d": "ďｄ", "p": "ｐ"}


@st.composite
def respellings(draw: st.DrawFn) -> str:
    """`password` or `api_token` with case flips, accented and full-width letters, as a model might write."""
    name = draw(st.sampled_from(["password", "api_token"]))
    out = []
    for ch in name:
        choice = draw(st.integers(0, 5))
        if choice == 0 and ch in LOOKALIKES:
            out.append(draw(st.sampled_from(LOOKALIKES[ch])))
        elif choice in (1, 2):
            out.append(ch.upper())
        else:
            out.append(ch)
    return "".join(out)


def server_resolves(world: SecretWorld, name: str) -> bool:
    try:
        with root_connection(world.database) as conn, conn.cursor() as cur:
            cur.execute(f"SELECT `{name}` FROM accounts LIMIT 0")
    except pymysql.err.OperationalError as exc:
        if exc.args[0] == 1054:  # unknown column
            return False
        raise
    return True


@pytest.mark.mysql
@settings(max_examples=40, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(respellings())
def test_every_spelling_the_server_resolves_to_a_secret_column_is_refused(
    secret_world: SecretWorld, name: str
) -> None:
    sql = f"SELECT id FROM accounts WHERE `{name}` = 'x'"
    if server_resolves(secret_world, name):
        assert outcome(sql) == SECRET_COLUMN
    if name.lower() in ("password", "api_token"):
        assert server_resolves(secret_world, name)  # case flips do resolve: the check above is not vacuous
    if unicodedata.normalize("NFKD", name) != name:
        assert identifier_names_secret(name)  # look-alikes are refused whether or not this server folds them


# --- MariaDB: generated statements through real runs leak no canary -----------------------------------------

# A secret reference over `accounts AS a`: a column, or a JSON key of `a.doc` in each path spelling.
SECRET_REFERENCES = [
    "a.password", "a.api_token", "a.`PASSWORD`", "a.Api_Token",
    "JSON_UNQUOTE(JSON_EXTRACT(a.doc, '$.password'))", "JSON_EXTRACT(a.doc, '$.\"password\"')",
    "JSON_UNQUOTE(JSON_EXTRACT(a.doc, '$.nested.api_token'))", "JSON_EXTRACT(a.doc, '$.auth.pw')",
    "JSON_UNQUOTE(JSON_EXTRACT(a.doc, '$[0].passwordHash'))", "JSON_EXTRACT(a.doc, '$.pass\\word')",
]  # fmt: skip
# How a statement can use one: spelled out one character at a time into a harmless column (the leak the
# issue describes), or as an oracle, a sort key, a group, a window, a renamed copy.
SECRET_USES = [
    "SELECT GROUP_CONCAT(c.ch ORDER BY n.n SEPARATOR '') AS spelled FROM accounts AS a"
    " JOIN numbers AS n ON n.n <= CHAR_LENGTH({s}) JOIN alphabet AS c ON SUBSTRING({s}, n.n, 1) = c.ch"
    " WHERE a.id = {k}",
    "WITH RECURSIVE pos (i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM pos WHERE i < 40)"
    " SELECT GROUP_CONCAT(c.ch ORDER BY pos.i SEPARATOR '') AS spelled FROM accounts AS a CROSS JOIN pos"
    " JOIN alphabet AS c ON SUBSTRING({s}, pos.i, 1) = c.ch WHERE a.id = {k}",
    "SELECT COUNT(*) AS n FROM accounts AS a WHERE {s} > 'm'",
    "SELECT a.id FROM accounts AS a ORDER BY {s}",
    "SELECT COUNT(*) AS n FROM accounts AS a GROUP BY {s}",
    "SELECT a.name FROM accounts AS a GROUP BY a.name HAVING MAX({s}) > 'm'",
    "SELECT a.id, ROW_NUMBER() OVER (PARTITION BY {s} ORDER BY a.id) AS r FROM accounts AS a",
    "SELECT a.id, CASE WHEN {s} LIKE 'q%' THEN 1 ELSE 0 END AS bit FROM accounts AS a",
    "SELECT b.id FROM accounts AS b WHERE b.id IN (SELECT a.id FROM accounts AS a WHERE {s} > 'm')",
    "WITH c AS (SELECT a.id, {s} AS shown FROM accounts AS a) SELECT id, shown FROM c",
    "SELECT a.id, CONCAT('v:', {s}) AS v FROM accounts AS a",
    "EXPLAIN SELECT a.id FROM accounts AS a WHERE {s} = 'x'",
]
# A * that renames or compares columns it does not name.
UNSAFE_STARS = [
    "WITH c (c1, c2, c3, c4, c5, c6, c7, c8) AS (SELECT * FROM accounts) SELECT c1, c3, c4 FROM c",
    "SELECT 0 AS k, '' AS v1, '' AS v2, '' AS v3, 0 AS f1, 0 AS f2, '' AS v4, '' AS v5"
    " UNION ALL SELECT * FROM accounts",
    "SELECT (SELECT * FROM vault LIMIT 1) AS v",
    "SELECT * FROM accounts ORDER BY 3",
    "SELECT COUNT(*) AS n FROM accounts WHERE 'guess' IN (SELECT * FROM vault)",
    "SELECT a.* FROM accounts AS a UNION SELECT b.* FROM accounts AS b",
]
# Reads that name no secret and return rows: secret columns and members come back hidden.
BENIGN_READS = [
    "SELECT * FROM accounts",
    "SELECT a.* FROM accounts AS a WHERE a.id = {k}",
    "SELECT id, name, password_expired, token_count, note FROM accounts",
    "SELECT id, doc FROM accounts",
    "SELECT id, JSON_EXTRACT(doc, '$.nested') AS nested, JSON_EXTRACT(doc, '$.cfg') AS cfg FROM accounts",
    "SELECT id, JSON_UNQUOTE(JSON_EXTRACT(doc, '$.cfg')) AS cfg FROM accounts",
    "SELECT id, CONCAT(name, ':', doc) AS x FROM accounts",
    "SELECT * FROM vault",
    "WITH c AS (SELECT * FROM accounts) SELECT * FROM c WHERE c.id > 1",
    "SELECT * FROM (SELECT * FROM accounts) AS d ORDER BY d.id",
    "SELECT COUNT(*) AS n FROM accounts WHERE EXISTS (SELECT * FROM vault)",
    "SELECT id, JSON_EXTRACT(doc, '$.token_count') AS tc FROM accounts",
]


@dataclass(frozen=True)
class Call:
    sql: str
    refused: bool


def distinct_statements(calls: list[Call]) -> list[Call]:
    """Each statement once, judged as the harness judges it: two texts with one canonical form (MySQL
    drops an unknown backslash escape, so `'$.pass\\word'` is `'$.password'`) are one statement, and
    the second would be answered DUPLICATE_CALL without running, leaving no audit row of its own."""
    seen: set[str] = set()
    distinct = []
    for call in calls:
        if (key := canonical_sql(call.sql)) not in seen:
            seen.add(key)
            distinct.append(call)
    return distinct


secret_calls = st.builds(
    lambda use, ref, k: Call(use.replace("{s}", ref).replace("{k}", str(k)), True),
    st.sampled_from(SECRET_USES),
    st.sampled_from(SECRET_REFERENCES),
    st.integers(1, 3),
)
star_calls = st.sampled_from(UNSAFE_STARS).map(lambda sql: Call(sql, True))
benign_calls = st.builds(
    lambda sql, k: Call(sql.replace("{k}", str(k)), False), st.sampled_from(BENIGN_READS), st.integers(1, 3)
)
runs = st.tuples(
    benign_calls, st.lists(st.one_of(secret_calls, star_calls, benign_calls), min_size=1, max_size=4)
).map(lambda calls: distinct_statements([calls[0], *calls[1]]))

DRAFT = {
    "conclusion": None,
    "analysis": [
        {
            "kind": "NEGATIVE_OBSERVATION",
            "statement": "nothing",
            "scope": "accounts",
            "evidence": "NO_EVIDENCE",
        }
    ],
    "action_plan": [],
    "recommendations": [],
    "limitations": {"checked_scope": ["accounts"], "missing_info": ["more"]},
}


def scenario(calls: list[Call]) -> dict[str, Any]:
    """One query_mysql call a round; a FOUND observation is evaluated by the next call (the protocol)."""
    rounds: list[dict[str, Any]] = []
    pending: str | None = None
    for index, call in enumerate(calls):
        call_id = f"m{index}"
        previous = None if pending is None else {"tool_call_id": pending, "evaluation": "GAINED"}
        arguments = {"previous_observation": previous, "input": {"sql": call.sql, "database": None}}
        rounds.append({"tool_calls": [{"id": call_id, "name": "query_mysql", "arguments": arguments}]})
        pending = None if call.refused else call_id
    rounds.append({"text": json.dumps(DRAFT)})
    return {"name": "secret-reads", "query": "账户服务异常，请排查", "rounds": rounds}


def run_and_collect(
    world: SecretWorld, calls: list[Call]
) -> tuple[dict[str, str], list[dict[str, Any]], list[tuple[Any, ...]]]:
    """A real headless run of `calls`, then the audit export: every text the run produced, its
    tool_finished events and its audit invocations."""
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        (tmp / "s.yaml").write_text(json.dumps(scenario(calls)), encoding="utf-8")
        (tmp / "c.toml").write_text(
            f'[mysql]\ndsn = "mysql://root@127.0.0.1:3306/{world.database}"\n', encoding="utf-8"
        )
        audit, events, export = tmp / "audit.db", tmp / "events.ndjson", tmp / "export.jsonl"
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["run", "--config", str(tmp / "c.toml"), "--scenario", str(tmp / "s.yaml"),
                         "--audit-db", str(audit), "--events", str(events), "--json"])  # fmt: skip
            assert main(["audit", "export", "--audit-db", str(audit), "--output", str(export)]) == 0
        assert code == 0, err.getvalue()
        with sqlite3.connect(audit) as db:
            dump = "\n".join(db.iterdump())
            invocations = db.execute(
                "SELECT tool_call_id, status, error_code, reason FROM invocations ORDER BY tool_call_id"
            ).fetchall()
        events_text = events.read_text(encoding="utf-8")
        texts = {
            "stdout": out.getvalue(),
            "stderr": err.getvalue(),
            "events": events_text,
            "audit": dump,
            "export": export.read_text(encoding="utf-8"),
        }
    finished = [
        event for event in map(json.loads, events_text.splitlines()) if event["type"] == "tool_finished"
    ]
    return texts, finished, invocations


def check_no_canary_leaks(world: SecretWorld, calls: list[Call]) -> None:
    texts, finished, invocations = run_and_collect(world, calls)
    state = Path(os.environ["XDG_STATE_HOME"])
    texts["log"] = "\n".join(path.read_text(encoding="utf-8") for path in state.rglob("*.log"))
    assert len(finished) == len(calls) == len(invocations)
    for index, (call, event) in enumerate(zip(calls, finished, strict=True)):
        assert event["tool_call_id"] == f"m{index}"
        if call.refused:
            # The reason is typed everywhere: the event, the observation the model saw, the audit row.
            assert (event["status"], event["error_code"], event["reason"]) == (
                "ERROR",
                "POLICY_REJECTED",
                SECRET_COLUMN,
            ), call.sql
            assert event["observation"]["reason"] == SECRET_COLUMN
            assert invocations[index][1:] == ("ERROR", "POLICY_REJECTED", SECRET_COLUMN)
        else:
            assert event["status"] == "FOUND", (call.sql, event)  # rows really were read
    for where, text in texts.items():
        for canary in world.canaries:
            assert canary not in text, f"canary {canary} leaked into {where} by {[c.sql for c in calls]}"


@pytest.mark.mysql
@settings(
    max_examples=examples(12, long=400), deadline=None, database=None, suppress_health_check=list(HealthCheck)
)
@given(runs)
def test_generated_statements_leak_no_canary_anywhere(secret_world: SecretWorld, calls: list[Call]) -> None:
    check_no_canary_leaks(secret_world, calls)


@pytest.mark.mysql
def test_each_way_of_spelling_a_secret_out_is_refused_in_a_real_run(secret_world: SecretWorld) -> None:
    """Every generator entry at least once, whatever hypothesis draws: each use with a column and a JSON
    key, each unsafe *, each benign read (its hidden secrets included)."""
    calls = [Call(use.replace("{s}", ref).replace("{k}", "1"), True)
             for use in SECRET_USES for ref in ("a.password", SECRET_REFERENCES[6])]  # fmt: skip
    calls += [Call(sql, True) for sql in UNSAFE_STARS]
    calls += [Call(sql.replace("{k}", "2"), False) for sql in BENIGN_READS]
    for start in range(0, len(calls), 6):  # a run allows 8 model calls
        check_no_canary_leaks(secret_world, calls[start : start + 6])
