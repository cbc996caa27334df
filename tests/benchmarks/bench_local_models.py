"""Both PyPI-shipped models behind llama-server, with and without request shaping: the trainer eval.

    python -m tests.benchmarks.bench_local_models [--llama-server PATH] [--out DIR] [--repeat N]

Starts each model with `diagnose demo model-server` (so the server, the template and the model are
exactly what a trainer gets), then runs `diagnose eval` over the bundled cases with the tools budget
(`max_model_calls = 2`: one round where a tool may be called, then the final opportunity) once per
request shaping policy (`llama.cpp`, `off`), one run at a time, and prints per model and policy: valid
tool rounds, runs that executed a tool and ended in an accepted Draft, accepted Drafts, fabricated
conclusions, rounds, tokens and wall time per run (mean and max), with the load average before and
after each eval next to them. The reports (`report.md`, `report.json`, `audit.db`) stay in `--out`.
Run it on a quiet machine: a busy one slows generation several times over.

Must show (the trainer scenario): with shaping, at least 6 of 8 runs per model execute a tool and end
in an accepted Draft, no fabricated conclusion, no round over `max_tokens`, every run under 180 s.
Exit 1 if a shaped eval misses one of these. Also printed, not judged (it is the model's choice): on
the case without context (`vague-query`), whether the run stopped at once (no tool executed, an
accepted `conclusion: null`), and the lengths of the accepted Drafts' statements and missing-info
entries (read from the eval's audit), with how many Drafts reached a bound of the schema they were
held to (`bounds_reached`).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.benchmarks.machine import hardware

MODELS = {"smollm2": 18251, "gemma3": 18252}
POLICIES = ("llama.cpp", "off")
MAX_RUN_S = 180
NO_CONTEXT_CASE = "vague-query"


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main() -> int:
    signal.signal(signal.SIGTERM, _interrupt)  # a TERM still stops the servers (the `finally` below)
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--llama-server", help="an existing llama-server (else PATH, else it is built)")
    parser.add_argument("--out", type=Path, default=Path("bench-local-models"))
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--cache", type=Path, help="the model server's cache folder")
    parser.add_argument("--policy", action="append", choices=POLICIES, help="only these (default: both)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    print(f"machine: {hardware()}")
    failed = False
    for model, port in MODELS.items():
        server, block = _start(model, port, args)
        try:
            for policy in args.policy or POLICIES:
                config = args.out / f"{model}-{policy}.toml"
                config.write_text(_tools_budget(block, policy), encoding="utf-8")
                before = _load()
                report_dir = args.out / f"{model}-{policy}"
                command = [sys.executable, "-m", "console", "eval", "--config", str(config)]
                command += ["--out", str(report_dir), "--repeat", str(args.repeat)]
                subprocess.run(command, check=False, stdout=subprocess.DEVNULL)
                report = json.loads((report_dir / "report.json").read_text("utf-8"))
                failed |= _print(model, policy, report, before, _load()) and policy == "llama.cpp"
                print(f"{'':18} {_drafts(report_dir / 'audit.db', report)}")
        finally:
            server.terminate()
            server.wait(timeout=30)
    return 1 if failed else 0


def _start(model: str, port: int, args: argparse.Namespace) -> tuple[subprocess.Popen[str], str]:
    command = [sys.executable, "-m", "console", "demo", "model-server", "--model", model, "--port", str(port)]
    if args.llama_server:
        command += ["--llama-server", args.llama_server]
    if args.cache:
        command += ["--cache", str(args.cache)]
    server = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    assert server.stdout is not None
    lines: list[str] = []
    while not lines or not lines[-1].startswith("deadline_s"):  # the printed block's last line
        line = server.stdout.readline()
        if not line:
            raise SystemExit(f"diagnose demo model-server --model {model} failed (exit {server.wait()})")
        lines.append(line)
    return server, "".join(lines)


def _tools_budget(block: str, policy: str) -> str:
    """The printed block with the tools budget and the policy under test."""
    out = []
    for line in block.splitlines():
        if line.startswith("request_shaping"):
            line = f'request_shaping = "{policy}"'
        elif line.startswith("max_model_calls"):
            line = "max_model_calls = 2"
        out.append(line)
    return "\n".join(out) + "\n"


def _print(model: str, policy: str, report: dict[str, Any], before: str, after: str) -> bool:
    """One line of figures; True when the shaped must-show is missed."""
    overall, runs = report["overall"], report["runs"]
    walls = [r["wall_s"] for r in runs]
    limit = report["settings"]["max_tokens"]
    print(
        f"{model:8} {policy:9} valid tool rounds {_rate(overall['valid_tool_rounds'])}; "
        f"tool+draft {_rate(overall['tool_backed_drafts'])}; accepted {_rate(overall['acceptance'])}; "
        f"fabricated {overall['fabricated']}; rounds {overall['rounds_mean']:.1f}; "
        f"tokens {overall['prompt_tokens_mean']:.0f}+{overall['completion_tokens_mean']:.0f}; "
        f"largest round {overall['max_round_completion_tokens']}/{limit}; "
        f"wall s {sum(walls) / max(len(walls), 1):.1f} mean, {max(walls, default=0):.1f} max; "
        f"stops {overall['stop_reasons']}; load {before} -> {after}"
    )
    backed = overall["tool_backed_drafts"]
    return (
        backed["hits"] < 0.75 * backed["total"]
        or overall["fabricated"] > 0
        or overall["max_round_completion_tokens"] >= limit
        or max(walls, default=0) >= MAX_RUN_S
    )


def _drafts(audit: Path, report: dict[str, Any]) -> str:
    """The no-context stop and what the accepted Drafts say: lengths in characters, bounds reached."""
    stops = [r for r in report["runs"] if r["case"] == NO_CONTEXT_CASE]
    stopped = sum(1 for r in stops if r["accepted"] and r["abstained"] and r["tools_executed"] == 0)
    calls = [r["tools_executed"] for r in stops]
    claims: list[int] = []
    notes: list[int] = []
    reached = drafts = 0
    with sqlite3.connect(f"file:{audit}?mode=ro", uri=True) as db:
        for (text,) in db.execute("SELECT result_json FROM runs WHERE result_json IS NOT NULL"):
            result = json.loads(text)
            draft = result.get("draft")
            if draft is None:
                continue
            drafts += 1
            reached += bool(result.get("bounds_reached"))
            claims += [len(item["statement"]) for item in draft["analysis"]]
            notes += [len(entry) for entry in draft["limitations"]["missing_info"]]
    return (
        f"no-context stop {stopped}/{len(stops)} (tools executed {calls}); "
        f"statements {_spread(claims)} chars; missing_info {_spread(notes)} chars; "
        f"bounds reached in {reached}/{drafts} Drafts"
    )


def _spread(values: list[int]) -> str:
    if not values:
        return "none"
    return f"{len(values)} x median {statistics.median(values):g} ({min(values)}-{max(values)})"


def _rate(rate: dict[str, Any]) -> str:
    return f"{rate['hits']}/{rate['total']}"


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


if __name__ == "__main__":
    started = time.perf_counter()
    code = main()
    print(f"total {time.perf_counter() - started:.0f} s")
    sys.exit(code)
