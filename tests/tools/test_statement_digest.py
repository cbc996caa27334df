"""Other sessions' SQL reaches the model only as a digest: literals become `?`, and text that cannot be
read for sure is withheld whole (`tools.mysql.statement_digest`, `tools.mysql.innodb_status`)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tools.mysql.innodb_status import status_lines
from tools.mysql.statement_digest import WITHHELD, digest, digest_or_withheld, mask_quoted

CANARY = "CANARY7q"


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("update shop.t set v='CANARY' where id=1", "update shop.t set v = ? where id = ?"),
        ("CREATE USER 'bob'@'%' IDENTIFIED BY 'hunter2'", "CREATE USER ? @? IDENTIFIED BY ?"),
        ("SELECT * FROM t WHERE a IN (1, 2, 3)", "SELECT * FROM t WHERE a IN (...)"),
        ("INSERT INTO t VALUES (1, 'a'), (2, 'b')", "INSERT INTO t VALUES (...), (...)"),
        ("SELECT x'41', 0x41, b'01', N'n', _utf8mb4'u', 1.5e3", "SELECT ?, ?, ?, ?, ?, ?"),
        ("SELECT a /* card 4111111111111111 */ FROM t", "SELECT a FROM t"),
        ("SELECT `odd name` FROM `db`.`t`", "SELECT `odd name` FROM `db`.`t`"),
        ('SELECT "double quoted" FROM t', "SELECT ? FROM t"),
    ],
)
def test_literals_become_placeholders(sql: str, expected: str) -> None:
    assert digest(sql) == expected


@pytest.mark.parametrize(
    "sql",
    [
        "UPDATE users SET password = 'cut short",  # trx_query stops at 1024 bytes, maybe inside a string
        "SELECT 'a\\', 'CANARY'",  # one string or two, by NO_BACKSLASH_ESCAPES: the readings differ
        "SELECT `unterminated",
    ],
)
def test_text_that_cannot_be_read_for_sure_is_withheld(sql: str) -> None:
    assert digest(sql) is None
    assert digest_or_withheld(sql) == WITHHELD


def test_a_cell_that_is_not_text_is_withheld_and_null_stays_null() -> None:
    assert digest_or_withheld(None) is None
    assert digest_or_withheld(b"UPDATE t SET a = 'x'") == WITHHELD


def test_server_messages_keep_their_words_not_their_quoted_values() -> None:
    message = "Duplicate entry 'alice@example.com' for key 'email'"
    assert mask_quoted(message) == "Duplicate entry '?' for key '?'"
    assert mask_quoted("Could not execute Write_rows event on table 'shop.orders; cut") == (
        "Could not execute Write_rows event on table '?'"
    )


# Literal shapes a statement in flight can carry, each holding the canary.
_LITERALS = st.sampled_from(
    [
        f"'{CANARY}'",
        f'"{CANARY}"',
        f"'it''s {CANARY}'",
        f"'back\\\\slash {CANARY}'",
        f"'line\n{CANARY}\nend'",
        f"_utf8mb4'{CANARY}'",
        f"N'{CANARY}'",
        f"'{CANARY} -- not a comment'",
        f"'{CANARY} /* nor this */'",
    ]
)
_SHAPES = st.sampled_from(
    [
        "UPDATE accounts SET email = {0} WHERE id = 7",
        "INSERT INTO t (a, b) VALUES ({0}, {0})",
        "SELECT * FROM t WHERE a = {0} OR b IN ({0}, 1)",
        "CREATE USER 'u'@'%' IDENTIFIED BY {0}",
        "CALL p({0})",
        "SET @x = {0}",
    ]
)


@settings(max_examples=300, deadline=None, database=None)
@given(_SHAPES, _LITERALS)
def test_no_literal_of_a_statement_survives_its_digest(shape: str, literal: str) -> None:
    shown = digest(shape.format(literal))
    assert shown is None or CANARY not in shown


# --- SHOW ENGINE INNODB STATUS ------------------------------------------------------------------

_RULE = "------------"
THREAD_LINE = (
    "MariaDB thread id 9, OS thread handle 131900194657984, query id 18 localhost 127.0.0.1 root Updating"
)


def innodb_status(transactions: list[str]) -> str:
    """A status text shaped as MariaDB 10.11 prints it (the lines around the transactions were taken
    from the server's own output during a lock wait)."""
    return "\n".join(
        [
            "=====================================",
            "2026-12-06 16:19:04 0x77f6683ae6c0 INNODB MONITOR OUTPUT",
            "=====================================",
            _RULE,
            "TRANSACTIONS",
            _RULE,
            "Trx id counter 25",
            "History list length 0",
            "LIST OF TRANSACTIONS FOR EACH SESSION:",
            *transactions,
            "--------",
            "FILE I/O",
            "--------",
            "Pending flushes (fsync): 0",
            "----------------------------",
            "END OF INNODB MONITOR OUTPUT",
            "============================",
        ]
    )


def _waiting(statement: str) -> list[str]:
    return [
        "---TRANSACTION 24, ACTIVE 2 sec starting index read",
        "mysql tables in use 1, locked 1",
        "LOCK WAIT 2 lock struct(s), heap size 1128, 1 row lock(s)",
        THREAD_LINE,
        statement,
        "------- TRX HAS BEEN WAITING 2020029 us FOR THIS LOCK TO BE GRANTED:",
        "RECORD LOCKS space id 5 page no 3 n bits 320 index PRIMARY of table `shop`.`t` trx id 24 "
        "lock_mode X locks rec but not gap waiting",
        "Record lock, heap no 4 PHYSICAL RECORD: n_fields 4; compact format; info bits 0",
        " 0: len 4; hex 80000001; asc     ;;",
        f" 3: len 8; hex 43414e4152593771; asc {CANARY};;",
    ]


def test_the_transactions_section_shows_digests_and_withholds_record_fields() -> None:
    rows = status_lines(innodb_status(_waiting(f"update shop.t set v='{CANARY}' where id=1")))
    lines = [line for section, line in rows if section == "TRANSACTIONS"]
    assert lines == [
        "Trx id counter 25",
        "History list length 0",
        "LIST OF TRANSACTIONS FOR EACH SESSION:",
        "---TRANSACTION 24, ACTIVE 2 sec starting index read",
        "mysql tables in use 1, locked 1",
        "LOCK WAIT 2 lock struct(s), heap size 1128, 1 row lock(s)",
        THREAD_LINE,
        "update shop.t set v = ? where id = ?",
        "------- TRX HAS BEEN WAITING 2020029 us FOR THIS LOCK TO BE GRANTED:",
        "RECORD LOCKS space id 5 page no 3 n bits 320 index PRIMARY of table `shop`.`t` trx id 24 "
        "lock_mode X locks rec but not gap waiting",
        "Record lock, heap no 4 PHYSICAL RECORD: n_fields 4; compact format; info bits 0",
        "[record fields withheld]",
    ]
    assert ["FILE I/O", "Pending flushes (fsync): 0"] in rows
    assert ["", "2026-12-06 16:19:04 0x77f6683ae6c0 INNODB MONITOR OUTPUT"] in rows


# Lines InnoDB itself prints, planted inside a literal to cut the statement where its words would show.
_PLANTED = st.sampled_from(
    [
        "mysql tables in use 1, locked 1",
        "---TRANSACTION 5, ACTIVE 1 sec",
        "MySQL thread id 1, OS thread handle 1, query id 1 localhost root",
        " 0: len 4; hex 80000001; asc     ;;",
        _RULE,
        f"{_RULE}\nFILE I/O\n{_RULE}",
        f"{_RULE}\nTRANSACTIONS\n{_RULE}",
    ]
)


@settings(max_examples=300, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(_PLANTED, st.sampled_from(["'", '"']), st.sampled_from(["'", '"']), st.booleans())
def test_innodb_lines_planted_in_a_literal_never_show_the_statements_other_literals(
    planted: str, quote: str, other: str, trailing_word: bool
) -> None:
    """`UPDATE t SET note = '<attacker text>', secret = '<canary>'`: the attacker's text holds a line that
    looks like InnoDB's; whatever it splits, the canary (another literal of the same statement) and the
    words of the attacker's literal never appear."""
    tail = f" {CANARY} {other} WHERE id = 1" if trailing_word else f" WHERE id = {other}{CANARY}{other}"
    statement = f"UPDATE t SET note = {quote}x\n{planted}\nNOTE{quote}, secret = {other}{CANARY}{other}{tail}"
    for _, line in status_lines(innodb_status(_waiting(statement))):
        assert CANARY not in line
        assert "NOTE" not in line
