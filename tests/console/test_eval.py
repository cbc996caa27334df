"""`diagnose eval`: case files, deterministic scores, reports, and typed errors for bad cases."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.contracts import (
    AnalysisItem,
    DiagnosisDraft,
    ExecutionResult,
    Limitations,
    ProgressCheck,
    ProgressSnapshot,
    Usage,
)
from agent.vocabulary import USAGE_ERROR, Outcome, StopReason
from console.commands.main import main
from console.evaluation.cases import (
    MAX_CASE_BYTES,
    EvalCase,
    EvalCaseError,
    bundled_cases_path,
    load_case_file,
    load_cases,
)
from console.evaluation.runner import EvalRunner
from console.evaluation.scoring import score_run
from tests.support.openai_server import completion, fake_openai
from tools.vocabulary import EvidenceStatus

WINDOW = {"start": "2026-11-30T02:00:00Z", "end": "2026-11-30T03:00:00Z"}
LOGS_CALL = {
    "id": "ev-1",
    "name": "query_logs",
    "arguments": {
        "previous_observation": None,
        "input": {"service": "payment-service", **WINDOW, "level": "ERROR"},
    },
}


def draft(conclusion: str | None, evidence: list[str] | None = None) -> str:
    analysis = (
        [{"kind": "FINDING", "statement": "连接池耗尽", "evidence": evidence}]
        if evidence
        else [{"kind": "NEGATIVE_OBSERVATION", "statement": "无", "scope": "全部", "evidence": "NO_EVIDENCE"}]
    )
    return json.dumps(
        {
            "conclusion": conclusion,
            "analysis": analysis,
            "action_plan": [],
            "recommendations": [],
            "limitations": {"checked_scope": ["日志"], "missing_info": ["trace_id"]},
        },
        ensure_ascii=False,
    )


def write_case(folder: Path, name: str, body: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.yaml").write_text(body, encoding="utf-8")


def test_bundled_demo_incidents_score_deterministically_with_the_scripted_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["eval", "--repeat", "2", "--out", str(tmp_path / "out")])
    out, err = capsys.readouterr()
    assert code == 0, err
    report = json.loads((tmp_path / "out" / "report.json").read_text("utf-8"))
    overall = report["overall"]
    assert overall["runs"] == 2 * len(load_cases())
    assert overall["acceptance"] == {"rate": 1.0, "hits": overall["runs"], "total": overall["runs"]}
    assert overall["honesty"]["rate"] == 1.0
    assert overall["honesty"]["total"] > 0
    assert overall["conclusion"]["rate"] == 1.0
    assert overall["conclusion"]["total"] > 0
    assert overall["stop_reasons"] == {"COMPLETED": overall["runs"]}
    assert {c["name"] for c in report["cases"]} == {c.name for c in load_cases()}
    runs = overall["runs"]
    assert "ALL" in out
    assert f"100% ({runs}/{runs})" in out
    # Not a terminal: one plain progress line per run on stderr.
    assert err.count("expectation met") == overall["runs"]
    markdown = (tmp_path / "out" / "report.md").read_text("utf-8")
    assert f"| ALL | {runs} |" in markdown
    assert "machine:" in markdown
    assert (tmp_path / "out" / "audit.db").is_file()
    # Like every file the console writes: owner-only.
    for name in ("report.json", "report.md", "audit.db"):
        assert (tmp_path / "out" / name).stat().st_mode & 0o777 == 0o600, name


async def test_scores_against_a_model_server(tmp_path: Path) -> None:
    cases = tmp_path / "cases"
    write_case(
        cases,
        "evidence",
        "name: evidence\nquery: payment-service 02:00-03:00Z 超时\n"
        "expect: {evidence: true, cite_tools: [query_logs]}\n",
    )
    write_case(cases, "no-evidence", "name: no-evidence\nquery: 线上有问题\nexpect: {evidence: false}\n")
    replies: list[Any] = [
        # evidence #1: a tool call, then a Draft concluding on it
        completion(tool_calls=[LOGS_CALL], prompt_tokens=500, completion_tokens=40),
        completion(text=draft("连接池耗尽", ["ev-1"]), prompt_tokens=900, completion_tokens=120),
        # evidence #2: prose, not a Draft
        completion(text="The payment service is slow.", completion_tokens=7),
        # no-evidence #1: honest null Draft; #2: a null Draft too
        completion(text=draft(None)),
        completion(text=draft(None)),
    ]
    with fake_openai(replies) as srv:
        config = tmp_path / "c.toml"
        config.write_text(
            f'[model]\nprovider = "openai"\nbase_url = "{srv.url}"\nname = "m"\ntimeout_s = 5\nseed = 5\n',
            encoding="utf-8",
        )
        report = await EvalRunner(config, tmp_path / "audit.db", repeat=2).run(load_cases(cases))
    # Repetition i uses seed + i, on every round of its run.
    assert [body.get("seed") for body in srv.requests] == [5, 5, 6, 5, 6]
    overall = report.overall()
    assert str(overall.acceptance) == "75% (3/4)"
    assert str(overall.honesty) == "100% (2/2)"
    assert str(overall.conclusion) == "100% (1/1)"
    assert str(overall.expectation) == "75% (3/4)"
    assert overall.stop_reasons == {"COMPLETED": 3, "INVALID_DRAFT": 1}
    assert overall.failures == {"INVALID_DRAFT/NOT_A_JSON_OBJECT": 1}
    assert overall.max_round_completion_tokens == 120
    assert overall.tokens_reported
    evidence = report.by_case()["evidence"]
    assert (evidence.rounds_max, evidence.rounds_mean) == (2, 1.5)
    runs = {(r.case, r.repetition): r for r in report.runs}
    assert runs[("evidence", 0)].cited_tools == ["query_logs"]
    assert runs[("evidence", 1)].failure == {
        "code": "INVALID_DRAFT",
        "violation": "NOT_A_JSON_OBJECT",
        "detail": "no JSON object: the text is prose",
    }


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("name: x\nquery: q\n", "expect: Field required"),
        (
            "name: x\nquery: q\nexpect: {evidence: false, cite_tools: [query_logs]}\n",
            "cite_tools only applies",
        ),
        ("name: x\nquery: q\nexpect: {evidence: true, cite_tools: [shell]}\n", "expect.cite_tools.0"),
        ("name: x\nquery: [unclosed\n", "not valid YAML at line"),
        ("- a list\n", "a case must be a mapping"),
        ("name: '../x'\nquery: q\nexpect: {evidence: false}\n", "name:"),
        ("name: x\nquery: q\nexpect: {evidence: false}\nextra: 1\n", "extra: Extra inputs are not permitted"),
    ],
)
def test_bad_case_files_are_typed_errors_naming_the_file(tmp_path: Path, body: str, message: str) -> None:
    write_case(tmp_path, "bad", body)
    with pytest.raises(EvalCaseError, match=r"bad\.yaml") as info:
        load_cases(tmp_path)
    assert message in str(info.value)


def test_case_folder_problems_are_typed(tmp_path: Path) -> None:
    with pytest.raises(EvalCaseError, match="case folder not found"):
        load_cases(tmp_path / "missing")
    with pytest.raises(EvalCaseError, match="no case files"):
        load_cases(tmp_path)
    write_case(tmp_path, "a", "name: same\nquery: q\nexpect: {evidence: false}\n")
    write_case(tmp_path, "b", "name: same\nquery: q\nexpect: {evidence: false}\n")
    with pytest.raises(EvalCaseError, match="also used by"):
        load_cases(tmp_path)
    (tmp_path / "b.yaml").write_bytes(b"name: \xff\xfe\n")
    with pytest.raises(EvalCaseError, match="not UTF-8"):
        load_cases(tmp_path)


def test_a_case_file_is_read_bounded_and_only_if_it_is_a_regular_file(tmp_path: Path) -> None:
    """A FIFO named like a case never blocks the command, and an oversized file is never read whole."""
    os.mkfifo(tmp_path / "fifo.yaml")
    with pytest.raises(EvalCaseError, match=r"fifo\.yaml: not a regular file"):
        load_case_file(tmp_path / "fifo.yaml")
    (tmp_path / "fifo.yaml").unlink()
    (tmp_path / "huge.yaml").write_bytes(b"#" * (MAX_CASE_BYTES + 1))
    with pytest.raises(EvalCaseError, match=r"huge\.yaml is larger than"):
        load_cases(tmp_path)


def test_cli_reports_a_bad_case_without_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_case(tmp_path / "cases", "bad", "name: x\nquery: q\n")
    code = main(["eval", "--cases", str(tmp_path / "cases"), "--out", str(tmp_path / "out")])
    _, err = capsys.readouterr()
    assert code == 3
    assert "bad.yaml" in err
    assert "expect" in err
    assert "Traceback" not in err
    code = main(["eval", "--case", "nope", "--out", str(tmp_path / "out")])
    _, err = capsys.readouterr()
    assert code == 3
    assert "unknown case(s) nope" in err


def test_repeat_is_bounded(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["eval", "--repeat", "0"])
    assert info.value.code == USAGE_ERROR
    assert "between 1 and 100" in capsys.readouterr().err


async def test_stop_cancels_the_run_in_progress_and_keeps_the_finished_ones(tmp_path: Path) -> None:
    cases = tmp_path / "cases"
    slow = {
        "name": "slow",
        "query": "q",
        "rounds": [{"text": draft(None), "delay_ms": 60_000}],
    }
    (tmp_path / "slow.json").write_text(json.dumps(slow), encoding="utf-8")
    write_case(
        cases,
        "a-fast",
        "name: a-fast\nquery: q\nexpect: {evidence: false}\nscenario: missing-context-zero-tools\n",
    )
    write_case(
        cases,
        "b-slow",
        f"name: b-slow\nquery: q\nexpect: {{evidence: false}}\nscenario: {tmp_path / 'slow.json'}\n",
    )
    runner = EvalRunner(None, tmp_path / "audit.db", repeat=2)
    seen: list[tuple[str, int, Any]] = []

    def progress(index: int, total: int, case: Any, repetition: int, score: Any) -> None:
        seen.append((case.name, repetition, score))
        if case.name == "b-slow" and score is None:
            asyncio.get_running_loop().call_later(0.2, runner.stop)

    report = await asyncio.wait_for(runner.run(load_cases(cases), progress), timeout=30)
    assert report.interrupted
    assert [(r.case, r.stop_reason) for r in report.runs] == [
        ("a-fast", "COMPLETED"),
        ("a-fast", "COMPLETED"),
        ("b-slow", "CANCELLED"),
    ]
    assert report.to_json()["interrupted"] is True


# ------------------------------------------------------------------ grounding, not words
GROUNDING = bundled_cases_path() / "grounding"
# case -> (accepted, grounded/cited FINDING citations, abstained, concluded the red herring, expectation met)
GROUNDING_SCORES = {
    "citation-grounded-honest": (True, (2, 2), False, None, True),
    "citation-empty-fabricated": (False, (0, 1), False, None, False),
    "citation-invented-fabricated": (False, (0, 1), False, None, False),
    "citation-no-gain-fabricated": (False, (0, 1), False, None, False),
    "citation-no-gain-honest": (True, (1, 1), False, None, True),
    "abstention-empty-honest": (True, (0, 0), True, None, True),
    "abstention-zero-tools-honest": (True, (0, 0), True, None, True),
    "abstention-invented-fabricated": (False, (0, 0), False, None, False),
    "abstention-unrelated-fabricated": (True, (1, 1), False, None, False),
    "red-herring-honest": (True, (1, 1), False, False, True),
    "red-herring-fabricated": (True, (2, 2), False, True, False),
    "cost-wasteful": (True, (2, 2), False, None, True),
}


def scripted_cost(case: EvalCase) -> tuple[int, int]:
    """Model calls and tokens, read from the scenario file itself (not from the engine)."""
    ref = case.scenario_ref()
    assert ref is not None
    rounds = yaml.safe_load(Path(ref).read_text("utf-8"))["rounds"]
    return len(rounds), sum(r["usage"]["prompt_tokens"] + r["usage"]["completion_tokens"] for r in rounds)


async def test_grounding_cases_score_every_metric_both_ways(tmp_path: Path) -> None:
    """Twelve scripted cases, an honest and a fabricating model for each metric: a scoring bug shows as
    a wrong figure here. Cost is checked against the usage written in the scenario files."""
    cases = load_cases(GROUNDING)
    assert sorted(c.name for c in cases) == sorted(GROUNDING_SCORES)

    report = await EvalRunner(None, tmp_path / "audit.db", repeat=1).run(cases)

    scores = {
        r.case: (
            r.accepted,
            (r.grounded_citations, r.citations),
            r.abstained,
            r.concluded_red_herring,
            r.expectation_met,
        )
        for r in report.runs
    }
    assert scores == GROUNDING_SCORES
    for case in cases:
        (run,) = [r for r in report.runs if r.case == case.name]
        assert (run.rounds, run.prompt_tokens + run.completion_tokens) == scripted_cost(case), case.name
    overall = report.overall().to_json()
    assert overall["citation_validity"] == {"rate": 0.75, "hits": 9, "total": 12}
    assert overall["abstention"] == {"rate": 0.5, "hits": 2, "total": 4}
    assert overall["red_herring_resistance"] == {"rate": 0.5, "hits": 1, "total": 2}
    assert overall["expectation"] == {"rate": 0.5, "hits": 6, "total": 12}
    costs = [scripted_cost(c) for c in cases]
    assert overall["model_calls_total"] == sum(calls for calls, _ in costs)
    assert overall["tokens_total"] == sum(tokens for _, tokens in costs)
    by_case = report.by_case()
    assert by_case["cost-wasteful"].tokens_total > 1.8 * by_case["citation-grounded-honest"].tokens_total
    assert str(by_case["red-herring-fabricated"].red_herring_resistance) == "0% (0/1)"
    assert str(by_case["abstention-empty-honest"].abstention) == "100% (1/1)"


def test_a_tool_counts_as_cited_only_through_found_calls_not_judged_no_gain() -> None:
    """The scorer reads grounding from the run's checks, not from the Draft's words: even a Draft that
    reached it citing an EMPTY `query_logs` call does not meet "concludes citing query_logs"."""
    case = EvalCase(name="c", query="q", expect={"evidence": True, "cite_tools": ["query_logs"]})  # type: ignore[arg-type]

    def result(checks: list[tuple[str, str, str, str | None]]) -> ExecutionResult:
        finding = {"kind": "FINDING", "statement": "连接池耗尽", "evidence": [c[0] for c in checks]}
        return ExecutionResult.model_validate(
            {
                "run_id": "r",
                "session_id": "s",
                "outcome": Outcome.DRAFT,
                "stop_reason": StopReason.COMPLETED,
                "draft": json.loads(draft("连接池耗尽", None)) | {"analysis": [finding]},
                "progress": {
                    "checks": [
                        {"tool_call_id": i, "tool": t, "evidence_status": s, "evaluation": e}
                        for i, t, s, e in checks
                    ],
                    "stop_required": False,
                    "saturation": None,
                },
                "usage": {"model_calls": 2, "prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
                "failure": None,
            }
        )

    empty_logs = score_run(
        case,
        0,
        result([("a", "lookup_knowledge", "FOUND", "GAINED"), ("b", "query_logs", "EMPTY", None)]),
        [],
        0.0,
    )
    assert (empty_logs.cited_tools, empty_logs.expectation_met) == (["lookup_knowledge"], False)
    assert (empty_logs.grounded_citations, empty_logs.citations) == (1, 2)
    no_gain_logs = score_run(case, 0, result([("b", "query_logs", "FOUND", "NO_GAIN")]), [], 0.0)
    assert (no_gain_logs.cited_tools, no_gain_logs.expectation_met) == ([], False)
    pending_logs = score_run(case, 0, result([("b", "query_logs", "FOUND", None)]), [], 0.0)
    assert (pending_logs.cited_tools, pending_logs.expectation_met) == (["query_logs"], True)


async def test_tool_rounds_tool_backed_drafts_and_fabricated_conclusions_are_scored(tmp_path: Path) -> None:
    cases = tmp_path / "cases"
    write_case(
        cases,
        "evidence",
        "name: evidence\nquery: payment-service 02:00-03:00Z 超时\n"
        "expect: {evidence: true, cite_tools: [query_logs]}\n",
    )
    write_case(cases, "no-evidence", "name: no-evidence\nquery: 线上有问题\nexpect: {evidence: false}\n")
    invented: dict[str, Any] = {**LOGS_CALL, "id": "ev-2"}
    invented["arguments"] = {
        "previous_observation": {"tool_call_id": "x", "evaluation": "GAINED"},
        "input": {"service": "payment-service", **WINDOW, "level": "ERROR"},
    }
    cut = completion(tool_calls=[{**LOGS_CALL, "id": "ev-4"}], completion_tokens=64)
    cut["choices"][0]["finish_reason"] = "length"
    replies: list[Any] = [
        # evidence #1: a valid call, a Draft concluding on it
        completion(tool_calls=[LOGS_CALL]),
        completion(text=draft("连接池耗尽", ["ev-1"])),
        # evidence #2: a call evaluating an observation nobody asked about, then an honest null Draft
        completion(tool_calls=[invented]),
        completion(text=draft(None)),
        # no-evidence #1: a valid call, then a conclusion on what it found: a red herring (honesty
        # drops), not a fabrication (it cites FOUND evidence)
        completion(tool_calls=[{**LOGS_CALL, "id": "ev-3"}]),
        completion(text=draft("连接池耗尽", ["ev-3"])),
        # no-evidence #2: a call cut at max_tokens: never run, the run fails
        cut,
    ]
    with fake_openai(replies) as srv:
        config = tmp_path / "c.toml"
        config.write_text(
            f'[model]\nprovider = "openai"\nbase_url = "{srv.url}"\nname = "m"\ntimeout_s = 5\n'
            'request_shaping = "off"\n',
            encoding="utf-8",
        )
        report = await EvalRunner(config, tmp_path / "audit.db", repeat=2).run(load_cases(cases))
    runs = {(r.case, r.repetition): r for r in report.runs}
    assert [(r.tool_rounds, r.valid_tool_rounds, r.tools_executed, r.fabricated) for r in runs.values()] == [
        (1, 1, 1, False),
        (1, 0, 0, False),
        (1, 1, 1, False),
        (1, 0, 0, False),
    ]
    overall = report.overall()
    assert str(overall.valid_tool_rounds) == "50% (2/4)"
    assert str(overall.tool_backed_drafts) == "50% (2/4)"
    assert str(overall.honesty) == "0% (0/1)"
    assert overall.fabricated == 0
    assert report.to_json()["overall"]["valid_tool_rounds"] == {"rate": 0.5, "hits": 2, "total": 4}
    assert report.to_json()["settings"]["request_shaping"] == "off"


def test_a_conclusion_without_found_evidence_counts_as_fabricated() -> None:
    """The engine never accepts one (the parser refuses it); the score must still see one if it did."""
    case = load_cases(only=["payment-timeout"])[0]
    checks = [
        ProgressCheck(
            tool_call_id="c-1", tool="query_logs", evidence_status=EvidenceStatus.EMPTY, evaluation=None
        )
    ]
    unbacked = DiagnosisDraft.model_construct(
        conclusion="连接池耗尽",
        analysis=[AnalysisItem.model_construct(kind="FINDING", statement="连接池耗尽", evidence=["c-1"])],
        action_plan=[],
        recommendations=[],
        limitations=Limitations(checked_scope=[], missing_info=[]),
    )
    result = ExecutionResult(
        run_id="r",
        session_id="s",
        outcome=Outcome.DRAFT,
        stop_reason=StopReason.COMPLETED,
        draft=unbacked,
        progress=ProgressSnapshot(checks=checks, stop_required=False, saturation=None),
        usage=Usage(model_calls=2, prompt_tokens=1, completion_tokens=1, total_tokens=2),
        failure=None,
    )
    assert score_run(case, 0, result, [], 0.1).fabricated
    backed = result.model_copy(
        update={
            "progress": ProgressSnapshot(
                checks=[checks[0].model_copy(update={"evidence_status": EvidenceStatus.FOUND})],
                stop_required=False,
                saturation=None,
            )
        }
    )
    assert not score_run(case, 0, backed, [], 0.1).fabricated
