"""The Draft rules, stated once: the parser checks them, the run's schema encodes them, the prompt says them.

Three copies of the rules drift apart: a prompt that lets a NEGATIVE_OBSERVATION cite an unexecuted
call the parser refuses, a schema that admits whitespace-only text or Drafts that JSON escaping
pushes over `max_draft_bytes`, or refuses concluded Drafts with negative observations that the
parser accepts. So everything a rule depends on lives here, once:
- which calls a FINDING may cite (FOUND and not evaluated NO_GAIN) and which a NEGATIVE_OBSERVATION
  may cite (any executed call of the run) — `RunEvidence`;
- what blank text is (agent/blank_text.py);
- how many items and characters a Draft may use so that it surely fits `max_draft_bytes` whatever
  characters it uses (with one exception, see MAX_BYTES_PER_CHAR) — `DraftBounds`: what a
  grammar-constrained server is held to and the prompt states, never a limit of the parser, which
  accepts any Draft within the configured bytes.
agent/draft/parser.py, agent/draft/schema.py and agent/prompt.py only apply these.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from agent.blank_text import BLANK_CLASS, is_blank
from agent.vocabulary import DraftViolation
from tools.vocabulary import Evaluation, EvidenceStatus

FINDING = "FINDING"
NEGATIVE_OBSERVATION = "NEGATIVE_OBSERVATION"
NO_EVIDENCE = "NO_EVIDENCE"
LIST_FIELDS = ("action_plan", "recommendations")
LIMITATION_FIELDS = ("checked_scope", "missing_info")

# JSON Schema `pattern` of a non-blank text: anchored (llama.cpp's grammar needs `^...$`), escapes only,
# "any character" spelled as a range both Python's `re` and llama.cpp understand.
_ANY = "\\u0000-\\U0010FFFF"
NON_BLANK_TEXT_PATTERN = f"^[{BLANK_CLASS}]*[^{BLANK_CLASS}][{_ANY}]*$"


def bounded_non_blank_pattern(max_chars: int) -> str:
    """A non-blank text of at most `max_chars` characters, for a server that enforces the schema.

    A grammar-constrained server turns a string's `pattern` into its grammar and then ignores
    `maxLength` (llama.cpp does), so an unbounded `*` lets a small model write one string until the
    round's `max_tokens` cuts the reply. This pattern carries the bound itself. Such a grammar also
    writes a pattern's characters into the JSON string as they are, so a `"` or `\\` it allowed would
    end the string or start an escape the JSON does not hold (measured: a `"` in "any character" gave
    output the server itself could not parse). So it is narrower than `NON_BLANK_TEXT_PATTERN` with
    `maxLength`: no character JSON must escape, and the first one is not blank (the parser allows a
    leading blank; a model never needs one)."""
    return f"^[^{BLANK_CLASS}{_JSON_ESCAPED}]{PLAIN_CHAR}{{0,{max(max_chars - 1, 0)}}}$"


# The characters JSON writes escaped: the quote, the backslash and the C0 controls (the last are blank).
_JSON_ESCAPED = '"\\\\'
# A character a schema string may hold: none that JSON must escape (a grammar writes it raw).
PLAIN_CHAR = '[^"\\\\\\x00-\\x1f\\x7f]'


# Bytes of the canonical JSON (`canonical_text`) one character may take: 3 for any character of the
# BMP (CJK; `"`, `\`, tab and newline take 2). Two kinds of character take more: those outside the
# BMP (4 bytes, e.g. most emoji) and C0 control characters other than tab, newline and CR (6-byte
# `\u00XX` escapes). Budgeting for them would cut every text by a quarter to a half for what no
# honest Draft is made of; a Draft made of them may pass the length bounds and still exceed the byte
# limit, and the parser's byte check (run first) refuses it as DRAFT_TOO_LARGE.
# tests/agent/test_draft_rules.py pins this one difference.
MAX_BYTES_PER_CHAR = 3
MAX_CITED_PER_ITEM = 4
# Every call ID is budgeted at least this many bytes, so that the limits stated in the prompt (before
# any call exists) are the limits of the run unless its IDs are longer (OpenAI's are 29 characters,
# llama.cpp's 32).
MIN_ID_BUDGET_BYTES = 40
_FLOOR_TEXT_CHARS = 8
_FLOOR_NOTE_CHARS = 4
# Fewer bytes per token than any tokenizer we measured spends on Chinese text in JSON (about 1.9
# for SmolLM2, 3 for Gemma and GPT-4o): a token limit of N carries a Draft of at least 2N bytes.
MIN_BYTES_PER_TOKEN = 2


def canonical_text(draft: Mapping[str, Any]) -> str:
    """The Draft as `json.dumps` writes it (the form the size bounds are computed for)."""
    return json.dumps(draft, ensure_ascii=False)


# ------------------------------------------------------------------ evidence
@dataclass(frozen=True)
class CallEvidence:
    status: str
    evaluation: str | None = None


@dataclass(frozen=True)
class RunEvidence:
    """The run's executed calls as the Draft rules see them: ID -> status and evaluation, in call order.

    An evaluation is None while the observation is still pending when the Draft comes: that is not
    NO_GAIN (the model never judged it useless).
    """

    calls: Mapping[str, CallEvidence]

    @classmethod
    def of(
        cls, statuses: Mapping[str, str], evaluations: Mapping[str, str | None] | None = None
    ) -> RunEvidence:
        """From statuses (and evaluations) by ID; a NOT_EXECUTED call is no evidence and is left out."""
        evaluations = evaluations or {}
        return cls(
            {
                i: CallEvidence(str(s), evaluations.get(i))
                for i, s in statuses.items()
                if s != EvidenceStatus.NOT_EXECUTED
            }
        )

    def status_of(self, tool_call_id: str) -> str | None:
        call = self.calls.get(tool_call_id)
        return call.status if call else None

    def evaluation_of(self, tool_call_id: str) -> str | None:
        call = self.calls.get(tool_call_id)
        return call.evaluation if call else None

    def negative_citable(self) -> list[str]:
        """IDs a NEGATIVE_OBSERVATION may cite: every executed call (an unexecuted one is no evidence)."""
        return [i for i in self.calls if not is_blank(i)]

    def finding_citable(self) -> list[str]:
        """IDs a FINDING may cite: FOUND, and not evaluated NO_GAIN by the model itself."""
        return [i for i in self.negative_citable() if finding_violation(self, i) is None]

    def id_budget_bytes(self) -> int:
        return max([MIN_ID_BUDGET_BYTES, *(_json_bytes(i) + 2 for i in self.calls)])


NO_CALLS = RunEvidence({})


def finding_violation(evidence: RunEvidence, tool_call_id: str) -> DraftViolation | None:
    """Why a FINDING may not cite this call of the run (None: it may). Unknown IDs are not asked here."""
    call = evidence.calls.get(tool_call_id)
    if call is None or is_blank(tool_call_id):
        return DraftViolation.UNKNOWN_CITATION
    if call.status != EvidenceStatus.FOUND:
        return DraftViolation.FINDING_CITES_NON_FOUND
    if call.evaluation == Evaluation.NO_GAIN:
        return DraftViolation.FINDING_CITES_NO_GAIN
    return None


# ------------------------------------------------------------------ size
@dataclass(frozen=True)
class DraftBounds:
    """How many items and characters a Draft may hold so that its canonical JSON fits a byte limit.

    Not a rule of the Draft: the parser checks only `max_draft_bytes` (and DESIGN's rules), so any
    Draft within the configured bytes is accepted. These bounds are what a server that needs a bound
    per string (a grammar) is sent, and what the prompt states, so a Draft written within them surely
    fits. Two text lengths: `max_text_chars` for the conclusion and each statement (the claims, which
    need room for a sentence) and `max_note_chars` for a scope and each list entry (labels and steps).
    """

    max_analysis: int
    max_list_items: int
    max_text_chars: int
    max_note_chars: int
    max_cited: int = MAX_CITED_PER_ITEM

    @property
    def holds_a_sentence(self) -> bool:
        """Whether a claim may be a whole sentence: false when the bytes (or a round's token limit)
        leave less than `MIN_CLAIM_CHARS` even for one analysis item."""
        return self.max_text_chars >= MIN_CLAIM_CHARS

    def narrowed(self, other: DraftBounds) -> DraftBounds:
        """Within both: what a Draft must meet to satisfy each."""
        return DraftBounds(
            min(self.max_analysis, other.max_analysis),
            min(self.max_list_items, other.max_list_items),
            min(self.max_text_chars, other.max_text_chars),
            min(self.max_note_chars, other.max_note_chars),
            min(self.max_cited, other.max_cited),
        )

    def reached(self, draft: Mapping[str, Any]) -> list[str]:
        """The JSON paths of the Draft's strings that are as long as these bounds allow: a server held
        to them may have ended each there, mid-sentence (the Result says so: `bounds_reached`)."""
        return [
            path
            for path, value, claim in text_fields(draft)
            if len(value) >= (self.max_text_chars if claim else self.max_note_chars)
        ]


# `{"conclusion": , "analysis": [], "action_plan": [], "recommendations": [], "limitations":
# {"checked_scope": [], "missing_info": []}}` with `null` or `""`: 121 bytes; the rest is margin.
_FIXED_BYTES = 160
# `{"kind": "NEGATIVE_OBSERVATION", "statement": "", "scope": "", "evidence": []}, `: 80 bytes.
_ITEM_BYTES = 84
_STRING_BYTES = 4  # two quotes and a `, ` separator
_TEXT_TO_NOTE = 2.5  # a claim gets 2.5 times the characters of a note
_MAX_NOTE_CHARS = 100
_MAX_TEXT_CHARS = 500
# A claim of a sentence: fewer items, lists and citations are bounded before a claim falls under this
# (a 120-character statement is a sentence in English, two or three in Chinese).
MIN_CLAIM_CHARS = 120
# Item counts (analysis, each list, citations per item), largest first; the first that leaves a claim
# MIN_CLAIM_CHARS is taken, the smallest when none does.
_FEWER_ITEMS = ((3, 2, 2), (2, 1, 2), (1, 1, 1))


def draft_bounds(max_bytes: int, id_budget_bytes: int = MIN_ID_BUDGET_BYTES) -> DraftBounds:
    """The largest Draft these bounds admit fits `max_bytes` whatever its BMP characters (tested).

    Item counts grow with the limit; the characters left after the skeleton and the citations (at
    MAX_BYTES_PER_CHAR) are shared out, a claim getting 2.5 times a note, a note at most 100. Where a
    claim would fall under MIN_CLAIM_CHARS, fewer items, list entries and citations are allowed
    instead: one sentence says more than three fragments. Under about 1.7 KiB not even one item's
    sentence fits, and floors (8 and 4 characters) keep the Draft writable (`holds_a_sentence` is then
    false, and the parser's byte check still applies).
    """
    full = (min(8, max(3, max_bytes // 1536)), min(5, max(2, max_bytes // 4096)), MAX_CITED_PER_ITEM)
    for max_analysis, max_list_items, max_cited in (full, *_FEWER_ITEMS):
        skeleton = _FIXED_BYTES + max_analysis * (_ITEM_BYTES + max_cited * id_budget_bytes)
        texts, notes = 1 + max_analysis, max_analysis + 4 * max_list_items
        chars = (max_bytes - skeleton - (texts + notes) * _STRING_BYTES) // MAX_BYTES_PER_CHAR
        note = min(_MAX_NOTE_CHARS, int(chars / (_TEXT_TO_NOTE * texts + notes)))
        text = min(_MAX_TEXT_CHARS, (chars - max(note, 0) * notes) // texts)
        if text >= MIN_CLAIM_CHARS:
            break
    return DraftBounds(
        max_analysis, max_list_items, max(_FLOOR_TEXT_CHARS, text), max(_FLOOR_NOTE_CHARS, note), max_cited
    )


def token_byte_limit(max_tokens: int) -> int:
    """The Draft bytes a round of `max_tokens` can surely finish."""
    return max_tokens * MIN_BYTES_PER_TOKEN


def run_bounds(
    max_draft_bytes: int, evidence: RunEvidence = NO_CALLS, max_tokens: int | None = None
) -> DraftBounds:
    """The bounds of a run: from `max_draft_bytes`, and narrowed to `max_tokens` where a model must
    finish the Draft within one round's token limit (the schema sent to a server, and the prompt)."""
    ids = evidence.id_budget_bytes()
    bounds = draft_bounds(max_draft_bytes, ids)
    if max_tokens is not None:
        bounds = bounds.narrowed(draft_bounds(token_byte_limit(max_tokens), ids))
    return bounds


def _json_bytes(value: str) -> int:
    return len(json.dumps(value, ensure_ascii=False).encode("utf-8"))


def text_fields(draft: Mapping[str, Any]) -> Iterable[tuple[str, Any, bool]]:
    """Every text string of a parsed Draft: its JSON path (`analysis[0].statement`), its value, and
    whether it is a claim (conclusion, statement: `max_text_chars`) or a note (`max_note_chars`)."""
    if draft.get("conclusion") is not None:
        yield "conclusion", draft["conclusion"], True
    for index, item in enumerate(draft.get("analysis") or []):
        yield f"analysis[{index}].statement", item.get("statement"), True
        if item.get("scope") is not None:
            yield f"analysis[{index}].scope", item.get("scope"), False
    for name in LIST_FIELDS:
        for index, entry in enumerate(draft.get(name) or []):
            yield f"{name}[{index}]", entry, False
    limitations = draft.get("limitations") or {}
    for name in LIMITATION_FIELDS:
        for index, entry in enumerate(limitations.get(name) or []):
            yield f"limitations.{name}[{index}]", entry, False
