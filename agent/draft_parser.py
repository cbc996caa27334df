"""Strict DiagnosisDraft parsing: the whole text is the JSON object, or the run fails.
(docs/architecture.md, "DiagnosisDraft")

There is no repair and no loose extraction: a fenced, prefixed, blank, malformed, oversized or
schema-incompatible answer is discarded, because a "fixed" answer is an answer the model never gave.

Violation codes (stable, safe to show anyone): EMPTY_OUTPUT, INVALID_ENCODING, DRAFT_TOO_LARGE,
NOT_A_JSON_OBJECT, MALFORMED_JSON, DUPLICATE_KEY, SCHEMA_MISMATCH (including a blank `statement` or
`scope`), UNKNOWN_CITATION, CONCLUSION_WITHOUT_FOUND_EVIDENCE, FINDING_WITHOUT_FOUND_EVIDENCE,
NULL_CONCLUSION_WITHOUT_MISSING_INFO. Each comes with a detail that says where and why without the text.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from agent import draft_detail as why
from agent.budget import utf8_len
from agent.contracts import DiagnosisDraft
from tools.unicode_text import holds_unencodable, is_encodable
from tools.vocabulary import EvidenceStatus


class DraftRejected(Exception):
    """The final text is not an acceptable Draft. `violation` is a stable code and `detail` says where
    and why (agent/draft_detail.py); both are safe to show anyone, neither quotes the text."""

    def __init__(self, violation: str, detail: str, too_large: bool = False) -> None:
        super().__init__(violation)
        self.violation = violation
        self.detail = why.bounded(detail)
        self.too_large = too_large


def _reject_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            raise DraftRejected("DUPLICATE_KEY", why.duplicate_key(key))
        seen.add(key)
    return dict(pairs)


def parse_draft(
    text: str | None,
    max_bytes: int,
    status_of: Callable[[str], str | None],
) -> DiagnosisDraft:
    """Parse and verify a Draft against this run's canonical invocations.

    `status_of(tool_call_id)` returns the evidence status of a canonical invocation of this run, or
    None when the ID is not one.
    """
    if text is None:
        raise DraftRejected("EMPTY_OUTPUT", "the model's last round returned no text")
    if not text.strip():
        raise DraftRejected("EMPTY_OUTPUT", "the text is blank" if text else "the text is empty")
    if not is_encodable(text):
        raise DraftRejected("INVALID_ENCODING", "the text is not valid Unicode (it holds a lone surrogate)")
    size = utf8_len(text)
    if size > max_bytes:
        detail = f"the text is {size} UTF-8 bytes; the limit is {max_bytes}"
        raise DraftRejected("DRAFT_TOO_LARGE", detail, too_large=True)
    if not text.lstrip().startswith("{"):
        raise DraftRejected("NOT_A_JSON_OBJECT", why.not_an_object(text))
    try:
        raw = json.loads(text, object_pairs_hook=_reject_duplicate_keys)
    except json.JSONDecodeError as exc:
        raise DraftRejected("MALFORMED_JSON", why.malformed(text, exc)) from None
    except RecursionError:
        raise DraftRejected("MALFORMED_JSON", "the JSON is nested too deeply") from None
    if not isinstance(raw, dict):
        raise DraftRejected("NOT_A_JSON_OBJECT", "the JSON value is not an object")
    if holds_unencodable(raw):
        # A `\ud800` escape is valid JSON but decodes to a lone surrogate: no text to show or store.
        raise DraftRejected("INVALID_ENCODING", "a JSON string escape decodes to a lone surrogate")
    try:
        draft = DiagnosisDraft.model_validate(raw)
    except ValidationError as exc:
        raise DraftRejected("SCHEMA_MISMATCH", why.schema_mismatch(exc.errors())) from None

    _check_evidence(draft, status_of)
    return draft


def _ids(evidence: list[str] | str) -> list[str]:
    return evidence if isinstance(evidence, list) else []


def _check_evidence(draft: DiagnosisDraft, status_of: Callable[[str], str | None]) -> None:
    """The Draft may not claim more than this run's evidence shows.

    Every cited ID is a canonical invocation of this run; a conclusion needs a FINDING on FOUND
    evidence; every FINDING cites at least one FOUND invocation (an EMPTY, ERROR or unexecuted call
    found nothing, so it can back only a NEGATIVE_OBSERVATION); and a Draft without a conclusion says
    what is missing (`limitations.missing_info` has a non-blank entry).
    """
    for index, item in enumerate(draft.analysis):
        for cited in _ids(item.evidence):
            if status_of(cited) is None:
                raise DraftRejected("UNKNOWN_CITATION", why.unknown_citation(index, cited))
    findings = [(i, item) for i, item in enumerate(draft.analysis) if item.kind == "FINDING"]
    unbacked = [
        (i, _ids(item.evidence))
        for i, item in findings
        if not any(status_of(c) == EvidenceStatus.FOUND for c in _ids(item.evidence))
    ]
    if draft.conclusion is not None and not draft.conclusion.strip():
        raise DraftRejected("CONCLUSION_WITHOUT_FOUND_EVIDENCE", "the conclusion is blank")
    if draft.conclusion is not None and len(unbacked) == len(findings):
        detail = "a conclusion, but no FINDING cites a FOUND call"
        if unbacked:
            detail += f" ({why.cites_without_found(*unbacked[0], status_of)})"
        raise DraftRejected("CONCLUSION_WITHOUT_FOUND_EVIDENCE", detail)
    if unbacked:
        raise DraftRejected(
            "FINDING_WITHOUT_FOUND_EVIDENCE", why.cites_without_found(*unbacked[0], status_of)
        )
    if draft.conclusion is None and not any(entry.strip() for entry in draft.limitations.missing_info):
        state = "has only blank entries" if draft.limitations.missing_info else "is empty"
        raise DraftRejected(
            "NULL_CONCLUSION_WITHOUT_MISSING_INFO", f"no conclusion, and limitations.missing_info {state}"
        )
