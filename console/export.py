"""Exporting a run: the Draft as Markdown for the clipboard, the whole run as Markdown and JSON files.

Pure functions over plain JSON values (the ExecutionResult and the run's events), so they are tested
without a terminal. The JSON export keeps every event exactly; the Markdown is for people and folds
whitespace inside list items so a statement cannot break the document's structure.

Both are terminal output too: an operator `cat`s an export, and a pasted clipboard lands in another
terminal. So the Markdown passes `neutralize` (control characters, ESC sequences such as OSC 52 and
OSC 8, bidi and other invisible format characters become visible escapes; newline and tab stay), and
the JSON writes those characters as JSON string escapes (`\u001b`, `\u202e`): the same values once
decoded, nothing raw on a terminal.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.events.run_events import RunEvent, parse_event
from audit.output_files import check_replaceable, write_output
from console.presentation import OUTCOME_MEANING, counted, exit_code
from console.run_state import RunState
from console.safe_text import neutralize


@dataclass(frozen=True)
class RunRecord:
    """What an export needs about one run: what was asked, of which model, and what happened."""

    query: str
    previous_turn: Mapping[str, Any] | None
    model: str
    result: Mapping[str, Any]
    # The run's events, typed (or as their JSON objects, which are validated when written).
    events: tuple[RunEvent | Mapping[str, Any], ...] = field(default_factory=tuple)


def _one_line(text: Any) -> str:
    return " ".join(str(text).split())


def _list(items: Iterable[Any], numbered: bool = False) -> list[str]:
    lines = [f"{f'{i}.' if numbered else '-'} {_one_line(item)}" for i, item in enumerate(items, start=1)]
    return lines or ["_none_"]


def draft_markdown(draft: Mapping[str, Any], level: int = 1) -> str:
    """The Draft an operator pastes into a ticket: conclusion (or its explicit absence) and evidence.
    Terminal-safe (see the module's docstring): it is also what `ctrl+g` puts on the clipboard."""
    return neutralize(_draft_markdown(draft, level))


def draft_json(draft: Mapping[str, Any]) -> str:
    """The Draft as JSON for the clipboard: exact values, no character that drives a terminal raw."""
    return neutralize(json.dumps(draft, ensure_ascii=False, indent=2), form="json")


def _draft_markdown(draft: Mapping[str, Any], level: int) -> str:
    h = "#" * level
    conclusion = draft.get("conclusion")
    lines = [f"{h} Diagnosis Draft", ""]
    if conclusion is None:
        lines.append("**Conclusion:** none — the evidence does not support one (`conclusion: null`).")
    else:
        lines.append(f"**Conclusion:** {_one_line(conclusion)}")
    lines += ["", f"{h}# Analysis", ""]
    for item in draft.get("analysis") or []:
        evidence = item.get("evidence")
        cited = (
            "NO_EVIDENCE"
            if evidence == "NO_EVIDENCE"
            else ", ".join(f"`{_one_line(e)}`" for e in evidence or [])
        )
        scope = f"; scope: {_one_line(item['scope'])}" if item.get("scope") else ""
        lines.append(
            f"- **{item.get('kind')}** {_one_line(item.get('statement', ''))} — evidence: {cited}{scope}"
        )
    if not draft.get("analysis"):
        lines.append("_none_")
    limitations = draft.get("limitations") or {}
    lines += ["", f"{h}# Action plan", "", *_list(draft.get("action_plan") or [], numbered=True)]
    lines += ["", f"{h}# Recommendations", "", *_list(draft.get("recommendations") or [])]
    lines += [
        "",
        f"{h}# Limitations",
        "",
        "**Checked scope**",
        "",
        *_list(limitations.get("checked_scope") or []),
    ]
    lines += ["", "**Missing information**", "", *_list(limitations.get("missing_info") or [])]
    return "\n".join(lines) + "\n"


def _outcome_line(result: Mapping[str, Any]) -> str:
    outcome = str(result.get("outcome"))
    line = f"**{outcome} / {result.get('stop_reason')}**"
    if outcome in OUTCOME_MEANING:
        line += f" (exit {exit_code(outcome)}: {OUTCOME_MEANING[outcome]})"
    return line


def _timeline(events: Iterable[RunEvent | Mapping[str, Any]]) -> list[str]:
    state = RunState()
    state.apply_all(list(events))
    lines: list[str] = []
    for entry in state.entries:
        if entry.kind == "round":
            row = state.rounds[entry.key]
            estimated = "~" if row.usage_estimated else ""
            tokens = f"{estimated}{row.prompt_tokens or 0}+{row.completion_tokens or 0} tokens"
            asked = ", ".join(f"`{c}`" for c in row.tool_call_ids) or (
                "final text" if row.has_text else "no calls"
            )
            lines.append(f"- Round {row.number} — {tokens} — {asked}")
            for tool_call_id in row.tool_call_ids:
                call = state.calls[tool_call_id]
                parts = [f"`{call.tool_call_id}`", call.tool or "—", call.status]
                if call.error_code and call.error_code != call.status:
                    parts.append(call.error_code)
                if call.evaluation:
                    parts.append(f"eval {call.evaluation}")
                parts += list(dict.fromkeys(call.controls))
                if call.input is not None:
                    parts.append("input `" + json.dumps(call.input, ensure_ascii=False) + "`")
                lines.append("  - " + " — ".join(parts))
        elif entry.kind == "note":
            note = state.notes[entry.key]
            lines.append(f"- ⚑ {note.code} `{json.dumps(note.detail or {}, ensure_ascii=False)}`")
    return lines or ["_no model round was started_"]


def run_markdown(record: RunRecord, exported_at: str) -> str:
    """The run for people; terminal-safe (see the module's docstring)."""
    return neutralize(_run_markdown(record, exported_at))


def _run_markdown(record: RunRecord, exported_at: str) -> str:
    result = record.result
    usage = result.get("usage") or {}
    lines = [
        f"# Diagnosis run {result.get('run_id')}",
        "",
        f"- Outcome: {_outcome_line(result)}",
        f"- Model: {record.model or '—'}",
        f"- Session: {result.get('session_id')}",
        f"- Usage: {counted(usage.get('model_calls', 0), 'model call')}, "
        f"{counted(usage.get('total_tokens', 0), 'token')} "
        f"({usage.get('prompt_tokens', 0)} prompt, {usage.get('completion_tokens', 0)} completion)",
        f"- Exported: {exported_at}",
        "",
        "## Query",
        "",
        *[f"> {line}" for line in (record.query.splitlines() or [""])],
        "",
        "## Carried over from the previous turn",
        "",
    ]
    if record.previous_turn is None:
        lines.append("_none_")
    else:
        lines += ["```json", json.dumps(record.previous_turn, ensure_ascii=False, indent=2), "```"]
    lines.append("")
    draft = result.get("draft")
    if draft is not None:
        lines.append(_draft_markdown(draft, level=2))
    else:
        lines += ["## Why there is no Draft", "", f"Stop reason: `{result.get('stop_reason')}`."]
        if result.get("failure"):
            lines.append(f"Failure: `{json.dumps(result['failure'], ensure_ascii=False)}`.")
            if isinstance(result["failure"], dict) and result["failure"].get("detail"):
                lines += ["", f"Why: {result['failure']['detail']}"]
        lines.append("")
    progress = result.get("progress")
    if progress is not None:
        lines += [
            "## Progress snapshot",
            "",
            f"stop_required: {'yes' if progress.get('stop_required') else 'no'} · "
            f"saturation: {progress.get('saturation') or '—'}",
            "",
            "| call | tool | status | evaluation |",
            "|---|---|---|---|",
        ]
        for check in progress.get("checks") or []:
            cells = (check.get("tool"), check.get("evidence_status"), check.get("evaluation") or "—")
            lines.append(
                f"| `{_one_line(check.get('tool_call_id'))}` | {' | '.join(_one_line(c) for c in cells)} |"
            )
        lines.append("")
    lines += ["## Timeline", "", *_timeline(record.events), ""]
    return "\n".join(lines)


def run_json(record: RunRecord, exported_at: str) -> str:
    """The complete record: the ExecutionResult and every run event exactly as the console received it."""
    payload = {
        "exported_at": exported_at,
        "model": record.model,
        "query": record.query,
        "previous_turn": record.previous_turn,
        "result": record.result,
        "events": [parse_event(event).to_wire() for event in record.events],
    }
    return neutralize(json.dumps(payload, ensure_ascii=False, indent=2), form="json") + "\n"


def export_paths(directory: Path, run_id: str) -> tuple[Path, Path]:
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in run_id) or "run"
    return directory / f"diagnosis-{safe}.md", directory / f"diagnosis-{safe}.json"


def existing_exports(directory: Path, run_id: str) -> list[Path]:
    """The export files of this run already in `directory`: the dialog asks before replacing them."""
    return [path for path in export_paths(directory, run_id) if os.path.lexists(path)]


def write_run(
    record: RunRecord,
    directory: Path,
    exported_at: str,
    *,
    replace: bool = False,
    protected: Iterable[Path] = (),
) -> tuple[Path, Path]:
    """Write both files owner-only (they hold operator data, like the audit), never through a symbolic
    link (audit.output_files). An earlier export is replaced only with `replace` (the operator said
    so), and never one of the `protected` files (the audit in use)."""
    markdown_path, json_path = export_paths(directory, str(record.result.get("run_id") or "run"))
    protected = tuple(protected)
    for path in (markdown_path, json_path):  # both or neither
        check_replaceable(path, force=replace, protected=protected)
    write_output(markdown_path, run_markdown(record, exported_at), force=replace, protected=protected)
    write_output(json_path, run_json(record, exported_at), force=replace, protected=protected)
    return markdown_path, json_path
