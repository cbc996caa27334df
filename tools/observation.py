"""The observation the model sees after each tool call (docs/contracts.md, "Observation").

Only stable, safe semantics: a status, a bounded projection, a stable error code, or a control code.
Never raw backend text, exception messages, counters, thresholds or remaining budget.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from tools.model_text import model_json
from tools.vocabulary import ErrorCode, EvidenceStatus


class Observation(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    tool_call_id: str
    tool: str
    evidence_status: EvidenceStatus
    data: dict[str, Any] | None = None
    error_code: ErrorCode | None = None
    reason: str | None = None
    control: dict[str, Any] | None = None
    # Only the one FOUND observation the model must evaluate next says so (`true`); any other FOUND of
    # the same round says `false`, so the model is never asked to evaluate what the protocol refuses.
    evaluation_required: bool = False

    def to_model_dict(self) -> dict[str, Any]:
        """The exact JSON object sent to the model: optional fields appear only where they mean something."""
        out: dict[str, Any] = {
            "tool_call_id": self.tool_call_id,
            "tool": self.tool,
            "evidence_status": self.evidence_status,
        }
        if self.evidence_status == EvidenceStatus.FOUND:
            out["data"] = self.data
            out["evaluation_required"] = self.evaluation_required
        if self.evidence_status == EvidenceStatus.ERROR:
            out["error_code"] = self.error_code
            if self.reason is not None:
                out["reason"] = self.reason
        out["control"] = self.control
        return out

    def to_model_text(self) -> str:
        """The JSON text sent: evidence never carries a chat format's turn tokens (tools.model_text)."""
        return model_json(self.to_model_dict())
