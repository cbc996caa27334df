"""The frozen contracts of a diagnosis run: input, Draft, snapshot, result (docs/contracts.md,
"Agent input", "DiagnosisDraft", "Execution result").

All models are strict and forbid unknown keys: anything the model or a caller sends that does not
match exactly is an error, never silently coerced.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    Strict,
    model_serializer,
    model_validator,
)

from agent.blank_text import is_blank
from agent.vocabulary import EXIT_CODE_OF, DraftViolation, Outcome, SaturationReason, StopReason
from tools.unicode_text import unencodable_path
from tools.vocabulary import Evaluation, EvidenceStatus


class Contract(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


def _not_blank(value: str) -> str:
    """Whitespace is not text: a statement of spaces (or of zero-width characters) says nothing."""
    if is_blank(value):
        raise ValueError("must not be blank")
    return value


NonBlank = Annotated[str, Field(min_length=1), AfterValidator(_not_blank)]


class Limitations(Contract):
    checked_scope: list[str]
    missing_info: list[str]


class PreviousTurn(Contract):
    """The only memory a follow-up carries: the last query, its conclusion and its honest limits."""

    query: NonBlank
    conclusion: str | None
    limitations: Limitations

    @model_validator(mode="after")
    def _unicode_text(self) -> PreviousTurn:
        """The turn is sent to the model, shown and audited, all as UTF-8: a lone surrogate (what a
        JSON `\\ud800` escape decodes to) is no text any of them can carry."""
        where = unencodable_path(self.model_dump())
        if where is not None:
            raise ValueError(f"previous_turn.{where} is not valid Unicode text (it holds a lone surrogate)")
        return self


class AgentInput(Contract):
    """The user message, exactly `{"query", "previous_turn"}` (docs/contracts.md, "Agent input")."""

    query: str
    previous_turn: PreviousTurn | None


class AnalysisItem(Contract):
    kind: Literal["FINDING", "NEGATIVE_OBSERVATION"]
    statement: NonBlank
    evidence: list[NonBlank] | Literal["NO_EVIDENCE"]
    scope: NonBlank | None = None

    @model_validator(mode="after")
    def _evidence_matches_kind(self) -> AnalysisItem:
        if self.kind == "FINDING":
            if not isinstance(self.evidence, list) or not self.evidence:
                raise ValueError("FINDING needs a non-empty list of tool call IDs")
        elif self.evidence == "NO_EVIDENCE":
            if self.scope is None:
                raise ValueError("NO_EVIDENCE needs a non-empty scope")
        elif not self.evidence:
            raise ValueError("evidence must be a non-empty list of tool call IDs or NO_EVIDENCE")
        return self

    @model_serializer(mode="wrap")
    def _omit_absent_scope(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)  # a model serializes to a dict
        if data.get("scope") is None:
            data.pop("scope", None)
        return data


class DiagnosisDraft(Contract):
    conclusion: str | None
    analysis: list[AnalysisItem]
    action_plan: list[str]
    recommendations: list[str]
    limitations: Limitations

    def cited_ids(self) -> list[str]:
        ids: list[str] = []
        for item in self.analysis:
            if isinstance(item.evidence, list):
                ids.extend(item.evidence)
        return ids


class ProgressCheck(Contract):
    tool_call_id: str
    tool: str
    # Lax for these two fields only: the JSON spelling and the enum member are the same word.
    evidence_status: Annotated[EvidenceStatus, Strict(False)]
    evaluation: Annotated[Evaluation, Strict(False)] | None


class ProgressSnapshot(Contract):
    """What was checked so far, bounded: the only progress a failed or stopped run may publish."""

    checks: list[ProgressCheck]
    stop_required: bool
    saturation: SaturationReason | None


class Usage(Contract):
    model_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0


class Failure(Contract):
    """Safe failure metadata: a stable code and, at most, a stable violation, cause or budget name."""

    code: StopReason
    violation: DraftViolation | None = None
    # A stable cause of a MODEL_ERROR the operator can act on, e.g. MAX_TOKENS (raise [model] max_tokens),
    # REFUSED, DNS, TLS, TIMEOUT, HTTP_<status> (agent.vocabulary.ModelFailureCause).
    cause: str | None = None
    detail: str | None = None
    # Where a failed model call went: the base URL without user, password, query or fragment.
    endpoint: str | None = None


class ExecutionResult(Contract):
    run_id: str
    session_id: str
    outcome: Outcome
    stop_reason: StopReason
    draft: DiagnosisDraft | None
    progress: ProgressSnapshot | None
    usage: Usage
    failure: Failure | None
    # The Draft's strings as long as the schema the server was held to allows (`DraftBounds.reached`):
    # the server may have ended each there, mid-sentence. Present only when there is one.
    bounds_reached: list[str] | None = None

    @property
    def exit_code(self) -> int:
        return EXIT_CODE_OF[self.outcome]

    def to_json_dict(self) -> dict[str, Any]:
        data = self.model_dump(mode="json")
        if self.failure is not None:
            data["failure"] = self.failure.model_dump(mode="json", exclude_none=True)
        if self.bounds_reached is None:
            del data["bounds_reached"]
        return data
