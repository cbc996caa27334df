"""Plain-text rendering of an ExecutionResult for terminals without the console."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from agent.contracts import ExecutionResult
from agent.vocabulary import ModelFailureCause, StopReason
from console.presentation import OUTCOME_MEANING, VIOLATION_TEXT, counted, exit_code, model_cause_text
from console.safe_text import neutralize


def render_result(
    result: ExecutionResult,
    model_label: str = "",
    redact: Callable[[str], str] = str,
    model_timeout_s: float | None = None,
) -> str:
    """`redact` is applied to every text but the run and tool call IDs, which are shown exactly;
    `model_timeout_s`: the `[model] timeout_s` the run had, named when the model did not answer in it."""
    return neutralize(_render(result, model_label, redact, model_timeout_s))


def _render(
    result: ExecutionResult, model_label: str, redact: Callable[[str], str], model_timeout_s: float | None
) -> str:
    model_label = redact(model_label)
    lines = [
        f"run {result.run_id}  ({model_label})" if model_label else f"run {result.run_id}",
        f"outcome: {result.outcome.value} / {result.stop_reason.value} "
        f"(exit {exit_code(result.outcome)}: {OUTCOME_MEANING[result.outcome]})",
        f"usage: {counted(result.usage.model_calls, 'model call')}, "
        f"{counted(result.usage.total_tokens, 'token')}",
    ]
    if result.failure is not None:
        lines += failure_lines(
            result.failure.model_dump(mode="json"),
            show=lambda v: redact(str(v)),
            model_timeout_s=model_timeout_s,
        )
    draft = result.draft
    if draft is not None:
        lines.append("")
        lines += draft_lines(draft.model_dump(mode="json"), show=lambda v: redact(str(v)), show_id=str)
        if result.bounds_reached:
            lines.append(
                f"at the length the model server was held to (may be cut): {', '.join(result.bounds_reached)}"
            )
    if result.progress is not None and draft is None:
        lines.append("")
        sat = f", saturation {result.progress.saturation}" if result.progress.saturation else ""
        checks = len(result.progress.checks)
        stop_required = "yes" if result.progress.stop_required else "no"
        lines.append(f"progress: {counted(checks, 'check')}, stop required: {stop_required}{sat}")
        for check in result.progress.checks:
            lines.append(
                f"  - {check.tool_call_id} {check.tool}: {check.evidence_status} {check.evaluation or ''}"
            )
    return "\n".join(lines)


def _entries(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [] if value is None else [value]


def draft_lines(
    draft: Mapping[str, Any], show: Callable[[Any], str] = str, show_id: Callable[[Any], str] | None = None
) -> list[str]:
    """A Draft in readable lines: conclusion, analysis with its evidence IDs (and a negative
    observation's scope), action plan, recommendations, limitations. It reads the Draft's JSON, as the
    result and the audit hold it, and takes any shape without failing (an audit file may have been
    edited); `show` turns each value into text (the audit passes its neutraliser), `show_id` each cited
    tool call ID (by default `show`; a run's result keeps them exact while redacting the text)."""
    show_id = show_id or show
    conclusion = draft.get("conclusion")
    lines = [f"conclusion: {show(conclusion) if conclusion is not None else '(no conclusion)'}"]
    for item in _entries(draft.get("analysis")):
        if not isinstance(item, Mapping):
            lines.append(f"  - {show(item)}")
            continue
        evidence = item.get("evidence")
        cited = ", ".join(show_id(e) for e in evidence) if isinstance(evidence, list) else show(evidence)
        scope = f" [scope: {show(item['scope'])}]" if item.get("scope") else ""
        lines.append(f"  - {show(item.get('kind'))}: {show(item.get('statement'))} <- {cited}{scope}")
    limitations = draft.get("limitations")
    limitations = limitations if isinstance(limitations, Mapping) else {}
    for title, entries in (
        ("action plan", draft.get("action_plan")),
        ("recommendations", draft.get("recommendations")),
        ("checked scope", limitations.get("checked_scope")),
        ("missing info", limitations.get("missing_info")),
    ):
        if _entries(entries):
            lines.append(f"{title}:")
            lines.extend(f"  - {show(e)}" for e in _entries(entries))
    return lines


def failure_lines(
    failure: Mapping[str, Any], show: Callable[[Any], str] = str, model_timeout_s: float | None = None
) -> list[str]:
    """A failure's code, its violation or cause, why in words, and the model endpoint, in lines."""
    code = failure.get("violation") or failure.get("cause")
    lines = [f"failure: {show(failure.get('code'))}" + (f" ({show(code)})" if code else "")]
    violation = failure.get("violation")
    if isinstance(violation, str) and violation in VIOLATION_TEXT:
        lines.append(f"meaning: {VIOLATION_TEXT[violation]}")
    cause, detail = failure.get("cause"), failure.get("detail")
    if failure.get("code") == StopReason.MODEL_ERROR and isinstance(cause, str) and cause:
        why = show(model_cause_text(cause))
        if cause == ModelFailureCause.TIMEOUT and model_timeout_s is not None:
            why += f" ({model_timeout_s:g} s)"
        lines.append(f"why: {why}" + (f" [{show(detail)}]" if detail else ""))
    elif detail:
        lines.append(f"why: {show(detail)}")
    if failure.get("endpoint"):
        lines.append(f"endpoint: {show(failure['endpoint'])}")
    return lines
