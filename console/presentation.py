"""How the console and the command line present the shared vocabulary: labels, styles, exit codes.

Every table is keyed by the enums of `agent.vocabulary` and `tools.vocabulary` (plus the console's own
call states), so a word is labelled and coloured the same way on every screen, in the plain-text result
and in exports. Styles are Rich style strings; nothing here imports Textual, Haystack or pydantic.
"""

from __future__ import annotations

from enum import StrEnum

from agent.vocabulary import (
    EXIT_CODE_OF,
    OUTPUT_ERROR,
    SETUP_ERROR,
    USAGE_ERROR,
    DraftViolation,
    InvocationStatus,
    ModelFailureCause,
    Outcome,
    StopCause,
    StopReason,
    ToolCallCap,
)
from tools.vocabulary import Evaluation, EvidenceStatus


class CallState(StrEnum):
    """The console's own words for a requested call before any evidence status applies to it."""

    REQUESTED = "REQUESTED"  # the round asked for it; nothing has happened yet
    RUNNING = "RUNNING"  # its tool is executing


def exit_code(outcome: Outcome | str) -> int:
    return EXIT_CODE_OF[Outcome(outcome)]


def exit_code_help() -> str:
    """Every exit code `diagnose run` can end with, one a line (its `--help` epilog)."""
    rows = [(EXIT_CODE_OF[outcome], f"{outcome.value}: {OUTCOME_MEANING[outcome]}") for outcome in Outcome]
    rows += [
        (SETUP_ERROR, "setup error: unusable configuration, scenario, audit, input or --events file"),
        (USAGE_ERROR, "usage error: the command line does not parse"),
        (OUTPUT_ERROR, "output error: standard output could not be written (disk full, closed)"),
    ]
    lines = [f"  {code:>3}  {text}" for code, text in rows]
    lines.insert(
        [code for code, _ in rows].index(EXIT_CODE_OF[Outcome.CANCELLED]) + 1,
        "       (also Ctrl-C before a run started, or the reader of --events - leaving)",
    )
    return "exit codes:\n" + "\n".join(lines)


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

# Why a Draft was refused, per `failure.violation` (agent.vocabulary.DraftViolation), in words an
# operator or trainer can act on; `failure.detail` then says where.
VIOLATION_TEXT: dict[str, str] = {
    DraftViolation.EMPTY_OUTPUT: "the model's last round returned no text",
    DraftViolation.INVALID_ENCODING: "the text is not valid Unicode",
    DraftViolation.DRAFT_TOO_LARGE: "the Draft is larger than this run allows (bytes, items or characters)",
    DraftViolation.NOT_A_JSON_OBJECT: "the text is not only the JSON object (a code fence, prose or another "
    "JSON value)",
    DraftViolation.MALFORMED_JSON: "the JSON is broken or cut off",
    DraftViolation.DUPLICATE_KEY: "a key appears twice in one object",
    DraftViolation.SCHEMA_MISMATCH: "the object does not have the Draft's shape (a missing, unknown, "
    "mistyped or blank field)",
    DraftViolation.UNKNOWN_CITATION: "it cites a tool call this run did not execute",
    DraftViolation.FINDING_CITES_NON_FOUND: "a finding cites a call that found nothing (EMPTY or ERROR); "
    "such a call can back only a negative observation",
    DraftViolation.FINDING_CITES_NO_GAIN: "a finding rests on a result the model itself evaluated NO_GAIN; "
    "a result it judged useless can back only a negative observation",
    DraftViolation.CONCLUSION_WITHOUT_FOUND_EVIDENCE: "a conclusion without a finding on FOUND evidence",
    DraftViolation.NULL_CONCLUSION_WITHOUT_MISSING_INFO: "no conclusion, and it does not say what "
    "information is missing",
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
# --- which tool-call cap refused a reply's calls (TOO_MANY_CALLS) -------------------------------------------
TOOL_CALL_CAP_NOTE: dict[str, str] = {  # the timeline note: "<note> of N calls reached; not executed: ..."
    ToolCallCap.ROUND: "the per-reply cap",
    ToolCallCap.RUN: "the per-run cap",
}
STOP_CAUSE_TEXT: dict[str, str] = {  # the protocol panel: "STOP_REQUIRED  yes · <text>"
    StopCause.BUDGET: "one model call left",
    StopCause.SATURATION: "saturation",
}

# --- why a model call failed (failure.cause of a MODEL_ERROR) ---------------------------------------------
MODEL_CAUSE_TEXT: dict[str, str] = {
    ModelFailureCause.REFUSED: "the model endpoint refused the connection: nothing listens there",
    ModelFailureCause.DNS: "the model endpoint's host name does not resolve",
    ModelFailureCause.TLS: "the TLS handshake with the model endpoint failed (certificate, protocol, "
    "or plain HTTP on an https URL)",
    ModelFailureCause.UNREACHABLE: "no route to the model endpoint",
    ModelFailureCause.TIMEOUT: "no complete answer from the model endpoint within [model] timeout_s",
    ModelFailureCause.CONNECTION_CLOSED: "the model endpoint closed the connection without an answer",
    ModelFailureCause.INVALID_RESPONSE: "the model endpoint's answer is not a chat completion",
    ModelFailureCause.MAX_TOKENS: "the reply was cut at [model] max_tokens",
}


def model_cause_text(cause: str) -> str:
    """A model failure's cause in words (`HTTP_<status>` included)."""
    if cause.startswith("HTTP_") and cause[5:].isdigit():
        return f"the model endpoint answered HTTP {cause[5:]}"
    return MODEL_CAUSE_TEXT.get(cause, cause)


# --- a scripted model asked something it was not scripted for ---------------------------------------------
SCRIPTED_NOTICE = "scripted scenario — your query is not sent to a model"
# Under the notice where room is short (the result panel): where a model that reads the query comes from.
SCRIPTED_NOTICE_POINTER = (
    'a model that reads it: diagnose demo model-server, or [model] in a --config file (README, "Try it '
    'with a local model")'
)
SCRIPTED_NOTICE_DETAIL = (
    "The script answers the same whatever is asked. For a model that reads your query: diagnose demo "
    'model-server, or [model] in a --config file (README, "Try it with a local model").'
)
