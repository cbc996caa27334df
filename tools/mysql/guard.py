"""Read-only policy for `query_mysql`: decide what may reach the server and build the exact text to send.

The model writes SQL; a MySQL server executes far more than SELECT (executable comments, `INTO OUTFILE`,
locking reads, `SLEEP`, stored functions, variables). So every step fails closed: the text is
checked lexically before sqlglot ever sees it, the parsed tree must consist only of node types and
functions on explicit allowlists, and what is executed is never the caller's text:
SELECT/EXPLAIN are regenerated from the validated tree (every identifier quoted, every table
qualified, the outer LIMIT clamped) and re-verified; SHOW/DESCRIBE are rebuilt from identifiers
matched by a strict grammar of our own, because sqlglot rewrites SHOW statements
(`SHOW GRANTS` becomes `SHOW GRANTS FOR`, `SHOW FULL COLUMNS FROM db.t` becomes `... FROM t FROM db`).

A statement that reads a secret-named column or JSON key anywhere in its tree (not only in its result
columns: a join condition, WHERE, a CTE, a window, a function argument) is refused as `SECRET_COLUMN`,
and so is a `*` placed where its columns could be compared or renamed unnamed (`tools.mysql.secret_reads`).

The system schemas stay closed except for the diagnostic views `tools.mysql.diagnostic_surface`
allows (anything else there is `SYSTEM_SCHEMA`), and the diagnostic SHOW statements (processlist,
status, variables, InnoDB status, replica and binary log status, open tables, table status) are rebuilt
from the same kind of grammar. Over those views another session's SQL may be selected or tested for
NULL, never compared (`STATEMENT_TEXT`); which result columns the adapter must digest or mask travels
with the `GuardedStatement`.

Every rejection is a `SqlPolicyError` with a stable `reason`; the adapter reports it as
`POLICY_REJECTED` and never contacts the server.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

import sqlglot
from sqlglot import Token, TokenType, exp
from sqlglot.dialects.mysql import MySQL

from tools.mysql.diagnostic_surface import (
    BOTH,
    MARIADB_ONLY,
    MESSAGE_COLUMNS,
    SECRET_VARIABLE_PATTERNS,
    SERVER_DIGEST_COLUMNS,
    STATEMENT_TEXT_COLUMNS,
    DiagnosticView,
    Flavor,
    diagnostic_view,
)
from tools.mysql.secret_reads import has_positional_reference, renames_columns, secret_read
from tools.redaction import REDACTED
from tools.secret_names import names_secret


class PolicyReason(StrEnum):
    """Why the guard refused a statement: the stable reason of its POLICY_REJECTED observation."""

    TOO_LONG = "TOO_LONG"
    PARSE_ERROR = "PARSE_ERROR"
    COMMENT = "COMMENT"
    MULTI_STATEMENT = "MULTI_STATEMENT"
    WRITE_STATEMENT = "WRITE_STATEMENT"
    UNSUPPORTED_STATEMENT = "UNSUPPORTED_STATEMENT"
    EXPLAIN_ANALYZE = "EXPLAIN_ANALYZE"
    INTO_CLAUSE = "INTO_CLAUSE"
    LOCKING_READ = "LOCKING_READ"
    VARIABLE = "VARIABLE"
    FUNCTION_NOT_ALLOWED = "FUNCTION_NOT_ALLOWED"
    COSTLY_EXPRESSION = "COSTLY_EXPRESSION"
    NO_DATABASE = "NO_DATABASE"
    SYSTEM_SCHEMA = "SYSTEM_SCHEMA"
    SCHEMA_NOT_ALLOWED = "SCHEMA_NOT_ALLOWED"
    SECRET_COLUMN = "SECRET_COLUMN"  # noqa: S105 - a refusal reason's name
    STATEMENT_TEXT = "STATEMENT_TEXT"


SYSTEM_SCHEMAS = frozenset({"mysql", "information_schema", "performance_schema", "sys"})


@dataclass(frozen=True)
class Cost:
    """How large a function's value can get: at most `factor * n + CONSTANT_BYTES` bytes, where n is the
    total size of its inputs in bytes (every argument value, a row's value counting at least one byte),
    computed in time linear in n. `factor` 0: the value has a bounded size (a number, a date)."""

    factor: int
    why: str


CONSTANT_BYTES = 128
# Strings a query builds (CONCAT inside a query, GROUP_CONCAT) are cut at this size, so composing linear
# functions through CTEs (each doubling its input) cannot build the 16 MB values the server allows.
BUILT_STRING_BYTES = 65_536
# A LIKE pattern costs (value length x pattern length) comparisons in one uninterruptible row
# evaluation, so it must be a short literal.
MAX_LIKE_PATTERN_BYTES = 64

# The functions a query may call, by what they can cost (tests/security proves each bound on MariaDB
# with the largest arguments a statement allows). Nothing whose value can grow faster than its
# inputs' total size (REPEAT, LPAD, SPACE, REPLACE with a long replacement, CONCAT_WS repeating its
# separator, CAST to a padded BINARY(n)), nothing slower than linear on long values (LOCATE/INSTR and
# REPLACE search naively, minutes on a few MB, and the server cannot interrupt a row's evaluation),
# nothing that sleeps, locks, waits for replication, touches files, changes state (sequences) or
# reveals the connection's identity (USER(), CURRENT_USER, CONNECTION_ID()). DATABASE()/SCHEMA() only
# name the schema the adapter already chose.
_NUMBER = Cost(0, "a number")
_DATE = Cost(0, "a date or time")
_ONE_INPUT = Cost(1, "one of its inputs")
_PREFIX = Cost(1, "a part of its input")
_CASE_MAPPING = Cost(3, "case mapping may widen a character")
FUNCTION_COSTS: dict[str, Cost] = {
    # aggregates and window functions
    "COUNT": _NUMBER, "SUM": _NUMBER, "AVG": _NUMBER, "MIN": _ONE_INPUT, "MAX": _ONE_INPUT,
    "GROUP_CONCAT": Cost(5, "the values with separators of at most 4 bytes, cut at BUILT_STRING_BYTES"),
    "ROW_NUMBER": _NUMBER, "RANK": _NUMBER, "DENSE_RANK": _NUMBER,
    # strings
    "CONCAT": Cost(1, "its inputs end to end"),
    "SUBSTRING": _PREFIX, "LEFT": _PREFIX, "RIGHT": _PREFIX, "TRIM": _PREFIX,
    "LOWER": _CASE_MAPPING, "UPPER": _CASE_MAPPING,
    "LENGTH": _NUMBER, "CHAR_LENGTH": _NUMBER,
    # conditionals and conversions
    "COALESCE": _ONE_INPUT, "IFNULL": _ONE_INPUT, "NULLIF": _ONE_INPUT, "IF": _ONE_INPUT, "CASE": _ONE_INPUT,
    "CAST": Cost(4, "to an unpadded type: a character set conversion at most"),
    "GREATEST": _ONE_INPUT, "LEAST": _ONE_INPUT, "EXISTS": _NUMBER, "COLLATE": _ONE_INPUT,
    # dates and times
    "NOW": _DATE, "CURRENT_TIMESTAMP": _DATE, "CURRENT_DATE": _DATE, "CURDATE": _DATE, "DATE": _DATE,
    "TIMESTAMP": _DATE, "DATE_SUB": _DATE, "DATE_ADD": _DATE, "TIMESTAMPDIFF": _NUMBER, "DATEDIFF": _NUMBER,
    "UNIX_TIMESTAMP": _NUMBER, "EXTRACT": _NUMBER, "YEAR": _NUMBER, "MONTH": _NUMBER, "DAY": _NUMBER,
    "HOUR": _NUMBER, "MINUTE": _NUMBER, "SECOND": _NUMBER,
    "DATE_FORMAT": Cost(6, "a two-byte specifier such as %r becomes at most 11 bytes"),
    "FROM_UNIXTIME": Cost(6, "a two-byte specifier such as %r becomes at most 11 bytes"),
    # math
    "ROUND": _NUMBER, "FLOOR": _NUMBER, "CEIL": _NUMBER, "ABS": _NUMBER,
    # JSON: one path without wildcards selects one value, re-serialized with spaces after , and :
    "JSON_EXTRACT": Cost(2, "one value of the document, re-serialized"), "JSON_UNQUOTE": _PREFIX,
    # the schema the adapter connected to, and the server's version
    "DATABASE": Cost(0, "a schema name"), "VERSION": Cost(0, "the server's version string"),
    # what SREs write over the diagnostic views: a host without its port, seconds as a duration
    "SUBSTRING_INDEX": _PREFIX, "TIME_TO_SEC": _NUMBER, "SEC_TO_TIME": _DATE,
}  # fmt: skip
ALLOWED_FUNCTIONS = frozenset(FUNCTION_COSTS)
# CAST targets that never pad: numbers, dates and times, and character data without a length.
_CAST_TARGETS = frozenset(
    {
        exp.DataType.Type.CHAR, exp.DataType.Type.NCHAR, exp.DataType.Type.BINARY,
        exp.DataType.Type.CHARACTER_SET, exp.DataType.Type.BIGINT, exp.DataType.Type.UBIGINT,
        exp.DataType.Type.INT, exp.DataType.Type.DECIMAL, exp.DataType.Type.DOUBLE, exp.DataType.Type.FLOAT,
        exp.DataType.Type.DATE, exp.DataType.Type.DATETIME, exp.DataType.Type.TIME,
    }
)  # fmt: skip
_LENGTHLESS_CAST_TARGETS = frozenset(
    {exp.DataType.Type.CHAR, exp.DataType.Type.NCHAR, exp.DataType.Type.BINARY}
)

# sqlglot parses most known functions into typed nodes (IFNULL becomes Coalesce, DATE_FORMAT becomes
# TimeToStr around an implicit TsOrDsToTimestamp): this names the MySQL function each node stands for.
# Exact classes only; a node type missing here is not allowed, whatever it renders as. `->>` is left
# out on purpose: sqlglot keeps it as an operator, which MariaDB does not have.
_TYPED_FUNCTIONS: dict[type[exp.Func], str] = {
    exp.Count: "COUNT",
    exp.Sum: "SUM",
    exp.Avg: "AVG",
    exp.Min: "MIN",
    exp.Max: "MAX",
    exp.GroupConcat: "GROUP_CONCAT",
    exp.RowNumber: "ROW_NUMBER",
    exp.Rank: "RANK",
    exp.DenseRank: "DENSE_RANK",
    exp.Concat: "CONCAT",
    exp.Substring: "SUBSTRING",
    exp.Left: "LEFT",
    exp.Right: "RIGHT",
    exp.Lower: "LOWER",
    exp.Upper: "UPPER",
    exp.Trim: "TRIM",
    exp.Length: "LENGTH",
    exp.Coalesce: "COALESCE",
    exp.Nullif: "NULLIF",
    exp.If: "IF",
    exp.Case: "CASE",
    exp.Cast: "CAST",
    exp.Greatest: "GREATEST",
    exp.Least: "LEAST",
    exp.Exists: "EXISTS",
    exp.Collate: "COLLATE",
    exp.CurrentTimestamp: "CURRENT_TIMESTAMP",
    exp.CurrentDate: "CURRENT_DATE",
    exp.TsOrDsToDate: "DATE",
    exp.TsOrDsToTimestamp: "TIMESTAMP",
    exp.Timestamp: "TIMESTAMP",
    exp.TimeToStr: "DATE_FORMAT",
    exp.DateSub: "DATE_SUB",
    exp.DateAdd: "DATE_ADD",
    exp.TimestampDiff: "TIMESTAMPDIFF",
    exp.DateDiff: "DATEDIFF",
    exp.UnixToTime: "FROM_UNIXTIME",
    exp.Extract: "EXTRACT",
    exp.Year: "YEAR",
    exp.Month: "MONTH",
    exp.Day: "DAY",
    exp.Hour: "HOUR",
    exp.Minute: "MINUTE",
    exp.Second: "SECOND",
    exp.Round: "ROUND",
    exp.Floor: "FLOOR",
    exp.Ceil: "CEIL",
    exp.Abs: "ABS",
    exp.JSONExtract: "JSON_EXTRACT",  # also `->`, which sqlglot renders as JSON_EXTRACT(...)
    exp.CurrentSchema: "DATABASE",
    exp.CurrentVersion: "VERSION",
    exp.SubstringIndex: "SUBSTRING_INDEX",
}

# Every other node a SELECT may contain. Anything not listed (PARTITION, LATERAL, VALUES, Dot for
# `db.func()` stored-function calls, new sqlglot node types) is rejected rather than reasoned about.
_ALLOWED_NODES: frozenset[type[exp.Expression]] = frozenset(
    {
        exp.Select, exp.Union, exp.Intersect, exp.Except, exp.Subquery, exp.With, exp.CTE,
        exp.From, exp.Join, exp.Table, exp.TableAlias, exp.IndexTableHint, exp.Where, exp.Group,
        exp.Rollup, exp.Having, exp.Order, exp.Ordered, exp.Limit, exp.Offset, exp.Distinct,
        exp.Window, exp.WindowSpec,
        exp.Identifier, exp.Column, exp.Star, exp.Alias, exp.Literal, exp.Null, exp.Boolean,
        exp.HexString, exp.BitString, exp.Introducer, exp.Paren, exp.Tuple, exp.Interval, exp.Var,
        exp.DataType, exp.DataTypeParam, exp.Escape,
        exp.JSONPath, exp.JSONPathRoot, exp.JSONPathKey, exp.JSONPathSubscript, exp.JSONPathWildcard,
        exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.NullSafeEQ, exp.And, exp.Or, exp.Xor,
        exp.Not, exp.Neg, exp.Add, exp.Sub, exp.Mul, exp.Div, exp.IntDiv, exp.Mod,
        exp.BitwiseAnd, exp.BitwiseOr, exp.BitwiseXor, exp.BitwiseNot, exp.BitwiseLeftShift,
        exp.BitwiseRightShift, exp.Like, exp.Is, exp.In, exp.Between, exp.Any, exp.All,
    }
)  # fmt: skip

_WRITE_NODES: tuple[type[exp.Expr], ...] = (
    exp.DML,
    exp.DDL,
    exp.Drop,
    exp.Alter,
    exp.TruncateTable,
    exp.Grant,
    exp.Revoke,
    exp.LoadData,
)
_VARIABLE_NODES = (exp.Parameter, exp.SessionParameter, exp.PropertyEQ, exp.Placeholder)

# First words of statements that change data, schema or privileges: named so the model learns why.
_WRITE_KEYWORDS = frozenset(
    {
        "INSERT", "UPDATE", "DELETE", "REPLACE", "MERGE", "UPSERT", "DROP", "TRUNCATE", "ALTER", "RENAME",
        "CREATE", "GRANT", "REVOKE", "LOAD", "IMPORT",
    }
)  # fmt: skip
_QUERY_STARTS = frozenset({TokenType.SELECT, TokenType.WITH, TokenType.L_PAREN})
_DESCRIBE_STARTS = frozenset({TokenType.DESCRIBE, TokenType.DESC})
_NAME_TOKENS = frozenset({TokenType.IDENTIFIER, TokenType.STRING})

# The SHOW/DESCRIBE grammar: ASCII whitespace only (MySQL does not treat U+00A0 as a separator),
# plain or backtick-quoted identifiers, LIKE patterns without quotes or escapes.
_WS = r"[ \t\r\n]+"
_IDENT = r"(?:`(?:[^`]|``)+`|[A-Za-z0-9_$]+)"
_NAME = rf"(?P<first>{_IDENT})(?:\.(?P<second>{_IDENT}))?"
_FROM_DB = rf"(?:{_WS}(?:FROM|IN){_WS}(?P<db>{_IDENT}))?"
_LIKE = rf"(?:{_WS}LIKE{_WS}'(?P<like>[A-Za-z0-9_%$]*)')?"
_END = r"[ \t\r\n]*;?[ \t\r\n]*\Z"
_FLAGS = re.IGNORECASE | re.ASCII
_SHOW_TABLES = re.compile(rf"SHOW(?P<full>{_WS}FULL)?{_WS}TABLES{_FROM_DB}{_LIKE}{_END}", _FLAGS)
_SHOW_COLUMNS = re.compile(
    rf"SHOW(?P<full>{_WS}FULL)?{_WS}(?:COLUMNS|FIELDS){_WS}(?:FROM|IN){_WS}{_NAME}{_FROM_DB}{_LIKE}{_END}",
    _FLAGS,
)
_SHOW_INDEX = re.compile(
    rf"SHOW{_WS}(?:INDEX|INDEXES|KEYS){_WS}(?:FROM|IN){_WS}{_NAME}{_FROM_DB}{_END}", _FLAGS
)
_SHOW_CREATE_TABLE = re.compile(rf"SHOW{_WS}CREATE{_WS}TABLE{_WS}{_NAME}{_END}", _FLAGS)
_DESCRIBE_TABLE = re.compile(rf"(?:DESCRIBE|DESC|EXPLAIN){_WS}{_NAME}{_END}", _FLAGS)
# The diagnostic SHOW statements (server state, not a schema's objects).
_SCOPE = rf"(?:{_WS}(?P<scope>GLOBAL|SESSION|LOCAL))?"
_SHOW_PROCESSLIST = re.compile(rf"SHOW(?:{_WS}FULL)?{_WS}PROCESSLIST{_END}", _FLAGS)
_SHOW_STATUS = re.compile(rf"SHOW{_SCOPE}{_WS}(?P<what>STATUS|VARIABLES){_LIKE}{_END}", _FLAGS)
_SHOW_INNODB_STATUS = re.compile(rf"SHOW{_WS}ENGINE{_WS}INNODB{_WS}STATUS{_END}", _FLAGS)
_SHOW_INNODB_MUTEX = re.compile(rf"SHOW{_WS}ENGINE{_WS}INNODB{_WS}MUTEX{_END}", _FLAGS)
_SHOW_ALL_REPLICAS_STATUS = re.compile(rf"SHOW{_WS}ALL{_WS}(?:REPLICAS|SLAVES){_WS}STATUS{_END}", _FLAGS)
_SHOW_REPLICA_STATUS = re.compile(rf"SHOW{_WS}(?:REPLICA|SLAVE){_WS}STATUS{_END}", _FLAGS)
_SHOW_BINLOG_STATUS = re.compile(rf"SHOW{_WS}(?:MASTER|BINLOG|BINARY{_WS}LOG){_WS}STATUS{_END}", _FLAGS)
_SHOW_BINARY_LOGS = re.compile(rf"SHOW{_WS}(?:BINARY|MASTER){_WS}LOGS{_END}", _FLAGS)
_OWS = r"[ \t\r\n]*"
_COMPARISON = r"(?P<op>>=|<=|<>|!=|=|>|<)"
_OPEN_TABLES_WHERE = (
    rf"{_WS}WHERE{_WS}(?P<column>In_use|Name_locked){_OWS}{_COMPARISON}{_OWS}(?P<number>[0-9]{{1,9}})"
)
_SHOW_OPEN_TABLES = re.compile(
    rf"SHOW{_WS}OPEN{_WS}TABLES{_FROM_DB}(?:{_LIKE}|{_OPEN_TABLES_WHERE})?{_END}", _FLAGS
)
_SHOW_TABLE_STATUS = re.compile(rf"SHOW{_WS}TABLE{_WS}STATUS{_FROM_DB}{_LIKE}{_END}", _FLAGS)
# SHOW REPLICA STATUS quotes the statement a replica failed on in these columns.
_REPLICA_MESSAGES = frozenset({"last_error", "last_sql_error", "last_io_error"})
_ALLOWED_CONTROL_CHARACTERS = frozenset("\t\n\r")
_INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn"})
_VARIABLE_TOKENS = frozenset(
    {TokenType.PARAMETER, TokenType.SESSION_PARAMETER, TokenType.COLON_EQ, TokenType.PLACEHOLDER}
)
_ANALYZE_TABLE_WORDS = frozenset({"TABLE", "LOCAL", "NO_WRITE_TO_BINLOG"})


class SqlPolicyError(Exception):
    """The statement is not allowed; `reason` is the stable code reported with POLICY_REJECTED.

    The message adds a detail for logs and tests only; it is never shown to the model.
    """

    def __init__(self, reason: PolicyReason, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason


@dataclass(frozen=True)
class GuardedStatement:
    """What the adapter executes: `sql` exactly as given, never the caller's text.

    For a SELECT, `columns_sql` is the same statement with LIMIT 0, which tells the adapter the result
    columns before it fetches (see `tools.mysql.adapter`)."""

    kind: Literal["SELECT", "SHOW", "DESCRIBE", "EXPLAIN"]
    sql: str
    schemas: tuple[str, ...]
    row_limit: int | None
    columns_sql: str | None = None
    # Result columns that carry a secret-named column under another name (`SELECT password AS p`): by
    # position, and by the names a CTE or derived table gave them (for `SELECT *` over it).
    secret_columns: tuple[int, ...] = ()
    secret_names: frozenset[str] = frozenset()
    # The diagnostic views the statement reads (the adapter checks the server has them), and how its
    # results must be shown (`tools.mysql.diagnostic_surface`): result columns carrying another session's
    # SQL are shown as digests and server messages with their quoted parts masked, by position and by
    # name as above; SHOW VARIABLES rows hide secret-looking values; SHOW ENGINE INNODB STATUS is cut
    # into lines whose statements are digested (`tools.mysql.innodb_status`).
    views: tuple[DiagnosticView, ...] = ()
    digest_columns: tuple[int, ...] = ()
    digest_names: frozenset[str] = frozenset()
    message_columns: tuple[int, ...] = ()
    message_names: frozenset[str] = frozenset()
    variable_rows: bool = False
    innodb_status: bool = False
    # A statement only one server family has, and what answers it on the other.
    servers: frozenset[Flavor] = BOTH
    equivalent: str | None = None


@dataclass(frozen=True)
class _Policy:
    database: str | None
    allowed: dict[str, str]  # lower-case name -> spelling from the configuration
    row_limit: int

    def schema(self, name: str | None) -> str:
        """The configured spelling of an allowed schema; executing that spelling keeps a case-sensitive
        server (lower_case_table_names=0) from resolving `SHOP` to a different database than `shop`."""
        if name is None:
            raise SqlPolicyError(PolicyReason.NO_DATABASE, "unqualified table and no database given")
        lowered = name.lower()
        if lowered in SYSTEM_SCHEMAS:
            raise SqlPolicyError(PolicyReason.SYSTEM_SCHEMA, lowered)
        if lowered not in self.allowed:
            raise SqlPolicyError(PolicyReason.SCHEMA_NOT_ALLOWED, lowered)
        return self.allowed[lowered]

    def view(self, schema: str | None, table: str) -> DiagnosticView | None:
        """The diagnostic view `schema.table` names, None for a table of an allowed business schema;
        anything else in a system schema is SYSTEM_SCHEMA."""
        if schema is None or schema.lower() not in SYSTEM_SCHEMAS:
            self.schema(schema)
            return None
        view = diagnostic_view(schema, table)
        if view is None:
            raise SqlPolicyError(PolicyReason.SYSTEM_SCHEMA, f"{schema.lower()}.{table}")
        return view


def guard_sql(
    sql: str, *, database: str | None, allowed_schemas: Sequence[str], max_rows: int, max_bytes: int = 4000
) -> GuardedStatement:
    """Validate one read-only statement and return the text to execute, or raise `SqlPolicyError`."""
    if max_rows < 1 or max_bytes < 1:
        raise ValueError("max_rows and max_bytes must be positive")
    _check_text(sql, max_bytes)
    tokens = _tokenize(sql)
    _check_single_statement(tokens)
    _check_statement_start(tokens)
    _check_token_patterns(tokens)
    policy = _Policy(
        database=database,
        allowed={name.lower(): name for name in allowed_schemas},
        row_limit=max_rows + 1,
    )
    if database is not None:
        policy.schema(database)
    first = tokens[0].token_type
    if first == TokenType.SHOW:
        return _guard_show(sql, policy)
    if any(token.token_type == TokenType.TABLE for token in tokens):
        # MySQL 8's `TABLE t` (also inside UNION) is not a SELECT; sqlglot would rewrite it into one.
        raise SqlPolicyError(PolicyReason.UNSUPPORTED_STATEMENT, "TABLE statement")
    if first in _DESCRIBE_STARTS:
        if tokens[1].token_type in _QUERY_STARTS:
            body = _guard_query(sql[tokens[1].start :], policy)
            return GuardedStatement(
                "EXPLAIN", f"EXPLAIN {body.sql}", body.schemas, body.row_limit, views=body.views
            )
        return _guard_describe(sql, policy)
    return _guard_query(sql, policy)


# --- lexical checks, before any parsing -------------------------------------------------------


def _check_text(sql: str, max_bytes: int) -> None:
    try:
        size = len(sql.encode("utf-8"))
    except UnicodeEncodeError as exc:  # lone surrogates cannot be sent to the server at all
        raise SqlPolicyError(PolicyReason.PARSE_ERROR, "not encodable as UTF-8") from exc
    if size > max_bytes:
        raise SqlPolicyError(PolicyReason.TOO_LONG, f"{size} bytes")
    if not sql.strip():
        raise SqlPolicyError(PolicyReason.PARSE_ERROR, "empty statement")
    for ch in sql:
        # NUL, invisible format characters (zero-width space, bidi overrides) and unassigned code
        # points only ever serve to make the text read differently than it parses.
        if ch not in _ALLOWED_CONTROL_CHARACTERS and unicodedata.category(ch) in _INVISIBLE_CATEGORIES:
            raise SqlPolicyError(PolicyReason.PARSE_ERROR, f"character U+{ord(ch):04X}")
    # The server may run with or without NO_BACKSLASH_ESCAPES, which moves where a string ends:
    # a comment must not hide behind either reading.
    if _has_comment(sql, backslash_escapes=True) or _has_comment(sql, backslash_escapes=False):
        raise SqlPolicyError(PolicyReason.COMMENT)


def _has_comment(text: str, *, backslash_escapes: bool) -> bool:
    """Whether `--`, `#` or `/*` occurs outside quotes.

    Stricter than MySQL on purpose (MySQL needs whitespace after `--`, so `1--1` is rejected too):
    sqlglot's tokenizer silently drops a statement that is only a comment, so it cannot be the judge.
    """
    quote: str | None = None
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if quote is not None:
            if ch == "\\" and backslash_escapes and quote != "`":
                i += 2
                continue
            if ch == quote:
                if i + 1 < n and text[i + 1] == quote:
                    i += 2
                    continue
                quote = None
        elif ch in "'\"`":
            quote = ch
        elif ch == "#" or text.startswith(("--", "/*"), i):
            return True
        i += 1
    return False


def _tokenize(sql: str) -> list[Token]:
    try:
        tokens = MySQL().tokenize(sql)
    except Exception as exc:  # fail closed: any tokenizer failure is a rejection, never a crash
        raise SqlPolicyError(PolicyReason.PARSE_ERROR, "tokenizer") from exc
    if not tokens:
        raise SqlPolicyError(PolicyReason.PARSE_ERROR, "no tokens")
    if any(token.comments for token in tokens):
        raise SqlPolicyError(PolicyReason.COMMENT)
    return tokens


def _check_single_statement(tokens: list[Token]) -> None:
    for index, token in enumerate(tokens):
        if token.token_type == TokenType.SEMICOLON and index != len(tokens) - 1:
            raise SqlPolicyError(PolicyReason.MULTI_STATEMENT)
    if len(tokens) == 1 and tokens[0].token_type == TokenType.SEMICOLON:
        raise SqlPolicyError(PolicyReason.PARSE_ERROR, "empty statement")


def _check_statement_start(tokens: list[Token]) -> None:
    """Only SELECT/WITH/(, SHOW, DESCRIBE/DESC/EXPLAIN may start a statement.

    Decided on tokens because sqlglot cannot parse several dangerous statements (HANDLER, DO, XA,
    LOAD DATA) and degrades others to opaque Commands: the reason must not depend on that.
    """
    first, second = tokens[0], tokens[1] if len(tokens) > 1 else None
    if first.token_type in _QUERY_STARTS or first.token_type == TokenType.SHOW:
        return
    if first.token_type in _DESCRIBE_STARTS:
        if second is None or second.token_type == TokenType.SEMICOLON:
            raise SqlPolicyError(PolicyReason.PARSE_ERROR, "nothing to describe")
        if second.token_type == TokenType.ANALYZE:
            raise SqlPolicyError(PolicyReason.EXPLAIN_ANALYZE)
        return
    word = first.text.upper() if first.token_type not in _NAME_TOKENS else ""
    if word == "ANALYZE" and second is not None and second.text.upper() not in _ANALYZE_TABLE_WORDS:
        raise SqlPolicyError(PolicyReason.EXPLAIN_ANALYZE, "MariaDB ANALYZE runs the statement")
    if word in _WRITE_KEYWORDS:
        raise SqlPolicyError(PolicyReason.WRITE_STATEMENT, word)
    raise SqlPolicyError(PolicyReason.UNSUPPORTED_STATEMENT, word or "not a keyword")


def _check_token_patterns(tokens: list[Token]) -> None:
    """Clauses sqlglot cannot parse at all (INTO OUTFILE, INTO @v) get their own reason here."""
    for token, following in zip(tokens, [*tokens[1:], None], strict=True):
        kind = token.token_type
        if kind == TokenType.INTO:
            raise SqlPolicyError(PolicyReason.INTO_CLAUSE)
        if kind in _VARIABLE_TOKENS:
            raise SqlPolicyError(PolicyReason.VARIABLE)
        if following is None or following.token_type in _NAME_TOKENS:
            continue
        if (kind == TokenType.FOR and following.text.upper() in ("UPDATE", "SHARE")) or (
            kind == TokenType.LOCK and following.token_type == TokenType.IN
        ):
            raise SqlPolicyError(PolicyReason.LOCKING_READ)


# --- SELECT and set operations ----------------------------------------------------------------


def _guard_query(sql: str, policy: _Policy) -> GuardedStatement:
    root = _parse_query(sql)
    _drop_from_dual(root)
    schemas, views = _check_tree(root, policy)
    # Decided on the statement as written, before a variables view is replaced by its safe form.
    secret_positions, secret_names = _secret_results(root)
    texts = STATEMENT_TEXT_COLUMNS if views else frozenset()
    messages = MESSAGE_COLUMNS if views else frozenset()
    digest_positions, digest_names = _derived_columns(root, lambda name: name in texts)
    message_positions, message_names = _derived_columns(root, lambda name: name in messages)
    _qualify_tables(root, policy)
    _cap_built_strings(root)
    _clamp_limit(root, policy.row_limit)
    text = _generate(root)
    _verify_generated(text, policy, schemas)
    # The same statement with LIMIT 0: its result columns without a row (the server skips the work).
    probe = root.copy()
    probe.args["limit"].set("expression", exp.Literal.number(0))
    return GuardedStatement(
        "SELECT",
        text,
        schemas,
        policy.row_limit,
        columns_sql=_generate(probe),
        secret_columns=secret_positions,
        secret_names=secret_names,
        views=views,
        digest_columns=digest_positions,
        digest_names=digest_names | texts,  # a `*` over the view returns them under their own names
        message_columns=message_positions,
        message_names=message_names | messages,
    )


def _secret_results(root: exp.Query) -> tuple[tuple[int, ...], frozenset[str]]:
    """Which result columns select a secret, whatever they are called.

    The redaction step hides a column by its name; an alias (`SELECT password AS p`), a CTE or a derived
    table would rename it out of sight. So every projection that reads a secret-named column, or a
    column a CTE or subquery derived from one, makes its output name a secret too, to a fixed point.
    `SECRET_COLUMN` now refuses such statements before this runs; it stays as a second line, so the
    adapter still hides them should that rule ever be relaxed.
    """
    return _derived_columns(root, names_secret)


def _derived_columns(
    root: exp.Expr, carries: Callable[[str], bool]
) -> tuple[tuple[int, ...], frozenset[str]]:
    """The result positions that read a column whose (lower-case) name `carries` something, directly or
    through the CTEs and derived tables built on it, and every name such a column goes by, to a fixed
    point: `WITH c AS (SELECT INFO AS x ...) SELECT x FROM c` carries INFO as `x`."""
    derived: set[str] = set()

    def reads(node: exp.Expr) -> bool:
        return any(
            isinstance(column, exp.Column)
            and (carries(column.name.lower()) or column.name.lower() in derived)
            for column in node.walk()
        )

    selects = list(root.find_all(exp.Select))
    changed = True
    while changed:
        changed = False
        for select in selects:
            for projection in select.expressions:
                name = projection.alias_or_name.lower()
                if name and name not in derived and reads(projection):
                    derived.add(name)
                    changed = True
    positions = {
        index
        for select in _outer_selects(root)
        for index, projection in enumerate(select.expressions)
        if reads(projection)
    }
    return tuple(sorted(positions)), frozenset(derived)


def _generate(root: exp.Expr) -> str:
    try:
        return root.sql(dialect="mysql", identify=True)
    except Exception as exc:  # fail closed on generator failures
        raise SqlPolicyError(PolicyReason.PARSE_ERROR, "generator") from exc


def _parse_query(sql: str) -> exp.Query:
    try:
        statements = sqlglot.parse(sql, read="mysql")
    except Exception as exc:  # ParseError, TokenError, RecursionError on deep nesting: all rejections
        raise SqlPolicyError(PolicyReason.PARSE_ERROR) from exc
    parsed = [statement for statement in statements if statement is not None]
    if len(parsed) != 1:
        raise SqlPolicyError(PolicyReason.MULTI_STATEMENT if parsed else PolicyReason.PARSE_ERROR)
    root = parsed[0]
    while isinstance(root, exp.Subquery) and set(_set_args(root)) == {"this"}:
        root = root.this  # `(SELECT ...)`: the parentheses carry no meaning at the top
    if isinstance(root, _WRITE_NODES):
        raise SqlPolicyError(PolicyReason.WRITE_STATEMENT, type(root).__name__)
    if not isinstance(root, (exp.Select, exp.SetOperation)):
        raise SqlPolicyError(PolicyReason.UNSUPPORTED_STATEMENT, type(root).__name__)
    _require_select_branches(root)
    if root.parent is not None:
        root.pop()  # detach from the unwrapped parentheses: scoping and generation start here
    return root


def _require_select_branches(node: exp.Expr) -> None:
    """Every branch of a UNION/INTERSECT/EXCEPT is a SELECT: `(1)` or `TABLE t` would be rewritten by
    sqlglot into something the model never wrote."""
    if isinstance(node, exp.SetOperation):
        _require_select_branches(node.this)
        _require_select_branches(node.expression)
    elif isinstance(node, exp.Subquery):
        _require_select_branches(node.this)
    elif not isinstance(node, exp.Select):
        raise SqlPolicyError(PolicyReason.UNSUPPORTED_STATEMENT, "set operation branch")


def _set_args(node: exp.Expr) -> list[str]:
    return [key for key, value in node.args.items() if value not in (None, False, [])]


def _check_tree(root: exp.Expr, policy: _Policy) -> tuple[tuple[str, ...], tuple[DiagnosticView, ...]]:
    """Apply every rule to every node, rule by rule, so the reported reason does not depend on
    where in the statement the first violation happens to sit."""
    nodes = list(root.walk())
    _refuse_forbidden_nodes(nodes)
    _refuse_unlisted_nodes(nodes)
    schemas, views = _tables_read(nodes, policy)
    # Last, so a statement that breaks another rule too keeps that rule's reason (`mysql.user` reads are
    # SYSTEM_SCHEMA whatever they select).
    if (secret := secret_read(root)) is not None:
        raise SqlPolicyError(PolicyReason.SECRET_COLUMN, secret)
    read = tuple(views[name] for name in sorted(views))
    if (problem := _statement_text_problem(root, read)) is not None:
        raise SqlPolicyError(PolicyReason.STATEMENT_TEXT, problem)
    return tuple(sorted(schemas)), read


def _refuse_forbidden_nodes(nodes: list[exp.Expr]) -> None:
    """Writes, commands, INTO, locking reads, variables and comments, in that order of reasons."""
    for node in nodes:
        if isinstance(node, _WRITE_NODES):
            raise SqlPolicyError(PolicyReason.WRITE_STATEMENT, type(node).__name__)
    for node in nodes:
        if isinstance(node, exp.Command):
            raise SqlPolicyError(PolicyReason.UNSUPPORTED_STATEMENT, "command")
    for node in nodes:
        if isinstance(node, exp.Into):
            raise SqlPolicyError(PolicyReason.INTO_CLAUSE)
    for node in nodes:
        if isinstance(node, exp.Lock):
            raise SqlPolicyError(PolicyReason.LOCKING_READ)
    for node in nodes:
        if isinstance(node, _VARIABLE_NODES):
            raise SqlPolicyError(PolicyReason.VARIABLE)
    for node in nodes:
        if isinstance(node, exp.Hint) or node.comments:
            raise SqlPolicyError(PolicyReason.COMMENT)


def _refuse_unlisted_nodes(nodes: list[exp.Expr]) -> None:
    """Functions off the allow-list, then any other node kind the guard does not know, then the cost
    rules (`_check_cost`)."""
    others = [node for node in nodes if type(node) not in _ALLOWED_NODES]  # And/Or/Xor are Funcs too
    for node in others:
        if isinstance(node, exp.Func) and _function_name(node) not in ALLOWED_FUNCTIONS:
            raise SqlPolicyError(
                PolicyReason.FUNCTION_NOT_ALLOWED, _function_name(node) or type(node).__name__
            )
    for node in others:
        if not isinstance(node, exp.Func):
            raise SqlPolicyError(PolicyReason.UNSUPPORTED_STATEMENT, type(node).__name__)
    for node in nodes:
        _check_cost(node)


def _tables_read(nodes: list[exp.Expr], policy: _Policy) -> tuple[set[str], dict[str, DiagnosticView]]:
    """The schemas the statement reads and the diagnostic views among its tables (by qualified name);
    refuses catalog-qualified names and table references that are not plain names."""
    schemas: set[str] = set()
    views: dict[str, DiagnosticView] = {}
    for node in nodes:
        if isinstance(node, (exp.Table, exp.Column)) and node.args.get("catalog") is not None:
            raise SqlPolicyError(PolicyReason.UNSUPPORTED_STATEMENT, "catalog-qualified name")
        if isinstance(node, exp.Column) and node.db:
            policy.view(
                node.db, node.table
            )  # `mysql.user.x` names a system table even where it cannot resolve
        if isinstance(node, exp.Table) and not _is_cte_reference(node):
            if not isinstance(node.this, exp.Identifier):
                raise SqlPolicyError(PolicyReason.UNSUPPORTED_STATEMENT, "table reference")
            schema = node.db or policy.database
            view = policy.view(schema, node.name)
            if view is not None:
                views[view.qualified] = view
                schemas.add(view.schema)
            else:
                schemas.add(policy.schema(schema).lower())
    return schemas, views


def _statement_text_problem(root: exp.Expr, views: Sequence[DiagnosticView]) -> str | None:
    """Why the statement could spell out another session's SQL or a server message by comparison, or None.

    Such a column (`tools.mysql.diagnostic_surface`) may be a result column, shown as a digest or
    masked, and may be tested with IS [NOT] NULL; anywhere else (WHERE, ORDER BY, a function, a join,
    IN (SELECT ...), a set operation, a column list renaming it) a statement could compare it with
    guesses and read it a bit at a time.
    """
    if not views:
        return None
    seeds = (STATEMENT_TEXT_COLUMNS - SERVER_DIGEST_COLUMNS) | MESSAGE_COLUMNS
    _, names = _derived_columns(root, lambda name: name in seeds)
    names |= seeds
    for node in root.walk():
        if isinstance(node, (exp.Table, exp.CTE, exp.Subquery)) and renames_columns(node):
            return "a column list renames columns"
        if isinstance(node, exp.Join) and any(
            name.name.lower() in names for name in node.args.get("using") or ()
        ):
            return "USING over statement text"
        if isinstance(node, exp.Column) and node.name.lower() in names and not _shown_or_null_tested(node):
            return f"{node.name} used beyond showing it"
        if (
            isinstance(node, exp.Select)
            and has_positional_reference(node)
            and any(column.name.lower() in names for column in node.find_all(exp.Column))
        ):
            return "ORDER BY or GROUP BY a position beside statement text"
    return None


def _shown_or_null_tested(column: exp.Column) -> bool:
    parent = column.parent
    if isinstance(parent, exp.Is) and parent.this is column and isinstance(parent.expression, exp.Null):
        return True
    shown: exp.Expr = column
    if isinstance(parent, exp.Alias) and parent.this is column:
        shown, parent = parent, parent.parent
    if not (isinstance(parent, exp.Select) and shown.arg_key == "expressions"):
        return False
    holder = parent.parent  # the statement itself, a CTE, or a derived table: places a name is read from
    return (
        holder is None
        or isinstance(holder, exp.CTE)
        or (isinstance(holder, exp.Subquery) and isinstance(holder.parent, (exp.From, exp.Join)))
    )


def _check_cost(node: exp.Expr) -> None:
    """The argument shapes under which an allowed function keeps its `FUNCTION_COSTS` bound."""
    if isinstance(node, exp.Cast):
        target = node.to
        if not isinstance(target, exp.DataType) or target.this not in _CAST_TARGETS:
            raise SqlPolicyError(PolicyReason.COSTLY_EXPRESSION, "CAST target")
        if target.this in _LENGTHLESS_CAST_TARGETS and target.expressions:
            raise SqlPolicyError(PolicyReason.COSTLY_EXPRESSION, "CAST to a padded length")
    elif isinstance(node, exp.GroupConcat):
        separator = node.args.get("separator")
        if separator is not None and not (
            isinstance(separator, exp.Literal) and separator.is_string and len(separator.this.encode()) <= 4
        ):
            raise SqlPolicyError(PolicyReason.COSTLY_EXPRESSION, "GROUP_CONCAT separator longer than 4 bytes")
    elif isinstance(node, exp.JSONExtract):
        path = node.expression
        if node.expressions or not isinstance(path, exp.JSONPath):
            raise SqlPolicyError(PolicyReason.COSTLY_EXPRESSION, "JSON_EXTRACT takes one literal path")
        if any(isinstance(part, exp.JSONPathWildcard) for part in path.walk()):
            raise SqlPolicyError(PolicyReason.COSTLY_EXPRESSION, "JSON path wildcard")
    elif isinstance(node, exp.SubstringIndex):
        delimiter = node.args.get("delimiter")
        if not (isinstance(delimiter, exp.Literal) and delimiter.is_string):
            raise SqlPolicyError(
                PolicyReason.COSTLY_EXPRESSION, "SUBSTRING_INDEX delimiter must be a literal"
            )
        if len(delimiter.this.encode()) > MAX_LIKE_PATTERN_BYTES:
            raise SqlPolicyError(PolicyReason.COSTLY_EXPRESSION, "SUBSTRING_INDEX delimiter too long")
    elif isinstance(node, exp.Like):
        pattern = node.expression
        if not (isinstance(pattern, exp.Literal) and pattern.is_string):
            raise SqlPolicyError(PolicyReason.COSTLY_EXPRESSION, "LIKE pattern must be a string literal")
        if len(pattern.this.encode()) > MAX_LIKE_PATTERN_BYTES:
            raise SqlPolicyError(
                PolicyReason.COSTLY_EXPRESSION, f"LIKE pattern over {MAX_LIKE_PATTERN_BYTES} bytes"
            )


def _cap_built_strings(root: exp.Query) -> None:
    """CONCAT inside a query becomes LEFT(CONCAT(...), BUILT_STRING_BYTES): a chain of CTEs, each
    concatenating the previous value with itself, would otherwise double it at every step. A CONCAT
    that is itself a value the query returns is left alone: its size is capped on the way to us."""
    returned = {id(projection) for select in _outer_selects(root) for projection in select.expressions}
    returned |= {id(alias.this) for select in _outer_selects(root) for alias in select.expressions
                 if isinstance(alias, exp.Alias)}  # fmt: skip
    for concat in list(root.find_all(exp.Concat)):
        if id(concat) not in returned:
            concat.replace(exp.Left(this=concat.copy(), expression=exp.Literal.number(BUILT_STRING_BYTES)))


def _outer_selects(root: exp.Expr) -> list[exp.Select]:
    """The SELECTs whose projections are the statement's result columns (every branch of a set operation)."""
    if isinstance(root, exp.SetOperation):
        return [*_outer_selects(root.this), *_outer_selects(root.expression)]
    if isinstance(root, exp.Subquery):
        return _outer_selects(root.this)
    return [root] if isinstance(root, exp.Select) else []


def _function_name(node: exp.Func) -> str | None:
    """The MySQL function a node stands for, or None when it is not one we can name safely.

    A backtick-quoted name (`` `SLEEP`(1) ``) resolves to stored functions and UDFs, so it names nothing.
    """
    if isinstance(node, exp.Anonymous):
        name = node.this
        if isinstance(name, exp.Identifier) and name.quoted:
            return None
        return str(node.name).upper()
    return _TYPED_FUNCTIONS.get(type(node))


def _is_cte_reference(table: exp.Table) -> bool:
    """Whether an unqualified name refers to a CTE in scope, with MySQL's visibility: a CTE sees the
    ones defined before it (and itself when RECURSIVE), the query body sees all of them. Names are
    compared case-sensitively: when unsure, the name is treated as a table, qualified and checked."""
    if table.args.get("db") is not None or table.args.get("catalog") is not None:
        return False
    if not isinstance(table.this, exp.Identifier):
        return False
    name = table.name
    child: exp.Expr = table
    node = table.parent
    while node is not None:
        if isinstance(node, exp.With):
            ctes = node.expressions
            position = next(index for index, cte in enumerate(ctes) if cte is child)
            visible = ctes[: position + 1] if node.args.get("recursive") else ctes[:position]
            if any(cte.alias == name for cte in visible):
                return True
        else:
            with_ = node.args.get("with_")
            if (
                isinstance(with_, exp.With)
                and with_ is not child
                and any(cte.alias == name for cte in with_.expressions)
            ):
                return True
        child, node = node, node.parent
    return False


def _drop_from_dual(root: exp.Expr) -> None:
    """`FROM DUAL` means no table, but sqlglot regenerates it as the quoted table `` `DUAL` ``."""
    for select in list(root.find_all(exp.Select)):
        source = select.args.get("from_")
        table = source.this if isinstance(source, exp.From) else None
        if (
            isinstance(table, exp.Table)
            and isinstance(table.this, exp.Identifier)
            and not table.this.quoted
            and table.name.upper() == "DUAL"
            and set(_set_args(table)) == {"this"}
            and not select.args.get("joins")
        ):
            select.set("from_", None)


def _qualify_tables(root: exp.Expr, policy: _Policy) -> None:
    """Name every table's schema explicitly, in its configured spelling, so the executed statement
    does not depend on the connection's default database."""
    for table in list(root.find_all(exp.Table)):
        if _is_cte_reference(table):
            continue
        view = policy.view(table.db or policy.database, table.name)
        if view is None:
            table.set("db", exp.to_identifier(policy.schema(table.db or policy.database)))
        elif view.variables and not _is_variables_view(table, view):
            table.replace(
                exp.Subquery(
                    this=_variables_view(view),
                    alias=exp.TableAlias(this=exp.to_identifier(table.alias_or_name)),
                )
            )
        else:
            _name_view(table, view)
    for column in list(root.find_all(exp.Column)):
        if column.db:
            view = policy.view(column.db, column.table)
            column.set("db", exp.to_identifier(view.schema if view else policy.schema(column.db)))


def _name_view(table: exp.Table, view: DiagnosticView) -> None:
    """The view in the server's own spelling; a name spelled otherwise stays as the alias, so columns
    qualified with it (`DATA_LOCKS.LOCK_TYPE`) still resolve where table names are case-sensitive."""
    written = table.name
    table.set("db", exp.to_identifier(view.schema))
    table.set("this", exp.to_identifier(view.name))
    if written != view.name and not table.alias:
        table.set("alias", exp.TableAlias(this=exp.to_identifier(written)))


def _variables_view(view: DiagnosticView) -> exp.Expr:
    """A variables view as a derived table in which a secret-looking variable's value is already hidden,
    so no clause of the statement can compare it (`WHERE VARIABLE_VALUE LIKE 'a%'`)."""
    *others, value = view.variables
    name = others[-1]
    secret = " OR ".join(f"LOWER(`{name}`) LIKE '{pattern}'" for pattern in SECRET_VARIABLE_PATTERNS)
    kept = ", ".join(f"`{column}`" for column in others)
    source = f"`{view.schema}`.`{view.name}`"
    sql = f"SELECT {kept}, IF({secret}, '{REDACTED}', `{value}`) AS `{value}` FROM {source}"  # noqa: S608 - the diagnostic surface's fixed names
    return sqlglot.parse_one(sql, read="mysql")


def _is_variables_view(table: exp.Table, view: DiagnosticView) -> bool:
    """Whether the table is already read through `_variables_view` (the guard's own output, guarded again)."""
    select = table.find_ancestor(exp.Select)
    return select is not None and _generate(select) == _generate(_variables_view(view))


def _clamp_limit(root: exp.Expr, row_limit: int) -> None:
    """One row more than the caller may see, so the adapter can tell the result was truncated."""
    limit = root.args.get("limit")
    if limit is None:
        root.set("limit", exp.Limit(expression=exp.Literal.number(row_limit)))
        return
    plain = isinstance(limit, exp.Limit) and set(_set_args(limit)) == {"expression"}
    value = _integer(limit.expression) if plain else None
    offset = root.args.get("offset")
    if value is None or (offset is not None and _integer(offset.expression) is None):
        raise SqlPolicyError(PolicyReason.UNSUPPORTED_STATEMENT, "LIMIT/OFFSET must be integer literals")
    if value > row_limit:
        limit.set("expression", exp.Literal.number(row_limit))


def _integer(node: exp.Expr | None) -> int | None:
    if isinstance(node, exp.Literal) and not node.is_string and node.this.isdigit() and node.this.isascii():
        return int(node.this)
    return None


def _verify_generated(text: str, policy: _Policy, schemas: tuple[str, ...]) -> None:
    """The regenerated text is what runs: it must pass the same rules again and keep the clamp.

    Guards against generator quirks (sqlglot renders `SELECT a INTO @v FROM t` as `CREATE TABLE @v AS ...`).
    """
    if _has_comment(text, backslash_escapes=True) or _has_comment(text, backslash_escapes=False):
        raise SqlPolicyError(PolicyReason.COMMENT, "in generated text")
    root = _parse_query(text)
    if _check_tree(root, policy)[0] != schemas:
        raise SqlPolicyError(PolicyReason.UNSUPPORTED_STATEMENT, "generated text touches other schemas")
    limit = root.args.get("limit")
    value = _integer(limit.expression) if isinstance(limit, exp.Limit) else None
    if value is None or value > policy.row_limit:
        raise SqlPolicyError(PolicyReason.UNSUPPORTED_STATEMENT, "generated text lost the row limit")


# --- SHOW and DESCRIBE: rebuilt from a strict grammar, never from sqlglot -----------------------


def _guard_show(sql: str, policy: _Policy) -> GuardedStatement:
    text = sql.strip()
    if match := _SHOW_TABLES.match(text):
        schema = policy.schema(_unquote(match["db"]) if match["db"] else policy.database)
        full = "FULL " if match["full"] else ""
        rebuilt = f"SHOW {full}TABLES FROM {_quote(schema)}{_like(match['like'])}"
        return GuardedStatement("SHOW", rebuilt, (schema.lower(),), None)
    if match := _SHOW_COLUMNS.match(text):
        schema, table = _table_name(match, policy)
        full = "FULL " if match["full"] else ""
        rebuilt = f"SHOW {full}COLUMNS FROM {_quote(schema)}.{_quote(table)}{_like(match['like'])}"
        return GuardedStatement("SHOW", rebuilt, (schema.lower(),), None)
    if match := _SHOW_INDEX.match(text):
        schema, table = _table_name(match, policy)
        rebuilt = f"SHOW INDEX FROM {_quote(schema)}.{_quote(table)}"
        return GuardedStatement("SHOW", rebuilt, (schema.lower(),), None)
    if match := _SHOW_CREATE_TABLE.match(text):
        schema, table = _table_name(match, policy)
        rebuilt = f"SHOW CREATE TABLE {_quote(schema)}.{_quote(table)}"
        return GuardedStatement("SHOW", rebuilt, (schema.lower(),), None)
    if (diagnostic := _guard_diagnostic_show(text, policy)) is not None:
        return diagnostic
    raise SqlPolicyError(PolicyReason.UNSUPPORTED_STATEMENT, "not a SHOW statement of the grammar")


def _guard_diagnostic_show(text: str, policy: _Policy) -> GuardedStatement | None:
    """Server state. SHOW [FULL] PROCESSLIST runs as the same columns of information_schema.PROCESSLIST,
    so its Info crosses the wire capped like any SELECT's values (SHOW would fetch every statement
    whole, megabytes each) and in full otherwise: it is shown only as a digest, and the short form's
    100-character cut would leave most statements cut inside a literal (withheld)."""
    if _SHOW_PROCESSLIST.match(text):
        return _guard_query(_PROCESSLIST_AS_SELECT, policy)
    if match := _SHOW_STATUS.match(text):
        scope = (
            {"LOCAL": "SESSION"}.get(match["scope"].upper(), match["scope"].upper()) if match["scope"] else ""
        )
        what = match["what"].upper()
        rebuilt = f"SHOW {scope + ' ' if scope else ''}{what}{_like(match['like'])}"
        return GuardedStatement("SHOW", rebuilt, (), None, variable_rows=what == "VARIABLES")
    if _SHOW_INNODB_STATUS.match(text):
        return GuardedStatement("SHOW", "SHOW ENGINE INNODB STATUS", (), None, innodb_status=True)
    if _SHOW_INNODB_MUTEX.match(text):
        return GuardedStatement("SHOW", "SHOW ENGINE INNODB MUTEX", (), None)
    if _SHOW_REPLICA_STATUS.match(text):
        return GuardedStatement("SHOW", REPLICA_STATUS, (), None, message_names=_REPLICA_MESSAGES)
    if _SHOW_ALL_REPLICAS_STATUS.match(text):  # MariaDB's multi-source replication: every connection
        return GuardedStatement(
            "SHOW", "SHOW ALL SLAVES STATUS", (), None, message_names=_REPLICA_MESSAGES,
            servers=MARIADB_ONLY, equivalent=REPLICA_STATUS,
        )  # fmt: skip
    if _SHOW_BINLOG_STATUS.match(text):
        return GuardedStatement("SHOW", BINARY_LOG_STATUS, (), None)
    if _SHOW_BINARY_LOGS.match(text):
        return GuardedStatement("SHOW", "SHOW BINARY LOGS", (), None)
    if match := _SHOW_OPEN_TABLES.match(text):
        schemas: tuple[str, ...] = ()
        rebuilt = "SHOW OPEN TABLES"
        if match["db"]:  # without FROM: the open tables of every schema the account may see
            schema = policy.schema(_unquote(match["db"]))
            schemas, rebuilt = (schema.lower(),), f"{rebuilt} FROM {_quote(schema)}"
        if match["column"]:
            column = "In_use" if match["column"].lower() == "in_use" else "Name_locked"
            rebuilt += f" WHERE {column} {match['op']} {int(match['number'])}"
        return GuardedStatement("SHOW", rebuilt + _like(match["like"]), schemas, None)
    if match := _SHOW_TABLE_STATUS.match(text):
        schema = policy.schema(_unquote(match["db"]) if match["db"] else policy.database)
        rebuilt = f"SHOW TABLE STATUS FROM {_quote(schema)}{_like(match['like'])}"
        return GuardedStatement("SHOW", rebuilt, (schema.lower(),), None)
    return None


_PROCESSLIST_AS_SELECT = (
    "SELECT ID AS Id, USER AS User, HOST AS Host, DB AS db, COMMAND AS Command, TIME AS Time, "
    "STATE AS State, INFO AS Info FROM information_schema.PROCESSLIST ORDER BY ID"
)
REPLICA_STATUS = "SHOW REPLICA STATUS"
BINARY_LOG_STATUS = "SHOW BINARY LOG STATUS"


def spelled_for(sql: str, server_version: str) -> str:
    """A rebuilt statement in the spelling the connected server accepts: the model may write either
    name, and MySQL 8.4 dropped SHOW SLAVE STATUS and SHOW MASTER STATUS, which MariaDB still needs."""
    mariadb = "mariadb" in server_version.lower()
    if sql == REPLICA_STATUS and mariadb:
        return "SHOW SLAVE STATUS"
    if sql == BINARY_LOG_STATUS and (mariadb or _version(server_version) < (8, 2)):
        return "SHOW MASTER STATUS"
    return sql


def _version(server_version: str) -> tuple[int, ...]:
    match = re.match(r"(\d+)\.(\d+)", server_version)
    return (int(match[1]), int(match[2])) if match else (0, 0)


def _guard_describe(sql: str, policy: _Policy) -> GuardedStatement:
    match = _DESCRIBE_TABLE.match(sql.strip())
    if match is None:
        words = sql.split()
        target = words[1].upper() if len(words) > 1 else ""
        if target in _WRITE_KEYWORDS:
            raise SqlPolicyError(PolicyReason.WRITE_STATEMENT, f"EXPLAIN {target}")
        raise SqlPolicyError(
            PolicyReason.UNSUPPORTED_STATEMENT, "EXPLAIN/DESCRIBE of a table or a SELECT only"
        )
    schema, table = _table_name(match, policy)
    return GuardedStatement("DESCRIBE", f"DESCRIBE {_quote(schema)}.{_quote(table)}", (schema.lower(),), None)


def _table_name(match: re.Match[str], policy: _Policy) -> tuple[str, str]:
    """(schema, table) from `t`, `db.t` or `t FROM db`; naming the schema twice is ambiguous."""
    first, second = _unquote(match["first"]), match["second"]
    groups = match.groupdict()
    db = _unquote(groups["db"]) if groups.get("db") else None
    if second is not None:
        if db is not None:
            raise SqlPolicyError(PolicyReason.UNSUPPORTED_STATEMENT, "schema named twice")
        return policy.schema(first), _unquote(second)
    return policy.schema(db or policy.database), first


def _unquote(identifier: str) -> str:
    if identifier.startswith("`"):
        return identifier[1:-1].replace("``", "`")
    return identifier


def _quote(identifier: str) -> str:
    return "`" + identifier.replace("`", "``") + "`"


def _like(pattern: str | None) -> str:
    return "" if pattern is None else f" LIKE '{pattern}'"
