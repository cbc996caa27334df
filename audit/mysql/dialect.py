"""The audit's SQL, written once in SQLite's dialect, as MariaDB/MySQL reads it.

The sink's and browser's statements use constructs the two servers spell differently:

- `?` placeholders: PyMySQL's are `%s`, so a literal `%` doubles.
- The upsert `INSERT ... ON CONFLICT (key) DO UPDATE SET c = excluded.c`: MariaDB/MySQL's is
  `ON DUPLICATE KEY UPDATE c = VALUES(c)`, its conflict target implied by the table's keys (every
  upsert here targets the primary key).
- `+column = ?`, SQLite's way to keep a column off the index: on the server a unary plus turns text
  into a number, so it is dropped (the server's planner picks indexes by their statistics).
- `column LIKE ?`: SQLite's LIKE ignores ASCII case; the tables' binary collation does not, so both
  sides are lowered (which also folds non-ASCII letters: a little wider than the file).
- `COALESCE(started_at, finished_at)`, the runs' page order: the generated column `listed_at`
  that carries its index on the server (audit.mysql.schema).
 String literals stay as they are: the server session runs with
`NO_BACKSLASH_ESCAPES`, so `'\\'` is one backslash on both. A statement must not hold `?` inside a
string literal; none of ours does, and `tests/audit/test_audit_mysql_dialect.py` pins every statement.
"""

from __future__ import annotations

import functools
import re

from audit.common import RUN_LISTED_AT

_UNARY_PLUS = re.compile(r"(?<=[\s(])\+(?=[A-Za-z_])")
_LIKE = re.compile(r"([A-Za-z_][\w.]*) LIKE \?")
_UPSERT = re.compile(r"\bON CONFLICT\s*\([^)]*\)\s*DO UPDATE SET\b", re.IGNORECASE)
_EXCLUDED = re.compile(r"\bexcluded\.(\w+)", re.IGNORECASE)


@functools.lru_cache(maxsize=512)
def to_mysql(sql: str) -> str:
    """`sql` (SQLite's dialect, as the audit spells it) for PyMySQL on MariaDB/MySQL."""
    text = sql.replace(RUN_LISTED_AT, "listed_at")
    text = _UNARY_PLUS.sub("", text)
    text = _LIKE.sub(r"LOWER(\1) LIKE LOWER(?)", text)
    text = text.replace("%", "%%").replace("?", "%s")
    text = _UPSERT.sub("ON DUPLICATE KEY UPDATE", text)
    return _EXCLUDED.sub(r"VALUES(\1)", text)
