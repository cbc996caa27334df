"""Redaction: what the corpus shows and what a string costs, the shipped rules against a baseline.

    python -m tests.benchmarks.bench_redaction [--baseline FILE] [--rounds 9] [--loads 10]

`--baseline FILE` loads another version of `tools/redaction.py` as a module of its own (e.g. the one
before a change: `git show main:tools/redaction.py > /tmp/redaction_before.py`), so both sides are
measured in one process, interleaved, on the same machine state.

Corpus (tests/support/redaction_corpus.py): credential shapes fully redacted in plain text, in a JSON
log line and as a dict value, and ordinary lines changed (tests/security/test_redaction_corpus.py
asserts the same in more places, for the shipped rules only).

Cost: CPU time (`process_time`) per string of `Redactor.text` with its result cache bypassed (the
per-string work an uncached string pays), over (a) the ordinary lines, (b) the shape lines, (c) short
event strings (IDs, statuses, tool names, timestamps, counters), as medians of `--rounds` interleaved
rounds; and the one-off cost of loading the rules (a fresh interpreter importing the module and
redacting one string, wall time, median of `--loads` alternating starts).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

from tests.benchmarks.machine import hardware
from tests.support.redaction_corpus import SHAPES, ordinary_lines

REPO = Path(__file__).resolve().parents[2]
EVENT_STRINGS = [
    "call-r3-1", "FOUND", "EMPTY", "lookup_knowledge", "query_logs", "query_mysql", "2026-11-30T02:10:03Z",
    "01JDQ3S4V5W6X7Y8Z9A0B1C2D3", "GAINED", "NO_GAIN", "payment-service", "ERROR", "TIMEOUT", "812",
    "tool_finished", "budget_changed", "model_round_finished", "DRAFT", "COMPLETED", "ORD-2026-000123",
]  # fmt: skip


def load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec
    assert spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def corpus_figures(module: ModuleType) -> dict[str, str]:
    redact = module.NOOP.text
    lines = ordinary_lines()

    def leaked(output: str, secrets: tuple[str, ...]) -> bool:
        spellings = {s for secret in secrets for s in (secret, json.dumps(secret, ensure_ascii=False)[1:-1])}
        return any(s in output for s in spellings)

    text = sum(not leaked(redact(s.text), s.secrets) for s in SHAPES)
    as_json = sum(
        not leaked(redact(json.dumps({"message": s.text}, ensure_ascii=False)), s.secrets) for s in SHAPES
    )
    as_value = sum(
        not leaked(json.dumps(module.NOOP.value({"message": s.text}), ensure_ascii=False), s.secrets)
        for s in SHAPES
    )
    changed = sum(redact(line) != line for line in lines)
    as_lines = [json.dumps({"message": line}, ensure_ascii=False) for line in lines]
    changed_json = sum(redact(line) != line for line in as_lines)
    n = len(SHAPES)
    return {
        "shapes redacted, text": f"{text}/{n}",
        "shapes redacted, JSON line": f"{as_json}/{n}",
        "shapes redacted, dict value": f"{as_value}/{n}",
        "ordinary lines changed, text": f"{changed}/{len(lines)}",
        "ordinary lines changed, JSON line": f"{changed_json}/{len(lines)}",
    }


def per_string_us(module: ModuleType, texts: list[str]) -> float:
    redactor = module.Redactor(["some-configured-secret"])
    uncached = redactor._redact_text  # the work an uncached string pays
    started = time.process_time()
    for text in texts:
        uncached(text)
    return (time.process_time() - started) / len(texts) * 1e6


def load_seconds(path: Path) -> float:
    code = (
        "import importlib.util, sys, time\n"
        "started = time.perf_counter()\n"
        f"spec = importlib.util.spec_from_file_location('bench_redaction_load', {str(path)!r})\n"
        "module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module)\n"
        "module.NOOP.text('password=hunter2 user=app')\n"
        "print(time.perf_counter() - started)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    return float(done.stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", type=Path, help="another tools/redaction.py to compare with")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--loads", type=int, default=10)
    args = parser.parse_args()

    sides = {"shipped": REPO / "tools" / "redaction.py"}
    if args.baseline:
        sides = {"baseline": args.baseline.resolve(), **sides}
    modules = {name: load(path, f"bench_redaction_{name}") for name, path in sides.items()}
    print(hardware())

    print("\ncorpus:", f"{len(SHAPES)} shapes, {len(ordinary_lines())} ordinary lines")
    figures = {name: corpus_figures(module) for name, module in modules.items()}
    for key in next(iter(figures.values())):
        print(f"  {key:36}", "  ".join(f"{name} {figures[name][key]:>8}" for name in modules))

    sets = {
        "ordinary lines": ordinary_lines(),
        "shape lines": [shape.text for shape in SHAPES],
        "event strings": EVENT_STRINGS * 10,
    }
    print(f"\nCPU per string, uncached (median of {args.rounds} interleaved rounds):")
    for label, texts in sets.items():
        times: dict[str, list[float]] = {name: [] for name in modules}
        for _ in range(args.rounds):
            for name, module in modules.items():
                times[name].append(per_string_us(module, texts))
        medians = {name: statistics.median(values) for name, values in times.items()}
        row = "  ".join(f"{name} {value:7.1f} µs" for name, value in medians.items())
        ratio = f"  ratio {medians['shipped'] / medians['baseline']:.2f}x" if "baseline" in medians else ""
        print(f"  {label:16} {row}{ratio}")

    print(f"\nloading the rules and redacting one string, fresh interpreter (median of {args.loads}):")
    loads: dict[str, list[float]] = {name: [] for name in sides}
    for _ in range(args.loads):
        for name, path in sides.items():
            loads[name].append(load_seconds(path))
    medians = {name: statistics.median(values) * 1e3 for name, values in loads.items()}
    print("  " + "  ".join(f"{name} {value:6.1f} ms" for name, value in medians.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
