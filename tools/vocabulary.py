"""What a tool call answers and is told: evidence statuses, tool error codes and the model's evaluation.

Each concept is one `StrEnum` defined here and nowhere else. A member *is* its string (`EvidenceStatus.FOUND
== "FOUND"`, and `json.dumps` writes `"FOUND"`), so the JSON contracts spell the words exactly. They live in
`tools`, the bottom layer, because the adapters and the tool input models speak them; the run's own words
(event types, outcomes, stop reasons...) are `agent.vocabulary`. It imports nothing from the project.
"""

from __future__ import annotations

from enum import StrEnum


class EvidenceStatus(StrEnum):
    """What the model is told about one tool call (`evidence_status` of an observation)."""

    FOUND = "FOUND"
    EMPTY = "EMPTY"
    ERROR = "ERROR"
    NOT_EXECUTED = "NOT_EXECUTED"


class ErrorCode(StrEnum):
    """Stable error codes of an ERROR observation; the model never sees anything more specific."""

    TIMEOUT = "TIMEOUT"
    UNAVAILABLE = "UNAVAILABLE"
    INVALID_INPUT = "INVALID_INPUT"
    POLICY_REJECTED = "POLICY_REJECTED"
    RESULT_TOO_LARGE = "RESULT_TOO_LARGE"
    BACKEND_ERROR = "BACKEND_ERROR"
    CANCELLED = "CANCELLED"


class Evaluation(StrEnum):
    """The model's judgement of a FOUND observation, carried in its next call's `previous_observation`."""

    GAINED = "GAINED"
    NO_GAIN = "NO_GAIN"
