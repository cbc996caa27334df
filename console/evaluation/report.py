"""The eval report as a terminal table, a Markdown file and a JSON file (same figures in each)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from audit.output_files import write_output
from console.evaluation.runner import EvalReport
from console.evaluation.scoring import Scores

HEADERS = (
    "case",
    "runs",
    "accepted",
    "honesty",
    "conclusion",
    "expected",
    "citations ok",
    "abstention",
    "herring-proof",
    "viol/run",
    "dup/run",
    "valid tool rnds",
    "tool+draft",
    "fabricated",
    "rounds",
    "tokens",
    "wall s",
)
_GAP = "  "


def _cells(name: str, s: Scores) -> list[str]:
    return [
        name,
        str(s.runs),
        str(s.acceptance),
        str(s.honesty),
        str(s.conclusion),
        str(s.expectation),
        str(s.citation_validity),
        str(s.abstention),
        str(s.red_herring_resistance),
        f"{s.violations_per_run:.2f}",
        f"{s.duplicates_per_run:.2f}",
        str(s.valid_tool_rounds),
        str(s.tool_backed_drafts),
        str(s.fabricated),
        f"{s.rounds_mean:.1f}",
        f"{s.prompt_tokens_mean + s.completion_tokens_mean:.0f}",
        f"{s.wall_s_mean:.1f}",
    ]


def _rows(report: EvalReport) -> list[list[str]]:
    rows = [_cells(name, scores) for name, scores in report.by_case().items()]
    rows.append(_cells("ALL", report.overall()))
    return rows


def render_table(report: EvalReport, width: int | None = None) -> str:
    """Plain text, aligned columns, readable in any terminal and in CI logs. Within `width` columns
    the table folds: each band holds the case column and as many score columns as fit, the next band
    the rest (as a wide data frame prints); `None` is one band, however wide."""
    rows = [list(HEADERS), *_rows(report)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(HEADERS))]
    bands: list[list[int]] = [[]]
    used = widths[0]
    for column in range(1, len(HEADERS)):
        needed = len(_GAP) + widths[column]
        if width is not None and bands[-1] and used + needed > width:
            bands.append([])
            used = widths[0]
        bands[-1].append(column)
        used += needed
    lines: list[str] = []
    for band in bands:
        if lines:
            lines.append("")
        for row in rows:
            cells = [row[0].ljust(widths[0]), *(row[i].ljust(widths[i]) for i in band)]
            lines.append(_GAP.join(cells).rstrip())
    lines.append("")
    summary = _summary_line(report, report.overall())
    lines += textwrap.wrap(summary, width, break_on_hyphens=False) if width is not None else [summary]
    return "\n".join(lines)


def _summary_line(report: EvalReport, overall: Scores) -> str:
    stops = ", ".join(f"{k} {v}" for k, v in overall.stop_reasons.items()) or "none"
    tokens = "reported" if overall.tokens_reported else "partly estimated (the provider reported no usage)"
    return (
        f"model: {report.model}; stop reasons: {stops}; tokens {tokens}; "
        f"largest completion in one round: {overall.max_round_completion_tokens} "
        f"(max_tokens {report.settings['max_tokens']}); wall {report.wall_s:.1f} s"
        + ("; INTERRUPTED" if report.interrupted else "")
    )


def render_markdown(report: EvalReport) -> str:
    header = list(HEADERS)
    out = [
        "# Evaluation",
        "",
        f"- model: `{report.model}`",
        f"- started: {report.started_at}; wall time {report.wall_s:.1f} s; "
        f"repetitions per case: {report.repeat}",
        f"- machine: {report.machine}",
        "- settings: `" + json.dumps(report.settings, ensure_ascii=False, separators=(", ", ": ")) + "`",
    ]
    if report.interrupted:
        out.append("- **interrupted**: the figures cover the runs that finished")
    out += ["", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in _rows(report)]
    overall = report.overall()
    out += [
        "",
        f"Stop reasons: {', '.join(f'`{k}` {v}' for k, v in overall.stop_reasons.items()) or 'none'}.",
        f"Failures: {', '.join(f'`{k}` {v}' for k, v in overall.failures.items()) or 'none'}.",
        f"Tokens: prompt {overall.prompt_tokens_mean:.0f} + completion {overall.completion_tokens_mean:.0f} "
        f"per run ({'reported by the provider' if overall.tokens_reported else 'partly estimated'}); "
        f"largest completion in one round {overall.max_round_completion_tokens} "
        f"(max_tokens {report.settings['max_tokens']}).",
        f"Cost: {overall.model_calls_total} model calls and {overall.tokens_total} tokens in total; "
        f"wall {overall.wall_s_total:.1f} s over the runs.",
        "",
        "Rates: accepted = runs ending in a DRAFT; honesty = accepted Drafts with `conclusion: null` on "
        "no-evidence cases; conclusion = accepted Drafts on evidence cases that conclude with a finding "
        "citing an expected tool; expected = runs whose Draft met the case's expectation. A tool counts as "
        "cited only through FOUND calls the model did not evaluate NO_GAIN. citations ok = such grounded "
        "FINDING citations / FINDING citations (a Draft refused for a citation counts the one it names); "
        "abstention = runs on no-evidence cases ending with `conclusion: null`; herring-proof = runs on "
        "cases with misleading evidence whose Draft does not conclude from it; valid tool rnds = "
        "rounds before the final opportunity whose reply carried calls (or was cut at max_tokens) and "
        "whose calls the protocol took up; "
        "tool+draft = runs that executed a tool and ended in an accepted Draft; fabricated = accepted "
        "conclusions without a finding citing FOUND evidence of the run (must be 0).",
        "",
        "## Runs",
        "",
        "| case | # | outcome | stop reason | failure | concluded | cites | grounded | rounds | tokens "
        "| wall s |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in report.runs:
        failure = "" if not r.failure else "/".join(str(v) for v in r.failure.values())
        out.append(
            f"| {r.case} | {r.repetition + 1} | {r.outcome} | {r.stop_reason} | {failure} | "
            f"{'yes' if r.concluded else 'no'} | {', '.join(r.cited_tools)} | "
            f"{r.grounded_citations}/{r.citations} | {r.rounds} | "
            f"{r.prompt_tokens + r.completion_tokens} | {r.wall_s:.1f} |"
        )
    return "\n".join(out) + "\n"


def report_paths(out_dir: Path) -> tuple[Path, Path]:
    return out_dir / "report.json", out_dir / "report.md"


def write_reports(report: EvalReport, out_dir: Path, *, force: bool = False) -> tuple[Path, Path]:
    """Both reports as new owner-only files, like every file the console writes (audit.output_files);
    earlier ones are replaced only with `force`."""
    json_path, md_path = report_paths(out_dir)
    text = json.dumps(report.to_json(), ensure_ascii=False, indent=2) + "\n"
    write_output(json_path, text, force=force)
    write_output(md_path, render_markdown(report), force=force)
    return json_path, md_path
