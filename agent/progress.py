"""ProgressLedger: the progress protocol's state for one run.

A FOUND observation stays pending until the model evaluates it (GAINED / NO_GAIN) in the
`previous_observation` of its next tool call. Two independent saturation counters decide when
collecting more evidence has stopped paying off:
- consecutive no-gain results: NO_GAIN evaluations, EMPTY results and DUPLICATE_CALL answers
  (a repeated equivalent call cannot add information); a GAINED evaluation resets it;
- protocol violations (INVALID_PROGRESS_PROTOCOL and UNKNOWN_TOOL), counted over the whole run.
Reaching a threshold sets STOP_REQUIRED; the model then has exactly one final completion opportunity.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from agent.contracts import ProgressCheck, ProgressSnapshot
from agent.draft_rules import CallEvidence, RunEvidence
from agent.run_events import ProtocolState
from agent.settings import ProtocolSettings
from agent.vocabulary import SaturationReason, StopCause, StopReason
from tools.vocabulary import Evaluation, EvidenceStatus

MAX_SNAPSHOT_CHECKS = 50


@dataclass
class CheckRecord:
    tool_call_id: str
    tool: str
    evidence_status: EvidenceStatus
    evaluation: Evaluation | None = None


@dataclass
class ProgressLedger:
    thresholds: ProtocolSettings
    pending: CheckRecord | None = None
    consecutive_no_gain: int = 0
    protocol_violations: int = 0
    stop_required: bool = False
    stop_cause: StopCause | None = None
    saturation: SaturationReason | None = None
    stop_announced: bool = False
    collection_stopped: bool = False
    checks: list[CheckRecord] = field(default_factory=list)
    _by_id: dict[str, CheckRecord] = field(default_factory=dict)
    _equivalence_keys: set[tuple[str, str]] = field(default_factory=set)

    # --- canonical invocations -------------------------------------------------------------
    def is_known_call_id(self, tool_call_id: str) -> bool:
        return tool_call_id in self._by_id

    def is_duplicate(self, tool: str, canonical_input: str) -> bool:
        return (tool, canonical_input) in self._equivalence_keys

    def record_invocation(self, tool_call_id: str, tool: str, canonical_input: str) -> None:
        """Reserve the ID and equivalence key before the adapter runs, so a crash cannot allow a re-run."""
        record = CheckRecord(tool_call_id, tool, EvidenceStatus.NOT_EXECUTED)
        self.checks.append(record)
        self._by_id[tool_call_id] = record
        self._equivalence_keys.add((tool, canonical_input))

    def finish_invocation(
        self,
        tool_call_id: str,
        status: Literal[EvidenceStatus.FOUND, EvidenceStatus.EMPTY, EvidenceStatus.ERROR],
    ) -> None:
        self._by_id[tool_call_id].evidence_status = status

    def evidence(self) -> RunEvidence:
        """The executed calls as the Draft rules judge them (a still-pending evaluation is None)."""
        return RunEvidence(
            {c.tool_call_id: CallEvidence(c.evidence_status, c.evaluation) for c in self.completed_checks}
        )

    @property
    def completed_checks(self) -> list[CheckRecord]:
        return [c for c in self.checks if c.evidence_status != EvidenceStatus.NOT_EXECUTED]

    # --- protocol counters -----------------------------------------------------------------
    def consume_evaluation(self, evaluation: Evaluation) -> None:
        assert self.pending is not None  # noqa: S101 - invariant for the type checker
        self.pending.evaluation = evaluation
        self.pending = None
        if evaluation == Evaluation.GAINED:
            self.consecutive_no_gain = 0
        else:
            self.consecutive_no_gain += 1

    def count_no_gain(self) -> None:
        self.consecutive_no_gain += 1

    def count_violation(self) -> None:
        self.protocol_violations += 1

    def check_saturation(self) -> SaturationReason | None:
        """Set STOP_REQUIRED when a counter reaches its threshold; return the new saturation, if any."""
        if self.saturation is not None:
            return None
        if self.protocol_violations >= self.thresholds.max_protocol_violations:
            self.saturation = StopReason.PROGRESS_PROTOCOL_VIOLATED
        elif self.consecutive_no_gain >= self.thresholds.max_consecutive_no_gain:
            self.saturation = StopReason.INFORMATION_SATURATED
        else:
            return None
        self.require_stop(StopCause.SATURATION)
        return self.saturation

    def require_stop(self, cause: StopCause) -> None:
        if not self.stop_required:
            self.stop_required = True
            self.stop_cause = cause

    # --- views -----------------------------------------------------------------------------
    def snapshot(self) -> ProgressSnapshot:
        checks = self.completed_checks[-MAX_SNAPSHOT_CHECKS:]
        return ProgressSnapshot(
            checks=[
                ProgressCheck(
                    tool_call_id=c.tool_call_id,
                    tool=c.tool,
                    evidence_status=c.evidence_status,
                    evaluation=c.evaluation,
                )
                for c in checks
            ],
            stop_required=self.stop_required,
            saturation=self.saturation,
        )

    def operator_state(self) -> ProtocolState:
        """Counters and thresholds for the operator (events, console) — never for the model."""
        return {
            "pending_tool_call_id": self.pending.tool_call_id if self.pending else None,
            "consecutive_no_gain": self.consecutive_no_gain,
            "max_consecutive_no_gain": self.thresholds.max_consecutive_no_gain,
            "protocol_violations": self.protocol_violations,
            "max_protocol_violations": self.thresholds.max_protocol_violations,
            "stop_required": self.stop_required,
            "final_opportunity": self.stop_required and self.stop_announced and not self.collection_stopped,
            "saturation": self.saturation,
        }
