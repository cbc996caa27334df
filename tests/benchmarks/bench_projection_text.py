"""What the tool boundary's Unicode check adds to every projection, beside the redaction step it follows.

    python -m tests.benchmarks.bench_projection_text [--entries 200] [--repeats 400]

Builds a `query_logs` projection of `--entries` realistic entries (and one of the same size holding a
lone surrogate, which is also repaired), then times, interleaved: `Redactor.value` on it (the step
every projection already passes) and `holds_unencodable` (the check `ToolBoundary.invoke` adds), and,
for the broken projection, `encodable_value`. Reports medians and each one's ratio to the redaction.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

from tests.benchmarks.machine import hardware
from tools.redaction import Redactor
from tools.unicode_text import encodable_value, holds_unencodable


def projection(entries: int, broken: bool = False) -> dict[str, Any]:
    rows: list[dict[str, Any]] = [
        {
            "ts": f"2026-11-30T02:{i // 60 % 60:02d}:{i % 60:02d}Z",
            "service": "payment-service",
            "level": "ERROR",
            "message": f"HikariPool-1 - Connection is not available, request timed out after 30000ms id={i}",
            "labels": {"pod": "payment-7f9c4", "region": "cn-sh", "trace_id": f"{i:032x}"},
        }
        for i in range(entries)
    ]
    if broken:
        rows[-1]["message"] += " \ud800"
    return {"entries": rows, "returned": entries, "truncated": False}


def timed(work: Callable[[], Any]) -> float:
    started = time.perf_counter()
    work()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--entries", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=400)
    args = parser.parse_args()
    clean, broken = projection(args.entries), projection(args.entries, broken=True)
    redactor = Redactor(["Zq8-vault-pass-5521"])
    samples: dict[str, list[float]] = {"redaction": [], "check": [], "check+repair (broken)": []}
    for _ in range(args.repeats):  # interleaved, so load on the machine hits every side alike
        samples["redaction"].append(timed(lambda: redactor.value(clean)))
        samples["check"].append(timed(lambda: holds_unencodable(clean)))
        samples["check+repair (broken)"].append(
            timed(lambda: holds_unencodable(broken) and encodable_value(broken))
        )
    base = statistics.median(samples["redaction"])
    print(hardware())
    print(f"{args.entries} entries, {args.repeats} interleaved repeats (medians)")
    for name, values in samples.items():
        median = statistics.median(values)
        print(f"  {name:<24} {median * 1000:8.3f} ms  {median / base:5.2f}x redaction")


if __name__ == "__main__":
    main()
