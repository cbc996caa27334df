"""The run's words: event types, invocation statuses, protocol codes, outcomes, stop reasons and exit codes.

Each concept is one `StrEnum` defined here and nowhere else. A member *is* its string (`Outcome.DRAFT ==
"DRAFT"`, and `json.dumps` writes `"DRAFT"`), so the JSON contracts spell the words exactly while code
compares against names a type checker knows. These are the engine's language, so they live beside the
engine; `audit` and `console` read them from here. What a tool adapter answers (evidence statuses, tool
error codes) is `tools.vocabulary`. Light on purpose: it imports nothing from the project and loads
neither Haystack nor pydantic.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final, Literal


class EventType(StrEnum):
    """The `type` of a run event (docs/contracts.md, "Run events")."""

    RUN_STARTED = "run_started"
    MODEL_ROUND_STARTED = "model_round_started"
    MODEL_ROUND_FINISHED = "model_round_finished"
    TOOL_STARTED = "tool_started"
    TOOL_FINISHED = "tool_finished"
    PROTOCOL_CHANGED = "protocol_changed"
    BUDGET_CHANGED = "budget_changed"
    RUN_FINISHED = "run_finished"


class InvocationStatus(StrEnum):
    """The lifecycle of one audited invocation (`invocations.status`).

    STARTED is written before the adapter runs, so a crash leaves evidence; INTERRUPTED is what crash
    recovery (or a run that ended around it) writes over a STARTED row.
    """

    STARTED = "STARTED"
    FOUND = "FOUND"
    EMPTY = "EMPTY"
    ERROR = "ERROR"
    CANCELLED = "CANCELLED"
    INTERRUPTED = "INTERRUPTED"


class ProtocolCode(StrEnum):
    """The `code` of a `protocol_changed` event.

    The first seven are audited protocol events (and, except SATURATED and COLLECTION_STOPPED, control
    codes the model can receive); EVALUATION_RECORDED and INVALID_INPUT are operator-only notes.
    """

    INVALID_PROGRESS_PROTOCOL = "INVALID_PROGRESS_PROTOCOL"
    UNKNOWN_TOOL = "UNKNOWN_TOOL"
    DUPLICATE_CALL = "DUPLICATE_CALL"
    STOP_REQUIRED = "STOP_REQUIRED"
    COLLECTION_STOPPED = "COLLECTION_STOPPED"
    SATURATED = "SATURATED"
    TOO_MANY_CALLS = "TOO_MANY_CALLS"
    EVALUATION_RECORDED = "EVALUATION_RECORDED"
    INVALID_INPUT = "INVALID_INPUT"


# Rows of the `protocol_events` audit table; the other codes are operator-only events.
AUDITED_PROTOCOL_CODES: frozenset[ProtocolCode] = frozenset(
    {
        ProtocolCode.INVALID_PROGRESS_PROTOCOL,
        ProtocolCode.UNKNOWN_TOOL,
        ProtocolCode.DUPLICATE_CALL,
        ProtocolCode.STOP_REQUIRED,
        ProtocolCode.COLLECTION_STOPPED,
        ProtocolCode.SATURATED,
        ProtocolCode.TOO_MANY_CALLS,
    }
)


class ToolCallCap(StrEnum):
    """Which cap a reply's calls ran into (`TOO_MANY_CALLS` detail `cap`): `[budget]
    max_tool_calls_per_round` or `max_tool_calls_per_run`."""

    ROUND = "ROUND"
    RUN = "RUN"


# How run listings name a run that crash recovery closed: nobody saw it end, so it has no Outcome.
INTERRUPTED_RUN: Final = "INTERRUPTED"


class StopCause(StrEnum):
    """Why STOP_REQUIRED was raised: a saturation counter, or only one model call left."""

    SATURATION = "SATURATION"
    BUDGET = "BUDGET"


class Outcome(StrEnum):
    """How a run ended (`outcome` of the execution result)."""

    DRAFT = "DRAFT"
    CONTROLLED_STOP = "CONTROLLED_STOP"
    BUDGET_EXHAUSTED = "BUDGET_EXHAUSTED"
    CANCELLED = "CANCELLED"
    FAILED = "FAILED"
    REJECTED = "REJECTED"


class StopReason(StrEnum):
    """Why a run ended (`stop_reason`); each belongs to exactly one outcome (`OUTCOME_OF`)."""

    COMPLETED = "COMPLETED"
    COMPLETED_AFTER_STOP_REQUIRED = "COMPLETED_AFTER_STOP_REQUIRED"
    INFORMATION_SATURATED = "INFORMATION_SATURATED"
    PROGRESS_PROTOCOL_VIOLATED = "PROGRESS_PROTOCOL_VIOLATED"
    MODEL_CALLS_EXHAUSTED = "MODEL_CALLS_EXHAUSTED"
    TOKENS_EXHAUSTED = "TOKENS_EXHAUSTED"
    DEADLINE_EXCEEDED = "DEADLINE_EXCEEDED"
    RUN_BYTES_EXHAUSTED = "RUN_BYTES_EXHAUSTED"
    CANCELLED = "CANCELLED"
    INVALID_DRAFT = "INVALID_DRAFT"
    DRAFT_TOO_LARGE = "DRAFT_TOO_LARGE"
    MODEL_ERROR = "MODEL_ERROR"
    AGENT_ERROR = "AGENT_ERROR"
    QUERY_BLANK = "QUERY_BLANK"
    QUERY_TOO_LARGE = "QUERY_TOO_LARGE"
    PREVIOUS_TURN_INVALID = "PREVIOUS_TURN_INVALID"
    PREVIOUS_TURN_TOO_LARGE = "PREVIOUS_TURN_TOO_LARGE"
    INPUT_TOO_LARGE = "INPUT_TOO_LARGE"


class DraftViolation(StrEnum):
    """Why a final text is not a valid Draft (`failure.violation` of INVALID_DRAFT or DRAFT_TOO_LARGE),
    in the order the parser checks them (agent/draft/parser.py)."""

    EMPTY_OUTPUT = "EMPTY_OUTPUT"
    INVALID_ENCODING = "INVALID_ENCODING"
    DRAFT_TOO_LARGE = "DRAFT_TOO_LARGE"
    NOT_A_JSON_OBJECT = "NOT_A_JSON_OBJECT"
    MALFORMED_JSON = "MALFORMED_JSON"
    DUPLICATE_KEY = "DUPLICATE_KEY"
    SCHEMA_MISMATCH = "SCHEMA_MISMATCH"
    UNKNOWN_CITATION = "UNKNOWN_CITATION"
    FINDING_CITES_NON_FOUND = "FINDING_CITES_NON_FOUND"
    FINDING_CITES_NO_GAIN = "FINDING_CITES_NO_GAIN"
    CONCLUSION_WITHOUT_FOUND_EVIDENCE = "CONCLUSION_WITHOUT_FOUND_EVIDENCE"
    NULL_CONCLUSION_WITHOUT_MISSING_INFO = "NULL_CONCLUSION_WITHOUT_MISSING_INFO"


# The two saturation counters' names double as the stop reasons of a controlled stop.
SaturationReason = Literal[StopReason.INFORMATION_SATURATED, StopReason.PROGRESS_PROTOCOL_VIOLATED]

OUTCOME_OF: dict[StopReason, Outcome] = {
    StopReason.COMPLETED: Outcome.DRAFT,
    StopReason.COMPLETED_AFTER_STOP_REQUIRED: Outcome.DRAFT,
    StopReason.INFORMATION_SATURATED: Outcome.CONTROLLED_STOP,
    StopReason.PROGRESS_PROTOCOL_VIOLATED: Outcome.CONTROLLED_STOP,
    StopReason.MODEL_CALLS_EXHAUSTED: Outcome.BUDGET_EXHAUSTED,
    StopReason.TOKENS_EXHAUSTED: Outcome.BUDGET_EXHAUSTED,
    StopReason.DEADLINE_EXCEEDED: Outcome.BUDGET_EXHAUSTED,
    StopReason.RUN_BYTES_EXHAUSTED: Outcome.BUDGET_EXHAUSTED,
    StopReason.CANCELLED: Outcome.CANCELLED,
    StopReason.INVALID_DRAFT: Outcome.FAILED,
    StopReason.DRAFT_TOO_LARGE: Outcome.FAILED,
    StopReason.MODEL_ERROR: Outcome.FAILED,
    StopReason.AGENT_ERROR: Outcome.FAILED,
    StopReason.QUERY_BLANK: Outcome.REJECTED,
    StopReason.QUERY_TOO_LARGE: Outcome.REJECTED,
    StopReason.PREVIOUS_TURN_INVALID: Outcome.REJECTED,
    StopReason.PREVIOUS_TURN_TOO_LARGE: Outcome.REJECTED,
    StopReason.INPUT_TOO_LARGE: Outcome.REJECTED,
}

# The process exit code of `diagnose run` for each outcome: part of the result contract.
EXIT_CODE_OF: dict[Outcome, int] = {
    Outcome.DRAFT: 0,
    Outcome.CONTROLLED_STOP: 10,
    Outcome.BUDGET_EXHAUSTED: 11,
    Outcome.CANCELLED: 12,
    Outcome.FAILED: 1,
    Outcome.REJECTED: 2,
}


# The process's other exit codes (`diagnose run` exits with its outcome's, EXIT_CODE_OF above). Each but
# NOT_FOUND is apart from every outcome's code, so a script can tell "the run ended so" from "no run ended".
SETUP_ERROR: Final = 3  # the run or command could not be set up: configuration, scenario, audit file
# `diagnose audit show` and `audit export --otlp`: no such run (or a named run still going). The same
# number as a FAILED run's: only `diagnose audit` returns it, and that command runs no run.
NOT_FOUND: Final = 1
# A command line that does not parse (argparse's own errors included): sysexits' EX_USAGE, since
# argparse's default 2 is the code of a REJECTED run.
USAGE_ERROR: Final = 64
# Standard output could not be written (a full disk, a closed descriptor): sysexits' EX_IOERR. A reader
# that left (`| head`) is not an error: the command ends with its own code.
OUTPUT_ERROR: Final = 74
# Ctrl-C: a running run ends CANCELLED (its own code); before a run exists, or in another command,
# the command stops with the same code, so a script sees one code for "the operator stopped it".
INTERRUPTED: Final = EXIT_CODE_OF[Outcome.CANCELLED]


class RunFailureCause(StrEnum):
    """Why a run FAILED with AGENT_ERROR when the harness knows (`failure.cause`)."""

    # The required audit refused a write mid-run (a lost team-audit lease, a store down past its
    # retry deadline): the run stopped rather than go on unaudited. `detail` names the error.
    AUDIT_WRITE_FAILED = "AUDIT_WRITE_FAILED"


class ModelFailureCause(StrEnum):
    """Why a model call failed (`failure.cause` of a MODEL_ERROR), in words an operator can act on;
    besides these, `HTTP_<status>` (`http_cause`) when the server answered with an error status."""

    REFUSED = "REFUSED"  # nothing listens at that host and port
    DNS = "DNS"  # the host name does not resolve
    TLS = "TLS"  # the TLS handshake failed: certificate, protocol, or plain HTTP on an https URL
    UNREACHABLE = "UNREACHABLE"  # no route to the host or its network
    TIMEOUT = "TIMEOUT"  # no complete answer within [model] timeout_s
    CONNECTION_CLOSED = "CONNECTION_CLOSED"  # the server closed the connection without an answer
    INVALID_RESPONSE = "INVALID_RESPONSE"  # an answer that is not a chat completion
    MAX_TOKENS = "MAX_TOKENS"  # the reply was cut at [model] max_tokens


def http_cause(status: int) -> str:
    """`HTTP_<status>`: the model server answered with an error status (401 a key, 404 a model name...)."""
    return f"HTTP_{status}"
