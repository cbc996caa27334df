"""Runbook search at scale: build, memory, a changed runbook, lookup latency, this version beside an
earlier one.

    python -m tests.benchmarks.bench_knowledge_index [--runbooks 10000] [--baseline REV] [--folder DIR]

Writes a folder of `--runbooks` Markdown runbooks in a temporary folder (deleted afterwards): the 162
public pages of tests/data/knowledge/runbooks, each copied again and again under 100 team folders with
its alert name, title and one line made unique, so the collection has the vocabulary of real runbooks
and the size of a large company's. Then, for each implementation, a fresh Python process (so one
side's memory never counts against the other) builds the adapter on that folder and measures:

- cold: the first lookup (list the folder, read and index every runbook, search), in wall-clock and
  in CPU seconds (the process's, the worker thread's included: the figure a shared machine's load
  does not inflate), and how late a 10 ms asyncio ticker ran meanwhile (the console's event loop
  while a run's first lookup indexes);
- RSS growth: the peak (`VmHWM`) and after the calls, minus the RSS before the first lookup;
- warm: the 88 questions of the retrieval test set, one lookup each, nothing changed (p50, p95, max);
- changed: one runbook rewritten, then one lookup (re-list, re-index what changed, search).

The baseline is `tools/knowledge.py` as of `--baseline` (default: the commit before tools/knowledge/,
Haystack's in-memory BM25 rebuilt on any change), taken from git into the temporary folder.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from tests.benchmarks.git_baseline import baseline_file
from tests.benchmarks.machine import MEMORY_STATUS_SOURCE, hardware
from tests.support.retrieval import RUNBOOKS, load_questions

REPO = Path(__file__).resolve().parents[2]
BASELINE = "78839eb"  # tools/knowledge.py: one Haystack BM25 store, rebuilt whenever a file changes
TEAMS = 100

CHILD = (
    MEMORY_STATUS_SOURCE
    + r"""
import asyncio, importlib, importlib.util, json, statistics, sys, time
from pathlib import Path

module_file, folder, questions = sys.argv[1], Path(sys.argv[2]), json.loads(sys.argv[3])
if module_file == "current":
    from tools.knowledge import KnowledgeAdapter
else:
    spec = importlib.util.spec_from_file_location("bench_knowledge_impl", module_file)
    impl = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = impl
    spec.loader.exec_module(impl)
    KnowledgeAdapter = impl.KnowledgeAdapter
from tools.adapter import ToolRequest
from tools.input_models import LookupKnowledgeInput


async def lookup(adapter, number, query):
    business = LookupKnowledgeInput(query=query, top_k=5)
    request = ToolRequest("bench", "s", f"c{number}", "lookup_knowledge", business)
    started = time.perf_counter()
    result = await adapter.execute(request)
    return time.perf_counter() - started, [d["source"] for d in result.data["documents"]]


async def ticker(lags, stop):
    while not stop.is_set():
        due = time.perf_counter() + 0.01
        await asyncio.sleep(0.01)
        lags.append(max(0.0, time.perf_counter() - due))


async def main():
    adapter = KnowledgeAdapter(folder)
    before = status("VmRSS")
    lags, stop = [], asyncio.Event()
    tick = asyncio.create_task(ticker(lags, stop))
    cpu = time.process_time()
    cold, _ = await lookup(adapter, 0, questions[0])
    cold_cpu = time.process_time() - cpu
    stop.set()
    await tick
    warm = [(await lookup(adapter, n, q))[0] for n, q in enumerate(questions)]
    changed_file = sorted(folder.rglob("*.md"))[len(questions)]
    changed_file.write_text(changed_file.read_text() + "\nRotate the kafka broker certificate.\n")
    changed, sources = await lookup(adapter, 999, "rotate kafka broker certificate")
    lags.sort()
    print(json.dumps({
        "cold_s": cold,
        "cold_cpu_s": cold_cpu,
        "loop_lag_max_ms": lags[-1] * 1000 if lags else None,
        "loop_lag_p99_ms": lags[int(len(lags) * 0.99)] * 1000 if lags else None,
        "ticks": len(lags),
        "peak_growth": status("VmHWM") - before,
        "after_growth": status("VmRSS") - before,
        "warm_p50_ms": statistics.median(warm) * 1000,
        "warm_p95_ms": sorted(warm)[int(len(warm) * 0.95)] * 1000,
        "warm_max_ms": max(warm) * 1000,
        "changed_s": changed,
        "changed_found": str(changed_file.relative_to(folder)) in sources,
    }))


asyncio.run(main())
"""
)


def write_collection(folder: Path, count: int) -> int:
    """`count` runbooks made from the public pages; returns their total size in bytes."""
    pages = sorted(p for p in RUNBOOKS.rglob("*.md"))
    total = 0
    for number in range(count):
        page = pages[number % len(pages)]
        copy = number // len(pages)
        text = page.read_text(encoding="utf-8")
        stem = page.stem
        unique = f"{stem}Svc{copy}"
        text = (
            text.replace(stem, unique, 2) + f"\nOwned by team-{number % TEAMS:02d}, service svc-{number}.\n"
        )
        target = folder / f"team-{number % TEAMS:02d}" / page.parent.name / f"{unique}.md"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        total += len(text.encode("utf-8"))
    return total


def measure(module: str, folder: Path, questions: list[str]) -> dict[str, Any]:
    run = subprocess.run(
        [sys.executable, "-c", CHILD, module, str(folder), json.dumps(questions, ensure_ascii=False)],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    if run.returncode != 0:
        raise SystemExit(f"child failed: {run.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(run.stdout.strip().splitlines()[-1])
    return result


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runbooks", type=int, default=10_000)
    parser.add_argument("--baseline", default=BASELINE, help="git revision of the earlier tools/knowledge.py")
    parser.add_argument("--folder", type=Path, default=None, help="where to write the runbooks (a temp dir)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-knowledge-", dir=args.folder))
    try:
        questions = [question.text for question in load_questions()]
        sides = {"before": str(baseline_file(args.baseline, "tools/knowledge.py", work)), "now": "current"}
        print(f"# {hardware()}")
        print(
            "| side | runbooks | MiB | cold (index + search): wall / CPU | event loop lag: max / p99 | "
            "peak RSS growth | RSS after | lookup p50 / p95 / max | after one change |"
        )
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for side, module in sides.items():
            folder = work / f"runbooks-{side}"  # each side writes its own change
            size = write_collection(folder, args.runbooks)
            figures = measure(module, folder, questions)
            assert figures["changed_found"], f"{side}: the changed runbook was not found"
            print(
                f"| {side} | {args.runbooks:,} | {size / 2**20:.1f} | "
                f"{figures['cold_s']:.2f} / {figures['cold_cpu_s']:.2f} s | "
                f"{figures['loop_lag_max_ms']:.0f} / {figures['loop_lag_p99_ms']:.0f} ms | "
                f"{figures['peak_growth'] / 2**20:.1f} MiB | {figures['after_growth'] / 2**20:.1f} MiB | "
                f"{figures['warm_p50_ms']:.0f} / {figures['warm_p95_ms']:.0f} / "
                f"{figures['warm_max_ms']:.0f} ms | "
                f"{figures['changed_s']:.2f} s |"
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
