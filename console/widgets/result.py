"""The result panel: the Draft as an operator reads it, or why there is none.

Every citation (and every progress check of a stopped run) is an option: choosing it shows that tool
call in the timeline, so a claim can be checked against exactly what the agent saw. Draft text comes
from the model and is put into `Text` objects, never parsed as markup.
"""

from __future__ import annotations

from typing import Any, ClassVar

from rich.console import Group, RenderableType
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from agent.vocabulary import StopReason
from console.messages import CitationSelected
from console.presentation import (
    EVALUATION_STYLE,
    OUTCOME_CLASS,
    OUTCOME_MEANING,
    STATUS_STYLE,
    STOP_REASON_TEXT,
    VIOLATION_TEXT,
    counted,
    exit_code,
    model_cause_text,
)
from console.run_state import RunState
from console.safe_text import neutralize, neutralize_values


def heading(text: str) -> Text:
    return Text(text, style="bold underline")


def bullets(items: list[str], numbered: bool = False) -> list[Text]:
    if not items:
        return [Text("  none", style="dim")]
    return [Text(f"  {f'{i}.' if numbered else '•'} {item}") for i, item in enumerate(items, start=1)]


def banner(state: RunState) -> Text:
    outcome = str(state.outcome)
    text = Text.assemble((f"{outcome} / {state.stop_reason}", "bold"))
    if outcome in OUTCOME_MEANING:
        text.append(f"   exit {exit_code(outcome)}: {OUTCOME_MEANING[outcome]}")
    usage = (state.result or {}).get("usage") or {}
    text.append(
        f"\nrun {state.run_id} · {counted(usage.get('model_calls', 0), 'model call')} · "
        f"{counted(usage.get('total_tokens', 0), 'token', thousands=True)}",
        style="dim",
    )
    return text


def check_prompt(state: RunState, tool_call_id: str, indent: str = "   ↳ ") -> Text:
    row = state.calls.get(tool_call_id)
    text = Text.assemble(indent, (neutralize(tool_call_id, newlines=False), "bold"))
    if row is None:
        text.append("  not a call of this run", style="red")
        return text
    text.append(f"  {neutralize(row.tool or '—', newlines=False)}", style="cyan")
    text.append(f"  {row.status}", style=STATUS_STYLE.get(row.status, ""))
    if row.evaluation:
        text.append(f"  eval {row.evaluation}", style=EVALUATION_STYLE.get(row.evaluation, ""))
    return text


def snapshot_check_prompt(check: dict[str, Any]) -> Text:
    """One ProgressSnapshot check exactly as the result publishes it."""
    status = str(check.get("evidence_status"))
    text = Text.assemble(
        "  ",
        (neutralize(str(check.get("tool_call_id")), newlines=False), "bold"),
        "  ",
        (neutralize(str(check.get("tool")), newlines=False), "cyan"),
    )
    text.append(f"  {status}", style=STATUS_STYLE.get(status, ""))
    if check.get("evaluation"):
        text.append(f"  eval {check['evaluation']}", style=EVALUATION_STYLE.get(str(check["evaluation"]), ""))
    return text


