"""Strict DiagnosisDraft parsing: the whole text is the JSON object, or the run fails.
(docs/contracts.md, "DiagnosisDraft")

There is no repair and no loose extraction: a fenced, prefixed, blank, malformed, oversized or
schema-incompatible answer is discarded, because a "fixed" answer is an answer the model never gave.

Violation codes (stable, safe to show anyone): EMPTY_OUTPUT, INVALID_ENCODING, DRAFT_TOO_LARGE,
NOT_A_JSON_OBJECT, MALFORMED_JSON, DUPLICATE_KEY, SCHEMA_MISMATCH (including a blank `statement` or
`scope`), UNKNOWN_CITATION, FINDING_CITES_NON_FOUND,
FINDING_CITES_NO_GAIN, CONCLUSION_WITHOUT_FOUND_EVIDENCE, NULL_CONCLUSION_WITHOUT_MISSING_INFO. Each
comes with a detail that says where and why without the text. DRAFT_TOO_LARGE is the configured
`max_draft_bytes` and nothing else: no item count or string length of its own, so every Draft within
the configured bytes that meets the rules is accepted, however its bytes are shared out. The
run-specific schema sent to a server (agent/draft/schema.py) admits only Drafts this parser accepts.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError

from agent.blank_text import is_blank
from agent.budget import utf8_len
from agent.contracts import DiagnosisDraft
from agent.draft import detail as why
from agent.draft.rules import FINDING, RunEvidence, finding_violation
from agent.vocabulary import DraftViolation
from tools.unicode_text import holds_unencodable, is_encodable


class DraftRejected(Exception):
    """The final text is not an acceptable Draft. `violation` is a stable code and `detail` says where
    and why (agent/draft/detail.py); both are safe to show anyone, neither quotes the text."""

    def __init__(self, violation: DraftViolation, detail: str, too_large: bool = False) -> None:
        super().__init__(violation)
        self.violation = violation
        self.detail = why.bounded(detail)
        self.too_large = too_large


def _reject_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            raise DraftRejected(DraftViolation.DUPLICATE_KEY, why.duplicate_key(key))
        seen.add(key)
    return dict(pairs)


def parse_draft(text: str | None, max_bytes: int, evidence: RunEvidence) -> DiagnosisDraft:
    """Parse and verify a Draft against this run's executed calls (`evidence`)."""
    if text is None:
        raise DraftRejected(DraftViolation.EMPTY_OUTPUT, "the model's last round returned no text")
    if is_blank(text):
        raise DraftRejected(DraftViolation.EMPTY_OUTPUT, "the text is blank" if text else "the text is empty")
    if not is_encodable(text):
        raise DraftRejected(
            DraftViolation.INVALID_ENCODING, "the text is not valid Unicode (it holds a lone surrogate)"
        )
    size = utf8_len(text)
    if size > max_bytes:
        detail = f"the text is {size} UTF-8 bytes; the limit is {max_bytes}"
        raise DraftRejected(DraftViolation.DRAFT_TOO_LARGE, detail, too_large=True)
    if not text.lstrip().startswith("{"):
        raise DraftRejected(DraftViolation.NOT_A_JSON_OBJECT, why.not_an_object(text))
    try:
        raw = json.loads(text, object_pairs_hook=_reject_duplicate_keys)
    except json.JSONDecodeError as exc:
        raise DraftRejected(DraftViolation.MALFORMED_JSON, why.malformed(text, exc)) from None
    except RecursionError:
        raise DraftRejected(DraftViolation.MALFORMED_JSON, "the JSON is nested too deeply") from None
    if not isinstance(raw, dict):
        raise DraftRejected(DraftViolation.NOT_A_JSON_OBJECT, "the JSON value is not an object")
    if holds_unencodable(raw):
        # A `\ud800` escape is valid JSON but decodes to a lone surrogate: no text to show or store.
        raise DraftRejected(
            DraftViolation.INVALID_ENCODING, "a JSON string escape decodes to a lone surrogate"
        )
    try:
        draft = DiagnosisDraft.model_validate(raw)
    except ValidationError as exc:
        raise DraftRejected(DraftViolation.SCHEMA_MISMATCH, why.schema_mismatch(exc.errors())) from None

    _check_evidence(draft, evidence)
    return draft


def _ids(evidence: list[str] | str) -> list[str]:
    return evidence if isinstance(evidence, list) else []


def _check_evidence(draft: DiagnosisDraft, evidence: RunEvidence) -> None:
    """The Draft may not claim more than this run's evidence shows.

    Every cited ID is an executed call of this run; every ID a FINDING cites is FOUND and was not
    evaluated NO_GAIN by the model (an EMPTY, ERROR or NO_GAIN result backs only a
    NEGATIVE_OBSERVATION); a conclusion needs a FINDING (and so FOUND evidence); and a Draft without
    a conclusion says what is missing (`limitations.missing_info` has a non-blank entry).
    """
    for index, item in enumerate(draft.analysis):
        for cited in _ids(item.evidence):
            if evidence.status_of(cited) is None:
                raise DraftRejected(DraftViolation.UNKNOWN_CITATION, why.unknown_citation(index, cited))
    for index, item in enumerate(draft.analysis):
        if item.kind != FINDING:
            continue
        for cited in _ids(item.evidence):
            violation = finding_violation(evidence, cited)
            if violation is not None:
                raise DraftRejected(violation, why.finding_cites(index, cited, evidence))
    if draft.conclusion is not None and is_blank(draft.conclusion):
        raise DraftRejected(DraftViolation.CONCLUSION_WITHOUT_FOUND_EVIDENCE, "the conclusion is blank")
    if draft.conclusion is not None and not any(item.kind == FINDING for item in draft.analysis):
        raise DraftRejected(
            DraftViolation.CONCLUSION_WITHOUT_FOUND_EVIDENCE,
            "a conclusion, but no FINDING cites a FOUND call",
        )
    if draft.conclusion is None and all(is_blank(entry) for entry in draft.limitations.missing_info):
        state = "has only blank entries" if draft.limitations.missing_info else "is empty"
        raise DraftRejected(
            DraftViolation.NULL_CONCLUSION_WITHOUT_MISSING_INFO,
            f"no conclusion, and limitations.missing_info {state}",
        )
