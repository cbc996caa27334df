"""SHOW ENGINE INNODB STATUS as lines an investigation can read, without other sessions' data.

The server answers one text of a few hundred lines. Most of it is InnoDB's own counters, but three
sections quote other sessions: TRANSACTIONS and LATEST DETECTED DEADLOCK print each transaction's SQL as
it was sent (literals included) and dump locked records field by field (`3: len 6; hex 686f6c646572;
asc holder;;` is a row's value), and LATEST FOREIGN KEY ERROR does both for the failing row.

So the text becomes rows of (section, line). In those three sections a line is shown as it is only when
it has one of InnoDB's own shapes (`_INNODB_LINES`); record field dumps are withheld; every other run of
lines is a statement and is shown as its digest. A statement's text can itself hold a line that looks
like InnoDB's, splitting it in two: the part before then ends inside a string, cannot be digested, and
that withholds every statement of the section, so a split never shows a literal's words. A section
heading that occurs twice can only come from such text, and then everything from the first quoting
section on is withheld.
"""

from __future__ import annotations

import re

from tools.mysql.statement_digest import WITHHELD, digest

COLUMNS = ["section", "line"]
_QUOTING_SECTIONS = frozenset({"TRANSACTIONS", "LATEST DETECTED DEADLOCK", "LATEST FOREIGN KEY ERROR"})
_RULE = re.compile(r"[-=]{3,}")
_HEADING = re.compile(r"[A-Z][A-Z /&()-]*[A-Z)]")
_RECORD_FIELD = re.compile(r" *\d+: (?:len \d+;|SQL NULL)")
_FIELDS_WITHHELD = "[record fields withheld]"
_STATUS_WITHHELD = "[the rest of the status is withheld: its text could not be read safely]"
_INNODB_LINES = re.compile(
    "|".join(
        (
            r"Trx id counter \d+",
            r"Purge done for trx's n:o < \d+ undo n:o < \d+ state: [a-z ]+",
            r"History list length \d+",
            r"LIST OF TRANSACTIONS FOR EACH SESSION:",
            r"(?:---)?TRANSACTION \d+, (?:ACTIVE(?: \(PREPARED\))? \d+ sec|not started)[a-z ,]*",
            r"\*\*\* (?:\(\d+\) )?(?:TRANSACTION|HOLDS THE LOCK\(S\)|WAITING FOR THIS LOCK TO BE GRANTED"
            r"|CONFLICTING WITH):",
            r"\*\*\* WE ROLL BACK TRANSACTION \(\d+\)",
            r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?: 0x[0-9a-f]+)?",
            r"mysql tables in use \d+, locked \d+",
            r"(?:LOCK WAIT )?\d+ lock struct\(s\), heap size \d+, \d+ row lock\(s\)"
            r"(?:, undo log entries \d+)?",
            r"(?:MariaDB|MySQL) thread id \d+, OS thread handle \d+, query id \d+[ \w.:@-]*",
            r"------- TRX HAS BEEN WAITING \d+ (?:us|SEC) FOR THIS LOCK TO BE GRANTED:",
            r"RECORD LOCKS space id \d+ page no \d+ n bits \d+ index [`\w.$]+ of table [`\w.$/]+"
            r" trx id \d+ lock[_ ]mode [\w ]+",
            r"TABLE LOCK table [`\w.$/]+ trx id \d+ lock mode [\w -]+",
            r"Record lock, heap no \d+ PHYSICAL RECORD: n_fields \d+; [\w ]+; info bits \d+",
            r"Trx read view will not see trx with id >= \d+, sees < \d+",
            r"Trx #rec lock waits \d+ #table lock waits \d+",
            r"Trx total (?:rec|table) lock wait time \d+ SEC",
        )
    ),
    re.ASCII,
)


def status_lines(status: str) -> list[list[str]]:
    """Rows of (section, line) for the status text, other sessions' SQL digested (module docstring)."""
    lines = status.splitlines()
    starts = _heading_starts(lines)
    headings = [lines[index + 1] for index in starts]
    tampered = len(headings) != len(set(headings))
    rows: list[list[str]] = []
    section, body = "", []
    index = 0
    while index < len(lines):
        if index not in starts:
            body.append(lines[index])
            index += 1
            continue
        rows.extend(_section_rows(section, body))
        section, body = lines[index + 1], []
        if tampered and section in _QUOTING_SECTIONS:
            return [*rows, [section, _STATUS_WITHHELD]]
        index += 3
    rows.extend(_section_rows(section, body))
    return rows


def _heading_starts(lines: list[str]) -> frozenset[int]:
    """Where a heading (a rule, a name in capitals, a rule) begins."""
    return frozenset(
        index
        for index in range(len(lines) - 2)
        if _RULE.fullmatch(lines[index])
        and _HEADING.fullmatch(lines[index + 1])
        and _RULE.fullmatch(lines[index + 2])
    )


def _section_rows(section: str, lines: list[str]) -> list[list[str]]:
    if section not in _QUOTING_SECTIONS:
        return [[section, line] for line in lines if line.strip() and not _RULE.fullmatch(line)]
    shown: list[tuple[bool, str | None]] = []  # (is a statement, what to show; None: cannot be digested)
    statement: list[str] = []

    def end_statement() -> None:
        if any(part.strip() for part in statement):
            shown.append((True, digest("\n".join(statement))))
        statement.clear()

    for line in lines:
        if _RECORD_FIELD.match(line):
            end_statement()
            if not shown or shown[-1] != (False, _FIELDS_WITHHELD):
                shown.append((False, _FIELDS_WITHHELD))
        elif _RULE.fullmatch(line) or _INNODB_LINES.fullmatch(line):
            end_statement()
            if not _RULE.fullmatch(line):
                shown.append((False, line))
        else:
            statement.append(line)
    end_statement()
    failed = any(text is None for _, text in shown)
    return [
        [section, WITHHELD if text is None or (failed and is_statement) else text]
        for is_statement, text in shown
    ]
