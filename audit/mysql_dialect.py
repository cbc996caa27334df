"""The audit's SQL, written once in SQLite's dialect, as MariaDB/MySQL reads it.

The sink's and browser's statements use three constructs the two servers spell differently:
`?` placeholders (PyMySQL's are `%s`, so a literal `%` doubles), and the upsert
`INSERT ... ON CONFLICT (key) DO UPDATE SET c = excluded.c` (MariaDB/MySQL: `ON DUPLICATE KEY
UPDATE c = VALUES(c)`, where the conflict target is implied by the table's keys; every upsert here
targets the primary key). String literals stay as they are: the server session runs with
`NO_BACKSLASH_ESCAPES`, so `'\\'` is one backslash on both. A statement must not hold `?` inside a
string literal; none of ours does, and `tests/test_audit_mysql_dialect.py` pins every statement.
"""

from __future__ import annotations

import functools
import re

_UPSERT = re.compile(r"\bON CONFLICT\s*\([^)]*\)\s*DO UPDATE SET\b", re.IGNORECASE)
_EXCLUDED = re.compile(r"\bexcluded\.(\w+)", re.IGNORECASE)


@functools.lru_cache(maxsize=512)
def to_mysql(sql: str) -> str:
    """`sql` (SQLite's dialect, as the audit spells it) for PyMySQL on MariaDB/MySQL."""
    text = sql.replace("%", "%%").replace("?", "%s")
    text = _UPSERT.sub("ON DUPLICATE KEY UPDATE", text)
    return _EXCLUDED.sub(r"VALUES(\1)", text)
