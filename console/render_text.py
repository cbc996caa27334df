"""Plain-text rendering of an ExecutionResult for terminals without the console."""

from __future__ import annotations

from agent.contracts import ExecutionResult
from console.presentation import OUTCOME_MEANING, counted, exit_code
from console.safe_text import neutralize


def render_result(result: ExecutionResult, model_label: str = "") -> str:
    return neutralize(_render(result, model_label))


def _render(result: ExecutionResult, model_label: str) -> str:
    lines = [
        f"run {result.run_id}  ({model_label})" if model_label else f"run {result.run_id}",
        f"outcome: {result.outcome.value} / {result.stop_reason.value} "
        f"(exit {exit_code(result.outcome)}: {OUTCOME_MEANING[result.outcome]})",
        f"usage: {counted(result.usage.model_calls, 'model call')}, "
        f"{counted(result.usage.total_tokens, 'token')}",
    ]
    if result.failure is not None:
        failure = result.failure
        code = failure.violation or failure.cause
        lines.append(f"failure: {failure.code}" + (f" ({code})" if code else ""))
        if failure.detail:
            lines.append(f"why: {failure.detail}")
    draft = result.draft
    if draft is not None:
        lines.append("")
        lines.append(f"conclusion: {draft.conclusion if draft.conclusion is not None else '(no conclusion)'}")
        for item in draft.analysis:
            evidence = item.evidence if isinstance(item.evidence, str) else ", ".join(item.evidence)
            scope = f" [scope: {item.scope}]" if item.scope else ""
            lines.append(f"  - {item.kind}: {item.statement} <- {evidence}{scope}")
        for title, entries in (
            ("action plan", draft.action_plan),
            ("recommendations", draft.recommendations),
            ("checked scope", draft.limitations.checked_scope),
            ("missing info", draft.limitations.missing_info),
        ):
            if entries:
                lines.append(f"{title}:")
                lines.extend(f"  - {e}" for e in entries)
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
