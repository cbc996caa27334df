"""What every built-in scenario ends in: the CLI tests and the load test check runs against it."""

from __future__ import annotations

# Built-in scenario -> (outcome, stop_reason, exit code, tool call IDs that must be canonical invocations)
EXPECTED = {
    "evidence-backed-diagnosis": ("DRAFT", "COMPLETED", 0, ["call-1", "call-2", "call-3"]),
    "tool-finds-no-evidence": ("DRAFT", "COMPLETED", 0, ["call-1", "call-2"]),
    "missing-context-zero-tools": ("DRAFT", "COMPLETED", 0, []),
    "missing-previous-observation-repaired": ("DRAFT", "COMPLETED", 0, ["call-1", "call-3"]),
    "protocol-violations-saturate": ("CONTROLLED_STOP", "PROGRESS_PROTOCOL_VIOLATED", 10, ["call-1"]),
    "no-gain-saturation-final-draft": ("DRAFT", "COMPLETED_AFTER_STOP_REQUIRED", 0, ["call-1", "call-2"]),
    "stop-required-ignored": ("CONTROLLED_STOP", "INFORMATION_SATURATED", 10, ["call-1", "call-2"]),
    "model-call-budget-exhausted": ("BUDGET_EXHAUSTED", "MODEL_CALLS_EXHAUSTED", 11, ["call-1", "call-2"]),
    # Round 2 spends the token budget: its call-2 never runs.
    "token-budget-exhausted": ("BUDGET_EXHAUSTED", "TOKENS_EXHAUSTED", 11, ["call-1"]),
    "tool-error-no-retry": ("DRAFT", "COMPLETED", 0, ["call-1"]),
    "unknown-tool": ("DRAFT", "COMPLETED", 0, []),
    "fenced-json-fails-closed": ("FAILED", "INVALID_DRAFT", 1, ["call-1"]),
    # A FINDING citing an EMPTY call beside a FOUND one (FINDING_CITES_NON_FOUND).
    "finding-cites-empty-result": ("FAILED", "INVALID_DRAFT", 1, ["call-1", "call-2"]),
    # A conclusion resting on a result the model evaluated NO_GAIN (FINDING_CITES_NO_GAIN).
    "finding-cites-no-gain": ("FAILED", "INVALID_DRAFT", 1, ["call-1", "call-2"]),
    "oversized-query-rejected": ("REJECTED", "QUERY_TOO_LARGE", 2, []),
    # The evidence-backed diagnosis with seconds of model latency per round (a trainer cancels it).
    "slow-model-cancel": ("DRAFT", "COMPLETED", 0, ["call-1", "call-2", "call-3"]),
    # Without [mysql] configured call-1 answers UNAVAILABLE, so nothing is pending and call-2's evaluation
    # of it is a protocol violation (call-2 never runs); the scripted conclusion is refused.
    "mysql-stuck-enterprise-orders": ("FAILED", "INVALID_DRAFT", 1, ["call-1"]),
}
