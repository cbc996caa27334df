"""The short excerpt a search shows of each runbook: where the query's terms are."""

from __future__ import annotations

from collections.abc import Set

from tools.knowledge.terms import normalize
from tools.redaction import NOOP, Redactor


def snippet(passages: tuple[str, ...], query_terms: Set[str], limit: int, redactor: Redactor = NOOP) -> str:
    """From the passage sharing the most query terms (first wins a tie), else from the body's start.

    Following passages fill the remaining room, so a short lead-in line still shows what comes next.
    """
    start, best_score = 0, (0, 0)
    for position, passage in enumerate(passages):
        # A term is a stem or a CJK bigram, so it occurs inside the words it came from ("restart" in
        # "restarting"): substring counts rank passages at the cost of a scan, not of tokenizing.
        lowered = normalize(passage)
        counts = [lowered.count(term) for term in query_terms]
        score = (sum(1 for count in counts if count), sum(counts))
        if score > best_score:
            start, best_score = position, score
    text = ""
    for passage in passages[start:]:
        text = f"{text} {passage}" if text else passage
        if len(text) > 2 * limit:
            break
    # Redacted whole before either end is cut: a credential across a cut keeps its context.
    text = redactor.text(text) if len(text) > limit else text
    return _cut(_around_first_match(text, query_terms, limit), limit)


def _around_first_match(passage: str, query_terms: Set[str], limit: int) -> str:
    """Start the snippet shortly before the first match when the match lies past the cut."""
    lowered = normalize(passage)
    if len(lowered) != len(passage):
        return passage  # NFKC changed the length: positions would not line up, keep the start
    positions = [lowered.find(term) for term in query_terms if term in lowered]
    first = min(positions, default=0)
    if first < limit * 2 // 3:
        return passage
    return "…" + passage[max(0, first - limit // 4) :]


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[: max(0, limit - 1)] + "…"
