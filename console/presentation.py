"""How the console and the command line present the shared vocabulary: labels, styles, exit codes.

Every table is keyed by the enums of `tools.vocabulary` (plus the console's own call states), so a word
is labelled and coloured the same way on every screen, in the plain-text result and in exports. Styles
are Rich style strings; nothing here imports Textual or the engine.
"""

from __future__ import annotations

from enum import StrEnum

from tools.vocabulary import (
    EXIT_CODE_OF,
    Evaluation,
    EvidenceStatus,
    InvocationStatus,
    Outcome,
    StopCause,
    StopReason,
)


class CallState(StrEnum):
    """The console's own words for a requested call before any evidence status applies to it."""

    REQUESTED = "REQUESTED"  # the round asked for it; nothing has happened yet
    RUNNING = "RUNNING"  # its tool is executing


# --- process exit codes -----------------------------------------------------------------------------------
# `diagnose run` exits with the outcome's code (EXIT_CODE_OF: 0, 10, 11, 12, 1, 2); these are the others.
SETUP_ERROR = 3  # the run or command could not be set up: configuration, scenario, audit file
NOT_FOUND = 1  # `diagnose audit show`: no such run
USAGE_ERROR = 2  # `diagnose audit`: an argument that does not parse (a cursor, a time)


def exit_code(outcome: Outcome | str) -> int:
    return EXIT_CODE_OF[Outcome(outcome)]


# --- counts -----------------------------------------------------------------------------------------------
def counted(count: object, noun: str, plural: str | None = None, *, thousands: bool = False) -> str:
    """`1 run`, `2 runs`, `0 runs`: a count with its noun as English needs it. Every count the console
    or the command line shows goes through here, so none says `1 runs`. `count` may be a placeholder
    such as `—` (an unknown count takes the plural) or a count already made safe to print (`"1"` is
    one); `thousands` groups digits (`12,346 tokens`)."""
    shown = f"{count:,}" if thousands and isinstance(count, int) else str(count)
    return f"{shown} {noun if shown == '1' else (plural or noun + 's')}"


# --- outcomes and stop reasons ----------------------------------------------------------------------------
OUTCOME_MEANING: dict[str, str] = {
    Outcome.DRAFT: "a Draft was produced",
    Outcome.CONTROLLED_STOP: "the harness stopped evidence collection",
    Outcome.BUDGET_EXHAUSTED: "a run budget ran out",
    Outcome.CANCELLED: "the run was cancelled",
    Outcome.FAILED: "the run failed closed",
    Outcome.REJECTED: "the input was rejected before any model call",
}
OUTCOME_STYLE: dict[str, str] = {
    Outcome.DRAFT: "bold green",
    Outcome.CONTROLLED_STOP: "bold yellow",
    Outcome.BUDGET_EXHAUSTED: "bold yellow",
    Outcome.CANCELLED: "bold magenta",
    Outcome.FAILED: "bold red",
    Outcome.REJECTED: "bold red",
}
# CSS class of the result banner (console/screens/investigate.tcss)
OUTCOME_CLASS: dict[str, str] = {
    Outcome.DRAFT: "-draft",
    Outcome.CONTROLLED_STOP: "-stop",
    Outcome.BUDGET_EXHAUSTED: "-stop",
    Outcome.CANCELLED: "-cancelled",
    Outcome.FAILED: "-failed",
    Outcome.REJECTED: "-failed",
}
STOP_REASON_TEXT: dict[str, str] = {
    StopReason.COMPLETED: "the model delivered a valid Draft",
    StopReason.COMPLETED_AFTER_STOP_REQUIRED: "a valid Draft in the final completion opportunity after "
    "STOP_REQUIRED",
    StopReason.INFORMATION_SATURATED: "no-gain results reached the threshold and the final opportunity "
    "was not a Draft",
    StopReason.PROGRESS_PROTOCOL_VIOLATED: "protocol violations reached the threshold and the final "
    "opportunity was not a Draft",
    StopReason.MODEL_CALLS_EXHAUSTED: "the model-call budget is spent",
    StopReason.TOKENS_EXHAUSTED: "the token budget is spent: the next round was refused before reaching "
    "the model",
    StopReason.DEADLINE_EXCEEDED: "the run deadline passed",
    StopReason.RUN_BYTES_EXHAUSTED: "the run-bytes budget is spent",
    StopReason.CANCELLED: "the operator cancelled the run; in-flight work was cancelled",
    StopReason.INVALID_DRAFT: "the final text is not a valid Draft (no repair, no second call)",
    StopReason.DRAFT_TOO_LARGE: "the final text exceeds the Draft size limit",
    StopReason.MODEL_ERROR: "the model call failed",
    StopReason.AGENT_ERROR: "the agent failed unexpectedly; no progress is published",
    StopReason.QUERY_BLANK: "the query is blank",
    StopReason.QUERY_TOO_LARGE: "the query exceeds its size limit (it is never truncated)",
    StopReason.PREVIOUS_TURN_INVALID: "the previous turn is not a valid PreviousTurn",
    StopReason.PREVIOUS_TURN_TOO_LARGE: "the previous turn exceeds its size limit",
    StopReason.INPUT_TOO_LARGE: "query and previous turn together exceed the input limit",
}

# --- calls, invocations and evaluations -------------------------------------------------------------------
# Keyed by a timeline call's state, an audited invocation's status, or a snapshot check's status.
STATUS_STYLE: dict[str, str] = {
    InvocationStatus.FOUND: "bold green",
    InvocationStatus.EMPTY: "yellow",
    InvocationStatus.ERROR: "bold red",
    InvocationStatus.CANCELLED: "magenta",
    EvidenceStatus.NOT_EXECUTED: "dim",
    CallState.RUNNING: "italic cyan",
    CallState.REQUESTED: "dim",
    InvocationStatus.INTERRUPTED: "magenta",
    InvocationStatus.STARTED: "italic cyan",
}
STATUS_TEXT: dict[str, str] = {
    CallState.RUNNING: "running…",
    CallState.REQUESTED: "requested",
    EvidenceStatus.NOT_EXECUTED: "not executed",
}
EVALUATION_STYLE: dict[str, str] = {Evaluation.GAINED: "green", Evaluation.NO_GAIN: "yellow"}

# --- why STOP_REQUIRED was raised -------------------------------------------------------------------------
STOP_CAUSE_NOTE: dict[str, str] = {  # the timeline note: "<note>: the next round is the last"
    StopCause.BUDGET: "one model call left",
    StopCause.SATURATION: "saturated",
}
STOP_CAUSE_TEXT: dict[str, str] = {  # the protocol panel: "STOP_REQUIRED  yes · <text>"
    StopCause.BUDGET: "one model call left",
    StopCause.SATURATION: "saturation",
}
