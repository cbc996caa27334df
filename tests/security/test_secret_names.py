"""One vocabulary of secret names for keys, SQL columns, JSON members and text (issue 32, item 9).

Before, the SQL guard and the JSON member rule judged names by a list of their own that missed names the
text rule hid (`contrasena`, `mot_de_passe`) and plural or suffixed forms (`password_old`, `db_pw`,
`api_keys`, `access_tokens`): `SELECT *` showed six canaries and `WHERE contrasena LIKE 'a%'` answered
guesses. Now every consumer judges a name by `tools.secret_names`, and these tests generate names from
its words (prefixes, suffixes, plurals, case, separators) and put each through all of them:
- a dict key and a table column (`Redactor.value`), a JSON member inside a value
  (`hide_secret_members`), the key of `key=value` text (`Redactor.text`);
- the SQL guard: the column in the select list and as a WHERE oracle, and the key of a JSON path;
- end to end on MariaDB: `SELECT *` over a table whose six secret columns the old rule missed.
The facts ABOUT a secret that a diagnosis needs (`password_expired`, `token_count`, `max_tokens`) stay
readable everywhere; the known false positives are documented in `tools.secret_names`.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.hypothesis_budget import examples
from tests.support.mysql import mysql_request, root_connection
from tools.mysql.adapter import MysqlAdapter
from tools.mysql.guard import SqlPolicyError, guard_sql
from tools.mysql.json_members import hide_secret_members
from tools.redaction import REDACTED, Redactor
from tools.secret_names import (
    KEY_QUALIFIERS,
    PLURAL_NOUNS,
    SECRET_KEY_TRIGGERS,
    SECRET_NOUNS,
    TOKEN_QUALIFIERS,
    TRAILING_QUALIFIERS,
    names_secret,
)

ISSUE_NAMES = ["contrasena", "mot_de_passe", "password_old", "db_pw", "api_keys", "access_tokens"]
FACTS = [
    "password_expired", "token_count", "tokens", "max_tokens", "prompt_tokens", "secret_name",
    "api_key_id", "password_changed_at", "keyword", "monkey", "passport", "note", "bypass", "sacred",
]  # fmt: skip
# The SQL guard also splits a lower-case identifier once anywhere (the server resolves `PASSWORDHASH`
# to `passwordHash`), so a column that only ends in a short head is refused there: a documented false
# positive (tools.secret_names), readable everywhere else.
SQL_LOOKALIKES = {"bypass", "sacred"}
CANARY = "Qz7x-canary-9f3k"
REDACTOR = Redactor()


def refused(sql: str) -> bool:
    try:
        guard_sql(sql, database="shop", allowed_schemas=["shop"], max_rows=10)
    except SqlPolicyError as exc:
        return exc.reason == "SECRET_COLUMN"
    return False


def hidden_everywhere(name: str) -> list[str]:
    """The consumers that let a value under `name` through (empty: every one hides it)."""
    leaks = []
    if not names_secret(name):
        leaks.append("names_secret")
    if CANARY in json.dumps(REDACTOR.value({name: CANARY})):
        leaks.append("dict key")
    if CANARY in json.dumps(REDACTOR.value({"columns": [name], "rows": [[CANARY]]})):
        leaks.append("table column")
    if CANARY in hide_secret_members(json.dumps({"doc": {name: CANARY}})):
        leaks.append("JSON member")
    if CANARY in REDACTOR.text(f"ts=1 {name}={CANARY} ok"):
        leaks.append("key=value text")
    quoted = f"`{name}`"
    if not refused(f"SELECT {quoted} FROM users"):
        leaks.append("SQL select list")
    if not refused(f"SELECT id FROM users WHERE {quoted} LIKE 'a%'"):
        leaks.append("SQL WHERE oracle")
    if not refused(f"SELECT JSON_EXTRACT(doc, '$.\"{name}\"') AS v FROM users"):
        leaks.append("SQL JSON path")
    return leaks


@pytest.mark.parametrize("name", ISSUE_NAMES)
def test_the_names_the_old_column_rule_missed_are_hidden_by_every_consumer(name: str) -> None:
    assert hidden_everywhere(name) == []


@pytest.mark.parametrize("name", FACTS)
def test_facts_about_a_secret_stay_readable_everywhere(name: str) -> None:
    assert not names_secret(name)
    assert REDACTOR.value({name: "v42"}) == {name: "v42"}
    assert REDACTOR.text(f"{name}=v42") == f"{name}=v42"
    assert hide_secret_members(json.dumps({name: "v42"})) == json.dumps({name: "v42"})
    assert refused(f"SELECT id FROM users WHERE `{name}` LIKE 'a%'") == (name in SQL_LOOKALIKES)


# --- generated names: every word of the vocabulary, dressed as names are -------------------------------

# `authorization` and `cookie` values have shapes of their own, kept by their own text rules.
OWN_SHAPES = ("authorization", "cookie")
ASCII_NOUNS = [noun for noun in SECRET_NOUNS if noun.isascii() and noun not in OWN_SHAPES]
ASCII_PLURALS = sorted(noun for noun in PLURAL_NOUNS if noun.isascii() and noun not in OWN_SHAPES)


@st.composite
def heads(draw: st.DrawFn) -> list[str]:
    """The words of a secret's head: a noun (maybe plural), a qualified key(s) or token(s), a phrase."""
    kind = draw(st.sampled_from(["noun", "plural", "key", "tokens", "phrase", "short"]))
    if kind == "noun":
        return [draw(st.sampled_from(ASCII_NOUNS))]
    if kind == "plural":
        return [draw(st.sampled_from(ASCII_PLURALS)) + "s"]
    if kind == "key":
        return [draw(st.sampled_from(sorted(KEY_QUALIFIERS))), draw(st.sampled_from(["key", "keys"]))]
    if kind == "tokens":
        return [draw(st.sampled_from(sorted(TOKEN_QUALIFIERS))), "tokens"]
    if kind == "phrase":
        return ["mot", "de", "passe"]
    return ["db", draw(st.sampled_from(["pw", "pass", "pwd"]))]  # short heads after a prefix


