"""What each part of the runbook search buys: the retrieval test set scored step by step.

    python -m tests.benchmarks.bench_knowledge_retrieval [--baseline REV]

Scores the 88 questions of tests/data/knowledge (hit@1, hit@3, MRR@5; all, English, Chinese; see
tests/support/retrieval.py) against the 162 public runbooks there, for:

0. the earlier `tools/knowledge.py` (`--baseline`, Haystack's BM25 over one text with the title
   repeated, whole words, CJK bigrams), taken from git;
1. tools/knowledge/ with compounds split but no stemming, one weight for every field, landing pages
   not scaled down and no glossary;
2. + Snowball stemming;
3. + field weights (BM25F: title, front matter and file name, headings above body);
4. + landing pages and tables of contents scaled down;
5. + the bilingual glossary: the code as shipped;

then the shipped code with one part switched off at a time (what each part adds to all the others).

Each step is the shipped code with the later parts switched off by patching their constants, so the
differences are what each part adds on top of the ones before it. Then what the glossary costs.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import tools.knowledge.index as knowledge_index
import tools.knowledge.terms as knowledge_terms
from tests.benchmarks.git_baseline import baseline_file
from tests.benchmarks.machine import hardware
from tests.support.retrieval import RUNBOOKS, Question, Scores, load_questions, ranks, scores
from tools.knowledge import KnowledgeAdapter
from tools.knowledge.glossary import Glossary, bundled_glossary_path

BASELINE = "78839eb"
NO_GLOSSARY = Glossary.parse("")


def baseline_adapter(revision: str, folder: Path) -> Any:
    path = baseline_file(revision, "tools/knowledge.py", folder)
    spec = importlib.util.spec_from_file_location("bench_knowledge_baseline", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module.KnowledgeAdapter(RUNBOOKS)


def measured(adapter: Any, questions: list[Question]) -> dict[str, Scores]:
    found = asyncio.run(ranks(adapter, questions))
    pairs = list(zip(found, questions, strict=True))
    return {
        "all": scores(found),
        "English": scores([rank for rank, q in pairs if not q.chinese]),
        "Chinese": scores([rank for rank, q in pairs if q.chinese]),
    }


def step(stemming: bool, weights: bool, landing: bool, splitting: bool = True) -> Callable[[], None]:
    """Switch the shipped code's parts on or off (the chunk cache holds terms made the other way)."""

    def apply() -> None:
        knowledge_terms._chunk_cache.clear()
        knowledge_terms._stem = STEM if stemming else (lambda word: word)
        knowledge_terms._words = (
            WORDS if splitting else (lambda chunk: [knowledge_terms._stem(chunk.lower())])
        )
        knowledge_index.FIELD_WEIGHTS = WEIGHTS if weights else (1.0,) * 4
        knowledge_index.FIELD_B = FIELD_B if weights else (0.75,) * 4
        knowledge_index.LISTING_PAGE_FACTOR = LISTING if landing else 1.0

    return apply


STEM, WORDS = knowledge_terms._stem, knowledge_terms._words
WEIGHTS, FIELD_B = knowledge_index.FIELD_WEIGHTS, knowledge_index.FIELD_B
LISTING = knowledge_index.LISTING_PAGE_FACTOR


def glossary_costs() -> str:
    tracemalloc.start()
    started = time.perf_counter()
    glossary = Glossary.parse(bundled_glossary_path().read_text(encoding="utf-8"))
    load_s = time.perf_counter() - started
    memory = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    questions = [q.text for q in load_questions()]
    started = time.perf_counter()
    for question in questions:
        glossary.expansions(question)
    per_query = (time.perf_counter() - started) / len(questions)
    size = bundled_glossary_path().stat().st_size
    return (
        f"glossary: {len(glossary.entries)} entries, {size / 1024:.1f} KiB file, parsed in "
        f"{load_s * 1000:.0f} ms, {memory / 1024:.0f} KiB in memory, {per_query * 1e6:.0f} µs per query"
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--baseline", default=BASELINE, help="git revision of the earlier tools/knowledge.py")
    args = parser.parse_args()
    questions = load_questions()
    print(f"# {hardware()}")
    print("| step | all: hit@1 / hit@3 / MRR | English | Chinese |")
    print("|---|---|---|---|")

    def row(label: str, result: dict[str, Scores]) -> None:
        cells = [f"{s.hit_at_1:.1%} / {s.hit_at_3:.1%} / {s.mrr:.3f}" for s in result.values()]
        print(f"| {label} | " + " | ".join(cells) + " |")

    with tempfile.TemporaryDirectory() as folder:
        row("0. before", measured(baseline_adapter(args.baseline, Path(folder)), questions))
    steps = [
        ("1. compounds split", step(stemming=False, weights=False, landing=False), NO_GLOSSARY),
        ("2. + stemming", step(stemming=True, weights=False, landing=False), NO_GLOSSARY),
        ("3. + field weights (BM25F)", step(stemming=True, weights=True, landing=False), NO_GLOSSARY),
        ("4. + landing pages scaled down", step(stemming=True, weights=True, landing=True), NO_GLOSSARY),
        ("5. + glossary (shipped)", step(stemming=True, weights=True, landing=True), None),
    ]
    without = [
        ("shipped without splitting", step(stemming=True, weights=True, landing=True, splitting=False)),
        ("shipped without stemming", step(stemming=False, weights=True, landing=True)),
        ("shipped without field weights", step(stemming=True, weights=False, landing=True)),
        ("shipped without landing-page scaling", step(stemming=True, weights=True, landing=False)),
    ]
    for label, apply, glossary in [*steps, *((label, apply, None) for label, apply in without)]:
        apply()
        row(label, measured(KnowledgeAdapter(RUNBOOKS, glossary=glossary), questions))
    print(glossary_costs())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
