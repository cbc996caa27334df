"""What sending runs as traces costs a run, and what a dead endpoint costs: measured side by side.

    python -m tests.benchmarks.bench_traces [--runs 30] [--processes 5] [--scenario NAME]

Four variants of the same scripted run (`--scenario`, default evidence-backed-diagnosis: four model
rounds, three tools), each in a run environment of its own with its own audit file:

- off: no trace (the default);
- live: traces sent to a local OTLP/HTTP receiver (tests/support/otlp.py) that decodes every request;
- refused: traces sent to a port nobody listens on;
- black hole: traces sent to a listener that accepts connections and never answers.

In process, the runs alternate between the variants (drift hits all alike) and the median time from
`execute()` to its result is reported, with each variant's ratio to "off"; then each environment is
closed, and the time its close waited for the endpoint (`[telemetry.traces] flush_timeout_s`, 1 s by
default) is reported. As processes, `diagnose run` is started `--processes` times per variant
(alternating): the median time until its result was printed, until it exited, and the wait between
(the close: the result is printed before it waits, so that wait is the most a dead endpoint adds to a
script waiting for the command).
Informational: exit status 0 unless a run fails.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

from console.wiring import RunEnvironment, open_run_environment
from tests.benchmarks.machine import hardware
from tests.support.otlp import BlackHole, OtlpReceiver, refused_endpoint

REPO = Path(__file__).resolve().parents[2]
VARIANTS = ("off", "live", "refused", "black hole")


async def _timed_run(env: RunEnvironment) -> float:
    assert env.scenario is not None
    use_case = env.use_case()
    started = time.perf_counter()
    result = await use_case.execute(env.scenario.query)
    elapsed = time.perf_counter() - started
    if result.outcome != "DRAFT":
        raise SystemExit(f"unexpected outcome {result.outcome}")
    return elapsed


def _process_seconds(scenario: str, audit_db: Path, endpoint: str | None) -> tuple[float, float]:
    """`diagnose run` as a process: seconds until its result's last line arrived, and until it exited."""
    argv = [sys.executable, "-m", "console", "run", "--scenario", scenario, "--audit-db", str(audit_db)]
    if endpoint is not None:
        argv += ["--trace-endpoint", endpoint]
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
    assert proc.stdout is not None
    printed = started
    for _ in proc.stdout:
        printed = time.perf_counter()
    _, err = proc.communicate()
    exited = time.perf_counter()
    if proc.returncode != 0 or err:
        raise SystemExit(f"diagnose run failed ({proc.returncode}): {err}")
    return printed - started, exited - started


def main() -> int:
    quiet = logging.getLogger("opentelemetry")  # the dead endpoints' export errors are expected
    quiet.addHandler(logging.NullHandler())
    quiet.propagate = False
    parser = argparse.ArgumentParser(prog="python -m tests.benchmarks.bench_traces")
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--processes", type=int, default=5)
    parser.add_argument("--scenario", default="evidence-backed-diagnosis")
    args = parser.parse_args()

    with ExitStack() as stack, tempfile.TemporaryDirectory() as folder:
        receiver = stack.enter_context(OtlpReceiver())
        hole = stack.enter_context(BlackHole())
        endpoints = {
            "off": None,
            "live": receiver.endpoint,
            "refused": refused_endpoint(),
            "black hole": hole.endpoint,
        }
        envs = {
            name: open_run_environment(
                scenario=args.scenario, audit_db=Path(folder) / f"{n}.db", trace_endpoint=endpoints[name]
            )
            for n, name in enumerate(VARIANTS)
        }
        seconds: dict[str, list[float]] = {name: [] for name in VARIANTS}

        async def measure() -> None:
            for name in VARIANTS:  # warm-up: imports, indexes, first connections
                await _timed_run(envs[name])
            for _ in range(args.runs):
                for name in VARIANTS:
                    seconds[name].append(await _timed_run(envs[name]))

        asyncio.run(measure())
        closing: dict[str, float] = {}
        for name, env in envs.items():
            started = time.perf_counter()
            asyncio.run(env.aclose())
            closing[name] = time.perf_counter() - started
        spans = len(receiver.spans())

        processes: dict[str, list[tuple[float, float]]] = {name: [] for name in VARIANTS}
        for n in range(args.processes):
            for name in VARIANTS:
                audit_db = Path(folder) / f"process-{n}.db"
                processes[name].append(_process_seconds(args.scenario, audit_db, endpoints[name]))

    median = {name: statistics.median(values) * 1000 for name, values in seconds.items()}
    print(f"{hardware()}; scenario {args.scenario}, {args.runs} runs per variant in process")
    print(f"  the live receiver got {spans} spans")
    print("  time to the result (median run), ratio to off, then the environment's close:")
    for name in VARIANTS:
        print(
            f"    {name:<11} {median[name]:8.1f} ms   x{median[name] / median['off']:.2f}"
            f"   close {closing[name] * 1000:7.1f} ms"
        )
    print(
        f"  diagnose run as a process (median of {args.processes}): result printed, exited, the wait between"
    )
    for name in VARIANTS:
        printed = statistics.median(p for p, _ in processes[name])
        exited = statistics.median(e for _, e in processes[name])
        waited = statistics.median(e - p for p, e in processes[name])
        print(f"    {name:<11} {printed:6.2f} s   {exited:6.2f} s   {waited * 1000:7.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
