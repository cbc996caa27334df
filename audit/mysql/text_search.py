"""The team audit's text search on MariaDB/MySQL: each row's character trigrams as ASCII words under
an ordinary InnoDB FULLTEXT index (docs/contracts.md, "Audit").

InnoDB's FULLTEXT parser splits text at non-word characters, so Chinese (no spaces) is one long token
and a substring is never found; MariaDB ships no CJK parser (ngram is MySQL's), and Mroonga is rarely
installed. So the words are built here: a row's text is lower-cased (as the server's LIKE folds it)
and every distinct 3-character sequence is written as the hex of its UTF-8 bytes, e.g. "连接池" ->
"E8BF9EE68EA5E6B1A0". Such a word is 6 to 24 hex digits: inside innodb_ft_min_token_size (3) and
max_token_size (84), never a stopword (the tables are created with the stopword list off anyway),
and a search term's FULLTEXT operator characters (+ - " * ( ) ~ < > @) become hex digits too, so they
are literal text. A term of 3+ characters matches a row only if the row holds all of the term's
trigrams (boolean mode, every word required): a superset of the true matches, which the exact LIKE
check on top narrows (audit.browse). A term of 2 characters is a prefix: every occurrence of it
starts a trigram, because each text is indexed with an end mark (U+0001) after it, so even the last
two characters are followed by one; UTF-8 is prefix-free, so a word starts with the term's hex
exactly when its first two characters are the term. (One character stays with the walk: its
prefix would expand to thousands of words.)

One side row per indexed row (`invocation_trigrams`, `run_trigrams`), written when the run leaves
`fts_pending` (its finish, `audit copy`) in the same transaction; until then the run's rows are
found by LIKE over pending runs only, as in the file. InnoDB makes FULLTEXT rows searchable when
their transaction commits, which is when the mark clears, so no row is ever out of both. Foreign
keys with ON DELETE CASCADE remove side rows with their rows, so pruning needs no extra step.
The trigrams are computed by the server (JSON_TABLE numbers the positions), so a write is one
INSERT ... SELECT that replays exactly after a lost connection.

Schema step 3 does not rewrite the words of invocations that already exist: doing so would hold every
opener behind the migration lock for about an hour at a million invocations.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from audit.common import MARK_INDEXED, PENDING_RUNS
from audit.port import SqlConnection

Execute = Callable[..., Any]

_TABLE_OPTIONS = "ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"
_ID = "VARCHAR(191)"
# Runs per committed batch when a migration indexes the runs an older version left unindexed.
BACKFILL_BATCH_RUNS = 200
# Room for every distinct trigram of a row: GROUP_CONCAT truncates silently at this length.
_GROUP_CONCAT_MAX = 1 << 30


def _words(text_sql: str) -> str:
    """SQL for the distinct trigram words of `text_sql` (already lower-cased), space-separated."""
    return (
        f"GROUP_CONCAT(DISTINCT HEX(SUBSTRING({text_sql}, p.pos, 3)) SEPARATOR ' ')"
        " FROM JSON_TABLE(CONCAT('[', REPEAT('0,', GREATEST(CHAR_LENGTH(s.body) - 3, 0)), '0]'),"
        " '$[*]' COLUMNS (pos FOR ORDINALITY)) AS p"
    )


# After every indexed text, so its last two characters start a trigram too (a 2-character term is
# a prefix search). A term holding U+0001 only gains candidates, which LIKE then drops.
_END_MARK = "CHAR(1 USING utf8mb4)"


def _index_invocations(runs_sql: str) -> str:
    """The side rows of the invocations of the runs `runs_sql` selects."""
    return (
        "INSERT INTO invocation_trigrams (run_id, tool_call_id, words)"
        " SELECT s.run_id, s.tool_call_id, (SELECT " + _words("s.body") + ")"
        " FROM (SELECT run_id, tool_call_id,"
        f" CONCAT(LOWER(CONCAT(COALESCE(input_json, ''), ' ', COALESCE(projection_json, ''))), {_END_MARK})"
        f" AS body FROM invocations WHERE run_id IN ({runs_sql})) AS s"
    )


def _index_runs(runs_sql: str) -> str:
    return (
        "INSERT INTO run_trigrams (run_id, words)"
        " SELECT s.run_id, (SELECT " + _words("s.body") + ")"
        f" FROM (SELECT run_id, CONCAT(LOWER(COALESCE(query, '')), {_END_MARK}) AS body"
        f" FROM runs WHERE run_id IN ({runs_sql})) AS s"
    )


# One run, only while it is still pending (never twice): SQLite's dialect, for `_Transaction.execute`.
_PENDING_RUN = "SELECT run_id FROM runs WHERE run_id = ? AND fts_pending IS NOT NULL"
INDEX_RUN = [
    f"SET SESSION group_concat_max_len = {_GROUP_CONCAT_MAX}",
    _index_invocations(_PENDING_RUN),
    _index_runs(_PENDING_RUN),
]
# Finished runs, walked in run_id order a batch at a time (`_each_batch`): keyset bounds, so a batch
# costs its own runs however many were done before it. The bounds live in session variables because
# a migration step sees only `execute` (whose value is a row count).
_BATCH = "SELECT run_id FROM runs WHERE fts_pending IS NULL AND run_id > @after AND run_id <= @upto"
# Those of the batch an older schema marked indexed (fts_pending NULL) but that have no side rows yet.
_UNINDEXED_BATCH = (
    f"SELECT run_id FROM ({_BATCH}) AS batch"
    " WHERE NOT EXISTS (SELECT 1 FROM run_trigrams t WHERE t.run_id = batch.run_id)"
)


def _each_batch(execute: Execute, runs: int, statements: list[str]) -> int:
    """Run `statements` over the finished runs, `runs` at a time, committing each batch (so a
    restart loses at most one); returns the rows the last statement wrote in all."""
    execute(f"SET SESSION group_concat_max_len = {_GROUP_CONCAT_MAX}")
    execute("SET @after = _utf8mb4'' COLLATE utf8mb4_bin")  # compared with run_id, in its collation
    total = 0
    while execute("SELECT 1 FROM runs WHERE fts_pending IS NULL AND run_id > @after LIMIT 1"):
        execute(
            "SET @upto = (SELECT MAX(run_id) FROM (SELECT run_id FROM runs WHERE fts_pending IS NULL"
            f" AND run_id > @after ORDER BY run_id LIMIT {runs}) AS batch)"
        )
        written = 0
        for statement in statements:
            written = int(execute(statement))
        total += written
        execute("SET @after = @upto")
        execute("COMMIT")
    return total


def trigram_tables(execute: Execute) -> None:
    """Migration step 2: the side tables, then the trigrams of every run already finished."""
    execute("SET SESSION innodb_ft_enable_stopword = OFF")  # read when each FULLTEXT index is built
    execute(
        f"""CREATE TABLE IF NOT EXISTS invocation_trigrams (
            run_id {_ID} NOT NULL,
            tool_call_id {_ID} NOT NULL,
            words LONGTEXT CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
            PRIMARY KEY (run_id, tool_call_id),
            FULLTEXT KEY ft_invocation_trigrams (words),
            FOREIGN KEY (run_id, tool_call_id) REFERENCES invocations (run_id, tool_call_id) ON DELETE CASCADE
        ) {_TABLE_OPTIONS}"""
    )
    execute(
        f"""CREATE TABLE IF NOT EXISTS run_trigrams (
            run_id {_ID} NOT NULL PRIMARY KEY,
            words LONGTEXT CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
            FULLTEXT KEY ft_run_trigrams (words),
            FOREIGN KEY (run_id) REFERENCES runs (run_id) ON DELETE CASCADE
        ) {_TABLE_OPTIONS}"""
    )
    backfill(execute)


# A run row's words are a query's: small, so step 3's batches are large.
_MARKED_BATCH_RUNS = 2000


def end_marked_words(execute: Execute) -> None:
    """Migration step 3: every finished run's query words again, with the end mark.

    Only the run rows: a query often ends in the term sought ("...支付超时"). An invocation's text is
    its input and projection JSON, which ends in `}`, so an invocation indexed before this step misses
    only a 2-character term ending in `}`, and such a term is left to the walk (`indexable`).
    Rewriting a million invocations' words would hold every opener behind the migration lock for
    hours; their 357,000 runs' words took under 10 minutes (docs/PERFORMANCE.md). Each batch replaces its
    words in one commit, so a run stays searchable throughout; interrupted, the step starts over.
    """
    # Delete, then insert, in the batch's transaction (readers see the old words or the new). Not an
    # upsert, and no OPTIMIZE after: on MariaDB 10.11 an upsert leaving a row's words unchanged, and
    # a rebuild of the table after this step, each made FULLTEXT lose documents in our tests. The
    # replaced documents stay in InnoDB's deleted list, which searches filter (~60 ms a query at a
    # million invocations, measured) until InnoDB merges them.
    _each_batch(
        execute,
        _MARKED_BATCH_RUNS,
        [f"DELETE FROM run_trigrams WHERE run_id IN ({_BATCH})", _index_runs(_BATCH)],
    )


def backfill(execute: Execute) -> int:
    """Index finished runs without side rows (a restart resumes); returns how many runs it indexed.
    Invocations first: the batch is the runs still lacking their run row."""
    statements = [_index_invocations(_UNINDEXED_BATCH), _index_runs(_UNINDEXED_BATCH)]
    return _each_batch(execute, BACKFILL_BATCH_RUNS, statements)


def indexable(term: str) -> bool:
    """Whether `match_all(term)` finds every row holding `term`: 3+ characters always; 2 unless the
    second is `}`, which can end an invocation's text indexed before the end mark (step 3)."""
    return len(term) >= 3 or (len(term) == 2 and term[1] != "}")


