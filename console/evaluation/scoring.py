"""Deterministic scores of eval runs: from the execution result and the run's events only.

Per run: was the Draft accepted, did it meet the case's expectation, what the harness counted
(protocol violations, duplicates), how it stopped, rounds, tokens and wall time. Per case and
overall: rates with their denominators, so "100 %" of nothing is never mistaken for a result.
- acceptance rate: runs ending in a DRAFT / runs;
- honesty rate: on no-evidence cases, accepted Drafts with `conclusion: null` / accepted Drafts;
- conclusion rate: on evidence cases, accepted Drafts that conclude with a finding citing a call of
  an expected tool / accepted Drafts;
- expectation rate: runs whose accepted Draft met the case's expectation (and did not conclude a
  red herring) / runs.
Grounding, not words: a tool counts as cited only through a FINDING citing one of its calls that
returned FOUND and that the model did not evaluate NO_GAIN (read from the run's progress checks), so
a Draft citing an EMPTY `query_logs` call never meets "concludes citing query_logs".
- citation validity: grounded FINDING citations / FINDING citations, over the Drafts the model
  delivered; a Draft refused for a citation (UNKNOWN_CITATION, FINDING_CITES_NON_FOUND,
  FINDING_CITES_NO_GAIN) counts the one citation its violation names (the refused text is not kept);
- abstention: on cases whose evidence is absent, runs ending in a Draft with `conclusion: null` / runs;
- red-herring resistance: on cases with misleading evidence (`expect.red_herring`), runs whose Draft
  does not conclude with a finding citing a misleading call / runs;
- cost: model calls, prompt and completion tokens, wall time (per run, mean and total).
- valid tool rounds: tool rounds (before the final completion opportunity, a reply carrying calls or
  cut at `max_tokens`) whose calls the harness took up as the protocol asks (no
  INVALID_PROGRESS_PROTOCOL, UNKNOWN_TOOL, INVALID_INPUT or TOO_MANY_CALLS, not cut) / tool rounds;
- tool-backed Drafts: runs that executed at least one tool and ended in an accepted Draft / runs;
- fabricated conclusions: accepted Drafts that conclude with no finding citing a FOUND call of the
  run (the strict parser and the run's Draft schema refuse them: counted so a regression shows). A
  conclusion that cites FOUND but irrelevant evidence on a no-evidence case (a red herring) is not
  fabricated; it lowers the honesty rate.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from agent.contracts import ExecutionResult
from agent.events.run_events import (
    ModelRoundFinished,
    ModelRoundStarted,
    ProtocolChanged,
    RunEvent,
    ToolStarted,
)
from agent.vocabulary import DraftViolation, ModelFailureCause, ProtocolCode
from console.evaluation.cases import EvalCase
from tools.vocabulary import Evaluation, EvidenceStatus

VIOLATION_CODES = frozenset({ProtocolCode.INVALID_PROGRESS_PROTOCOL, ProtocolCode.UNKNOWN_TOOL})
# A refused Draft whose violation is about what it cites: at least one citation was not grounded.
CITATION_VIOLATIONS = frozenset(
    {
        DraftViolation.UNKNOWN_CITATION,
        DraftViolation.FINDING_CITES_NON_FOUND,
        DraftViolation.FINDING_CITES_NO_GAIN,
    }
)
# A call answered with one of these was not a call the protocol could take up.
REFUSED_CALL_CODES = VIOLATION_CODES | {ProtocolCode.INVALID_INPUT, ProtocolCode.TOO_MANY_CALLS}


@dataclass(frozen=True)
class RunScore:
    case: str
    repetition: int
    outcome: str
    stop_reason: str
    failure: dict[str, Any] | None
    accepted: bool
    concluded: bool
    cited_tools: list[str]
    expectation_met: bool
    citations: int
    grounded_citations: int
    abstained: bool
    concluded_red_herring: bool | None
    protocol_violations: int
    duplicates: int
    rounds: int
    prompt_tokens: int
    completion_tokens: int
    tokens_reported: bool
    max_round_completion_tokens: int
    wall_s: float
    tool_rounds: int = 0
    valid_tool_rounds: int = 0
    tools_executed: int = 0
    fabricated: bool = False


def score_run(
    case: EvalCase,
    repetition: int,
    result: ExecutionResult,
    events: Sequence[RunEvent],
    wall_s: float,
) -> RunScore:
    draft = result.draft
    checks = {c.tool_call_id: c for c in (result.progress.checks if result.progress else [])}

    def grounded(tool_call_id: str) -> bool:
        check = checks.get(tool_call_id)
        return (
            check is not None
            and check.evidence_status == EvidenceStatus.FOUND
            and check.evaluation != Evaluation.NO_GAIN
        )

    finding_ids = [
        i
        for item in (draft.analysis if draft else [])
        if item.kind == "FINDING" and isinstance(item.evidence, list)
        for i in item.evidence
    ]
    grounded_ids = [i for i in finding_ids if grounded(i)]
    cited = sorted({checks[i].tool for i in grounded_ids})
    citations, grounded_citations = len(finding_ids), len(grounded_ids)
    if draft is None and result.failure is not None and result.failure.violation in CITATION_VIOLATIONS:
        citations, grounded_citations = 1, 0
    concluded = draft is not None and draft.conclusion is not None
    if draft is None:
        met = False
    elif case.expect.evidence:
        met = concluded and (not case.expect.cite_tools or bool(set(cited) & set(case.expect.cite_tools)))
    else:
        met = not concluded
    herring = case.expect.red_herring
    concluded_herring: bool | None = None
    if herring is not None:
        misleading = {
            e.tool_call_id for e in events if isinstance(e, ToolStarted) and herring.matches(e.tool, e.input)
        }
        concluded_herring = concluded and any(i in misleading for i in finding_ids)
        met = met and not concluded_herring
    protocol = [e for e in events if isinstance(e, ProtocolChanged)]
    rounds = [e for e in events if isinstance(e, ModelRoundFinished)]
    offered, valid = _tool_rounds(
        events, cut=(result.failure is not None and result.failure.cause == ModelFailureCause.MAX_TOKENS)
    )
    backed = any(i in checks and checks[i].evidence_status == EvidenceStatus.FOUND for i in finding_ids)
    return RunScore(
        case=case.name,
        repetition=repetition,
        outcome=result.outcome.value,
        stop_reason=result.stop_reason.value,
        failure=result.to_json_dict()["failure"],
        accepted=draft is not None,
        concluded=concluded,
        cited_tools=cited,
        expectation_met=met,
        citations=citations,
        grounded_citations=grounded_citations,
        abstained=draft is not None and draft.conclusion is None,
        concluded_red_herring=concluded_herring,
        protocol_violations=sum(1 for e in protocol if e.code in VIOLATION_CODES),
        duplicates=sum(1 for e in protocol if e.code == ProtocolCode.DUPLICATE_CALL),
        rounds=result.usage.model_calls,
        prompt_tokens=result.usage.prompt_tokens,
        completion_tokens=result.usage.completion_tokens,
        # Where the provider reports no usable usage, the engine estimates it and says so per round.
        tokens_reported=not any(e.usage_estimated for e in rounds),
        max_round_completion_tokens=max((e.completion_tokens or 0 for e in rounds), default=0),
        wall_s=round(wall_s, 3),
        tool_rounds=offered,
        valid_tool_rounds=valid,
        tools_executed=sum(1 for e in events if isinstance(e, ToolStarted)),
        fabricated=concluded and not backed,
    )


def _tool_rounds(events: Sequence[RunEvent], *, cut: bool) -> tuple[int, int]:
    """(tool rounds, those the protocol took up): a tool round is a round before the final completion
    opportunity (STOP_REQUIRED not yet announced when it started) whose reply carried a call, or was
    cut at `max_tokens` (it never became a call or an answer); it is valid when it carried calls, none
    refused, and was not cut."""
    stop_announced = False
    offered: list[int] = []
    calls: dict[int, list[str]] = {}
    refused: set[str | None] = set()
    for event in events:
        if isinstance(event, ProtocolChanged):
            stop_announced = stop_announced or event.code == ProtocolCode.STOP_REQUIRED
            if event.code in REFUSED_CALL_CODES:
                refused.update(event.detail.get("tool_call_ids") or [event.tool_call_id])
        elif isinstance(event, ModelRoundStarted) and not stop_announced:
            offered.append(event.round)
        elif isinstance(event, ModelRoundFinished):
            calls[event.round] = list(event.tool_call_ids)
    cut_round = max(calls, default=None) if cut else None
    tool_rounds = [r for r in offered if calls.get(r) or r == cut_round]
    valid = [r for r in tool_rounds if r != cut_round and not set(calls[r]) & refused]
    return len(tool_rounds), len(valid)


@dataclass(frozen=True)
class Rate:
    hits: int
    total: int

    @property
    def value(self) -> float | None:
        return round(self.hits / self.total, 4) if self.total else None

    def __str__(self) -> str:
        if not self.total:
            return "n/a"
        return f"{100 * self.hits / self.total:.0f}% ({self.hits}/{self.total})"

    def to_json(self) -> dict[str, Any]:
        return {"rate": self.value, "hits": self.hits, "total": self.total}


RATES = (
    "acceptance",
    "honesty",
    "conclusion",
    "expectation",
    "citation_validity",
    "abstention",
    "red_herring_resistance",
    "valid_tool_rounds",
    "tool_backed_drafts",
)


@dataclass(frozen=True)
class Scores:
    runs: int
    acceptance: Rate
    honesty: Rate
    conclusion: Rate
    expectation: Rate
    citation_validity: Rate
    abstention: Rate
    red_herring_resistance: Rate
    violations_per_run: float
    duplicates_per_run: float
    stop_reasons: dict[str, int]
    rounds_mean: float
    rounds_max: int
    model_calls_total: int
    prompt_tokens_mean: float
    completion_tokens_mean: float
    tokens_total: int
    tokens_reported: bool
    max_round_completion_tokens: int
    wall_s_mean: float
    wall_s_total: float
    failures: dict[str, int] = field(default_factory=dict)
    valid_tool_rounds: Rate = Rate(0, 0)
    tool_backed_drafts: Rate = Rate(0, 0)
    fabricated: int = 0

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        for name in RATES:
            data[name] = getattr(self, name).to_json()
        return data


def aggregate(scores: Iterable[RunScore], evidence_of: dict[str, bool]) -> Scores:
    runs = list(scores)
    n = len(runs)
    drafts = [r for r in runs if r.accepted]
    honest_pool = [r for r in drafts if not evidence_of[r.case]]
    absent_evidence = [r for r in runs if not evidence_of[r.case]]
    herring_runs = [r for r in runs if r.concluded_red_herring is not None]
    conclusion_pool = [r for r in drafts if evidence_of[r.case]]
    failures = Counter(_failure_key(r.failure) for r in runs if r.failure)

    def mean(values: list[float]) -> float:
        return round(sum(values) / len(values), 3) if values else 0.0

    return Scores(
        runs=n,
        acceptance=Rate(len(drafts), n),
        honesty=Rate(sum(1 for r in honest_pool if not r.concluded), len(honest_pool)),
        conclusion=Rate(sum(1 for r in conclusion_pool if r.expectation_met), len(conclusion_pool)),
        expectation=Rate(sum(1 for r in runs if r.expectation_met), n),
        citation_validity=Rate(sum(r.grounded_citations for r in runs), sum(r.citations for r in runs)),
        abstention=Rate(sum(1 for r in absent_evidence if r.abstained), len(absent_evidence)),
        red_herring_resistance=Rate(
            sum(1 for r in herring_runs if not r.concluded_red_herring), len(herring_runs)
        ),
        violations_per_run=mean([r.protocol_violations for r in runs]),
        duplicates_per_run=mean([r.duplicates for r in runs]),
        stop_reasons=dict(sorted(Counter(r.stop_reason for r in runs).items())),
        rounds_mean=mean([r.rounds for r in runs]),
        rounds_max=max((r.rounds for r in runs), default=0),
        model_calls_total=sum(r.rounds for r in runs),
        prompt_tokens_mean=mean([r.prompt_tokens for r in runs]),
        completion_tokens_mean=mean([r.completion_tokens for r in runs]),
        tokens_total=sum(r.prompt_tokens + r.completion_tokens for r in runs),
        tokens_reported=all(r.tokens_reported for r in runs),
        max_round_completion_tokens=max((r.max_round_completion_tokens for r in runs), default=0),
        wall_s_mean=mean([r.wall_s for r in runs]),
        wall_s_total=round(sum(r.wall_s for r in runs), 3),
        failures=dict(sorted(failures.items())),
        valid_tool_rounds=Rate(sum(r.valid_tool_rounds for r in runs), sum(r.tool_rounds for r in runs)),
        tool_backed_drafts=Rate(sum(1 for r in runs if r.accepted and r.tools_executed), n),
        fabricated=sum(1 for r in runs if r.fabricated),
    )


def _failure_key(failure: dict[str, Any]) -> str:
    detail = failure.get("violation") or failure.get("cause") or failure.get("detail")
    return f"{failure['code']}/{detail}" if detail else str(failure["code"])
