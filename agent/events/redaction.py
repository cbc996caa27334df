"""Redacting what a run shows while keeping its tool call IDs exact.

The redaction step rewrites text that looks like a credential (`token:abc123x` becomes
`token:[REDACTED]`). A tool call ID is an identifier, not content: the audit keys invocations by it,
a Draft cites it, the model is answered under it. Rewritten, two IDs of one round could become one
audit key (and the run stop on the collision), and a citation would no longer match its invocation.
So every ID field of an event, and of the execution result it carries, is kept exactly as the model
emitted it, and everything else passes the redactor. An ID cannot smuggle a configured
secret this way: the harness refuses such an ID before it is used anywhere (`Redactor.holds_secret`).

The ID fields (docs/contracts.md, "Run events"): `tool_call_id` and `tool_call_ids` of an event;
`tool_call_id` and `control.expected_tool_call_id` of an observation (`tool_finished.observation`,
the values of `budget_changed.unexecuted_observations`, whose keys are IDs too);
`expected_tool_call_id`, `evaluated_tool_call_id` and `tool_call_ids` of a `protocol_changed` detail
and `pending_tool_call_id` of its state; and in a result, each analysis item's `evidence` and each
progress check's `tool_call_id`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from tools.redaction import Redactor

_DETAIL_IDS = ("expected_tool_call_id", "evaluated_tool_call_id", "tool_call_ids")


def redact_event_fields(redactor: Redactor, fields: Mapping[str, Any]) -> dict[str, Any]:
    """An event's own fields (no envelope) with content redacted and every tool call ID exact."""
    out: dict[str, Any] = {}
    for name, value in fields.items():
        keep = _FIELDS.get(name)
        out[name] = redactor.value(value) if keep is None else keep(redactor, value)
    return out


def redact_result(redactor: Redactor, result: Mapping[str, Any]) -> dict[str, Any]:
    """An execution result's JSON object, redacted, with its citations and checks' IDs exact."""
    redacted: dict[str, Any] = redactor.value(dict(result))
    draft, exact_draft = redacted.get("draft"), result.get("draft")
    if isinstance(draft, dict) and isinstance(exact_draft, Mapping):
        for item, exact in zip(draft.get("analysis") or [], exact_draft.get("analysis") or [], strict=True):
            item["evidence"] = exact["evidence"]
    progress, exact_progress = redacted.get("progress"), result.get("progress")
    if isinstance(progress, dict) and isinstance(exact_progress, Mapping):
        for check, exact in zip(
            progress.get("checks") or [], exact_progress.get("checks") or [], strict=True
        ):
            check["tool_call_id"] = exact["tool_call_id"]
    return redacted


def _exact(_: Redactor, value: Any) -> Any:
    return value


def _with_exact(keys: tuple[str, ...]) -> Callable[[Redactor, Any], Any]:
    """Redact a mapping, then put back the exact values of `keys` (our own key names, never rewritten)."""

    def redact(redactor: Redactor, value: Any) -> Any:
        redacted = redactor.value(value)
        if isinstance(value, Mapping) and isinstance(redacted, dict):
            redacted.update({key: value[key] for key in keys if key in value})
        return redacted

    return redact


def _observation(redactor: Redactor, value: Any) -> Any:
    redacted = _with_exact(("tool_call_id",))(redactor, value)
    control = value.get("control") if isinstance(value, Mapping) else None
    if isinstance(control, Mapping) and isinstance(redacted.get("control"), dict):
        redacted["control"] = _with_exact(("expected_tool_call_id",))(redactor, control)
    return redacted


def _observations_by_id(redactor: Redactor, value: Any) -> Any:
    if not isinstance(value, Mapping):
        return redactor.value(value)
    return {call_id: _observation(redactor, observation) for call_id, observation in value.items()}


def _result(redactor: Redactor, value: Any) -> Any:
    return redact_result(redactor, value) if isinstance(value, Mapping) else redactor.value(value)


_FIELDS: dict[str, Callable[[Redactor, Any], Any]] = {
    "tool_call_id": _exact,
    "tool_call_ids": _exact,
    "observation": _observation,
    "unexecuted_observations": _observations_by_id,
    "detail": _with_exact(_DETAIL_IDS),
    "state": _with_exact(("pending_tool_call_id",)),
    "result": _result,
}