def _folded(term: str) -> str:
    return "".join(character.lower() for character in term)  # per character, as LOWER() folds


def term_words(term: str) -> list[str]:
    """The distinct trigram words of a search term of 3+ characters, as the server writes them."""
    folded = _folded(term)
    grams = {folded[i : i + 3] for i in range(len(folded) - 2)}
    return sorted(gram.encode().hex().upper() for gram in grams)


def match_all(term: str) -> str:
    """A boolean-mode query requiring every trigram word of `term`; for 2 characters, any word that
    starts with them (the trigrams they begin, the end mark included)."""
    if len(term) < 2:
        raise ValueError(f"a term of {len(term)} character has no index query")
    if len(term) == 2:
        return f"+{_folded(term).encode().hex().upper()}*"
    return " ".join(f"+{word}" for word in term_words(term))


# The keys of one term's candidate rows, every trigram word required (2 params), joined to the table.
# A derived table, not OR-ed IN clauses: the server can flatten neither an OR of subqueries nor a UNION
# inside IN, and would test every row. The rows of runs still pending are always candidates.
_INVOCATION_WORDS = (
    "SELECT run_id, tool_call_id FROM invocation_trigrams WHERE MATCH (words) AGAINST (? IN BOOLEAN MODE)"
)
_RUN_WORDS = "SELECT run_id FROM run_trigrams WHERE MATCH (words) AGAINST (? IN BOOLEAN MODE)"
_CANDIDATES = {
    "invocations": f"({_INVOCATION_WORDS} UNION SELECT run_id, tool_call_id FROM invocations WHERE run_id IN"
    f" ({_RUN_WORDS}) UNION SELECT run_id, tool_call_id FROM invocations WHERE run_id IN ({PENDING_RUNS}))"
    " AS candidates JOIN invocations USING (run_id, tool_call_id)",
    "runs": f"({_RUN_WORDS} UNION SELECT run_id FROM ({_INVOCATION_WORDS}) AS i UNION {PENDING_RUNS})"
    " AS candidates JOIN runs USING (run_id)",
}


class TrigramWordsSearch:
    """The server's trigram words under FULLTEXT: a search reads the candidates of its rarest term."""

    def index_runs(self, conn: SqlConnection, run_ids: Iterable[str]) -> None:
        for run_id in run_ids:
            for statement in INDEX_RUN:
                conn.execute(statement, (run_id,) * statement.count("?"))
            conn.execute(MARK_INDEXED, (run_id,))

    def indexed_terms(self, terms: Sequence[str]) -> list[str]:
        return [term for term in terms if indexable(term)]

    def term_clauses(self, table: str, terms: Sequence[str]) -> list[tuple[str, list[Any]]]:
        return []  # one term's candidates are the source instead (`candidates`)

    def candidates(
        self, table: str, terms: Sequence[str], rarest: Callable[[Sequence[str]], str]
    ) -> tuple[str, list[Any]] | None:
        """Reading a common term's candidates costs seconds where a rare one's cost milliseconds, so
        of several terms with different index queries the rarest is read."""
        term = terms[0] if len({match_all(term) for term in terms}) == 1 else rarest(terms)
        return _CANDIDATES[table], [match_all(term)] * 2
