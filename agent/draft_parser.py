"""Strict DiagnosisDraft parsing: the whole text is the JSON object, or the run fails.
(docs/architecture.md, "DiagnosisDraft")

There is no repair and no loose extraction: a fenced, prefixed, blank, malformed, oversized or
schema-incompatible answer is discarded, because a "fixed" answer is an answer the model never gave.

Violation codes (stable, safe to show anyone): EMPTY_OUTPUT, INVALID_ENCODING, DRAFT_TOO_LARGE,
NOT_A_JSON_OBJECT, MALFORMED_JSON, DUPLICATE_KEY, SCHEMA_MISMATCH (including a blank `statement` or
`scope`), UNKNOWN_CITATION, CONCLUSION_WITHOUT_FOUND_EVIDENCE, FINDING_WITHOUT_FOUND_EVIDENCE,
NULL_CONCLUSION_WITHOUT_MISSING_INFO.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from agent.budget import is_encodable, utf8_len
from agent.contracts import DiagnosisDraft
from tools.vocabulary import EvidenceStatus


class DraftRejected(Exception):
    """The final text is not an acceptable Draft. `violation` is a stable code, safe to show anyone."""

    def __init__(self, violation: str, too_large: bool = False) -> None:
        super().__init__(violation)
        self.violation = violation
        self.too_large = too_large


def _reject_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [k for k, _ in pairs]
    if len(keys) != len(set(keys)):
        raise DraftRejected("DUPLICATE_KEY")
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
    if text is None or not text.strip():
        raise DraftRejected("EMPTY_OUTPUT")
    if not is_encodable(text):
        raise DraftRejected("INVALID_ENCODING")
    if utf8_len(text) > max_bytes:
        raise DraftRejected("DRAFT_TOO_LARGE", too_large=True)
    if not text.lstrip().startswith("{"):
        raise DraftRejected("NOT_A_JSON_OBJECT")
    try:
        raw = json.loads(text, object_pairs_hook=_reject_duplicate_keys)
    except (json.JSONDecodeError, RecursionError):
        raise DraftRejected("MALFORMED_JSON") from None
    if not isinstance(raw, dict):
        raise DraftRejected("NOT_A_JSON_OBJECT")
    try:
        draft = DiagnosisDraft.model_validate(raw)
    except ValidationError:
        raise DraftRejected("SCHEMA_MISMATCH") from None

    _check_evidence(draft, status_of)
    return draft


def _check_evidence(draft: DiagnosisDraft, status_of: Callable[[str], str | None]) -> None:
    """The Draft may not claim more than this run's evidence shows.

    Every cited ID is a canonical invocation of this run; a conclusion needs a FINDING on FOUND
    evidence; every FINDING cites at least one FOUND invocation (an EMPTY, ERROR or unexecuted call
    found nothing, so it can back only a NEGATIVE_OBSERVATION); and a Draft without a conclusion says
    what is missing (`limitations.missing_info` has a non-blank entry).
    """
    for cited in draft.cited_ids():
        if status_of(cited) is None:
            raise DraftRejected("UNKNOWN_CITATION")
    findings = [item for item in draft.analysis if item.kind == "FINDING"]
    found = [
        isinstance(item.evidence, list) and any(status_of(i) == EvidenceStatus.FOUND for i in item.evidence)
        for item in findings
    ]
    if draft.conclusion is not None and (not draft.conclusion.strip() or not any(found)):
        raise DraftRejected("CONCLUSION_WITHOUT_FOUND_EVIDENCE")
    if not all(found):
        raise DraftRejected("FINDING_WITHOUT_FOUND_EVIDENCE")
    if draft.conclusion is None and not any(entry.strip() for entry in draft.limitations.missing_info):
        raise DraftRejected("NULL_CONCLUSION_WITHOUT_MISSING_INFO")