class CitationList(OptionList):
    """The Draft's citations (or a stop's checks): the footer names what enter does here."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("enter", "select", "Show call")]


class ResultView(VerticalScroll):
    """Empty until a run finishes; then the Draft or the stop, with jumpable citations."""

    ALLOW_MAXIMIZE = True  # f8 maximises the whole panel

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._targets: list[str | None] = []
        self._shown_run: str | None = None  # the run whose result is drawn (None: none yet)

    def compose(self) -> ComposeResult:
        notice = Static(id="result-notice")
        notice.display = False
        yield notice
        yield Static(Text("No result yet.", style="dim"), id="result-banner")
        yield Static(id="result-summary")
        yield CitationList(id="result-citations")
        yield Static(id="result-sections")

    def show(self, state: RunState) -> None:
        banner_widget = self.query_one("#result-banner", Static)
        summary = self.query_one("#result-summary", Static)
        sections = self.query_one("#result-sections", Static)
        options = self.query_one("#result-citations", OptionList)
        for cls in set(OUTCOME_CLASS.values()):
            banner_widget.remove_class(cls)
        options.clear_options()
        self._targets = []
        shown_run = state.run_id if state.result is not None else None
        if shown_run != self._shown_run:  # another run: its headline first, not the last one's scroll
            self._shown_run = shown_run
            self.scroll_home(animate=False, immediate=True)
        if state.result is None:
            running = state.phase == "running"
            banner_widget.update(Text("Running…" if running else "No result yet.", style="dim"))
            summary.update("")
            sections.update("")
            options.display = False
            return
        banner_widget.add_class(OUTCOME_CLASS.get(str(state.outcome), "-failed"))
        banner_widget.update(banner(state))
        draft = state.draft
        if draft is not None:
            self._show_draft(state, neutralize_values(draft), summary, options, sections)
        else:
            self._show_stop(state, summary, options, sections)
        options.display = bool(self._targets)
        if self._targets:
            options.highlighted = 0  # a visible cursor before the list is ever focused

    def show_notice(self, notice: Text | None) -> None:
        """A line above the result that the run's answer must be read with (a scripted model that
        never read the query), or none."""
        widget = self.query_one("#result-notice", Static)
        widget.display = notice is not None
        widget.update(notice or "")

    def focus_citations(self) -> None:
        """Focus the citation (or check) list, else the panel itself."""
        options = self.query_one("#result-citations", OptionList)
        if options.display and options.option_count:
            if options.highlighted is None:
                options.highlighted = 0
            options.focus()
        else:
            self.focus()

    def show_failure(self, message: str) -> None:
        """The run worker crashed before the use case could classify anything (e.g. the audit failed)."""
        self.show(RunState())
        banner_widget = self.query_one("#result-banner", Static)
        banner_widget.add_class("-failed")
        banner_widget.update(Text.assemble(("no result", "bold"), "  the run stopped before it could finish"))
        self.query_one("#result-summary", Static).update(Text(neutralize(message)))

    def _add(self, options: OptionList, prompt: Text, target: str | None) -> None:
        options.add_option(Option(prompt))
        self._targets.append(target)

    def _show_draft(
        self, state: RunState, draft: dict[str, Any], summary: Static, options: OptionList, sections: Static
    ) -> None:
        parts: list[RenderableType] = [heading("Conclusion")]
        if draft.get("conclusion") is None:
            parts.append(Text("No conclusion: the evidence does not support one (conclusion: null).", "bold"))
        else:
            parts.append(Text(str(draft["conclusion"])))
        analysis = draft.get("analysis") or []
        parts += [
            Text(""),
            heading("Analysis" + (" — enter on a citation shows the call" if analysis else "")),
        ]
        if not analysis:
            parts.append(Text("  none", style="dim"))
        summary.update(Group(*parts))
        for item in analysis:
            kind = str(item.get("kind"))
            evidence = item.get("evidence")
            prompt = Text.assemble((kind, "bold green" if kind == "FINDING" else "bold yellow"), " ")
            prompt.append(str(item.get("statement", "")))
            if item.get("scope"):
                prompt.append(f"\n   scope: {item['scope']}", style="dim")
            if evidence == "NO_EVIDENCE":
                prompt.append("\n   evidence: NO_EVIDENCE", style="yellow")
            cited = [str(e) for e in evidence] if isinstance(evidence, list) else []
            self._add(options, prompt, cited[0] if cited else None)
            for tool_call_id in cited:
                self._add(options, check_prompt(state, tool_call_id), tool_call_id)
        limitations = draft.get("limitations") or {}
        sections.update(
            Group(
                heading("Action plan"),
                *bullets(list(draft.get("action_plan") or []), numbered=True),
                Text(""),
                heading("Recommendations"),
                *bullets(list(draft.get("recommendations") or [])),
                Text(""),
                heading("Limitations: checked scope"),
                *bullets(list(limitations.get("checked_scope") or [])),
                heading("Limitations: missing information"),
                *bullets(list(limitations.get("missing_info") or [])),
            )
        )

    def _show_stop(self, state: RunState, summary: Static, options: OptionList, sections: Static) -> None:
        result = neutralize_values(state.result or {})
        reason = str(state.stop_reason)
        parts: list[RenderableType] = [
            heading("Why there is no Draft"),
            Text(STOP_REASON_TEXT.get(reason, reason)),
        ]
        failure = result.get("failure")
        if failure:
            extra = [f"{k}: {v}" for k, v in failure.items() if k != "code" and v is not None]
            parts.append(Text(f"failure {failure.get('code')}" + (f" ({'; '.join(extra)})" if extra else "")))
            if failure.get("code") == StopReason.MODEL_ERROR and failure.get("cause"):
                parts.append(Text(model_cause_text(str(failure["cause"])), "bold"))
            words = VIOLATION_TEXT.get(str(failure.get("violation")))
            if words:
                parts.append(Text(f"why: {words}", style="bold"))
        if state.ending_budget is not None:
            parts.append(Text(f"budget that ended the run: {state.ending_budget.replace('_', ' ')}", "bold"))
        progress = result.get("progress")
        parts += [Text(""), heading("Progress snapshot")]
        if progress is None:
            parts.append(Text("none published for this outcome", style="dim"))
        else:
            flags = f"stop_required: {'yes' if progress.get('stop_required') else 'no'}"
            flags += f" · saturation: {progress.get('saturation') or '—'}"
            parts.append(Text(flags))
            if not progress.get("checks"):
                parts.append(Text("  no completed checks", style="dim"))
        summary.update(Group(*parts))
        for check in (progress or {}).get("checks") or []:
            self._add(options, snapshot_check_prompt(check), check.get("tool_call_id"))
        sections.update("")

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if 0 <= event.option_index < len(self._targets):
            target = self._targets[event.option_index]
            if target is not None:
                self.post_message(CitationSelected(target))