@st.composite
def secret_names(draw: st.DrawFn) -> str:
    prefix = draw(
        st.lists(st.sampled_from(["db", "mysql", "root", "app", "user", "old", "svc2"]), max_size=2)
    )
    suffix = draw(st.lists(st.sampled_from([*sorted(TRAILING_QUALIFIERS), "2", "01"]), max_size=2))
    words = [*prefix, *draw(heads()), *suffix]
    style = draw(st.sampled_from(["snake", "kebab", "dotted", "camel", "upper", "pascal"]))
    if style == "camel":
        return words[0] + "".join(word.capitalize() for word in words[1:])
    if style == "pascal":
        return "".join(word.capitalize() for word in words)
    joiner = {"snake": "_", "kebab": "-", "dotted": ".", "upper": "_"}[style]
    name = joiner.join(words)
    return name.upper() if style == "upper" else name


@settings(max_examples=examples(150, long=5_000), deadline=None, database=None)
@given(secret_names())
def test_every_generated_secret_name_is_hidden_by_every_consumer(name: str) -> None:
    assert hidden_everywhere(name) == [], name
    assert any(trigger in name.lower() for trigger in SECRET_KEY_TRIGGERS)  # the text rule's pre-filter


# --- end to end: SELECT * on MariaDB -----------------------------------------------------------------------


@pytest.fixture
def six_canaries(mysql_server: str) -> Iterator[tuple[str, list[str]]]:
    """A table whose six secret columns are the ones the old column rule missed, each holding a canary."""
    database = f"dc_names_{secrets.token_hex(4)}"
    canaries = [f"qz{secrets.token_hex(6)}" for _ in ISSUE_NAMES]
    columns = ", ".join(f"`{name}` VARCHAR(64)" for name in ISSUE_NAMES)
    with root_connection() as conn, conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{database}`")
        try:
            conn.select_db(database)
            cur.execute(f"CREATE TABLE accounts (id INT PRIMARY KEY, name VARCHAR(32), {columns})")
            cur.execute(
                f"INSERT INTO accounts VALUES (1, 'svc', {', '.join(['%s'] * len(canaries))})", canaries
            )
            yield database, canaries
        finally:
            cur.execute(f"DROP DATABASE IF EXISTS `{database}`")


@pytest.mark.mysql
async def test_select_star_shows_none_of_the_six_canaries_and_no_where_oracle_runs(
    six_canaries: tuple[str, list[str]],
) -> None:
    database, canaries = six_canaries
    adapter = MysqlAdapter(
        f"mysql://root@127.0.0.1:3306/{database}", password=None, allowed_schemas=[database]
    )
    try:
        result = await adapter.execute(mysql_request("SELECT * FROM accounts"))
        projected = REDACTOR.value(result.data)  # what the boundary hands on: the projection, redacted
    finally:
        await adapter.aclose()
    assert projected["columns"] == ["id", "name", *ISSUE_NAMES]
    assert projected["rows"] == [[1, "svc", *[REDACTED] * len(ISSUE_NAMES)]]
    shown = json.dumps(projected)
    assert not [canary for canary in canaries if canary in shown]
    for name in ISSUE_NAMES:
        assert refused(f"SELECT COUNT(*) AS n FROM accounts WHERE {name} LIKE 'a%'"), name
