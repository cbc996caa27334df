"""Harness overhead: the full diagnosis harness against a bare Haystack Agent on the same investigation.

    python -m tests.benchmarks.bench_harness [--rounds 16 100 300] [--repeats 60] [--warmup 5] [--breakdown]
                                             [--floor]

Both sides replay the same scripted investigation with `ScriptedChatGenerator`: `--rounds` model rounds
with one `lookup_knowledge` call each (distinct queries, so never DUPLICATE_CALL; every round after the
first evaluates the previous FOUND as GAINED), then one round with the final Draft. The tool answers a
small FOUND projection immediately from memory on both sides.

- harness: `DiagnosisUseCase` (budgets, progress protocol, before_tool interception, ToolBoundary with
  envelope validation and redaction, run events) with the SQLite `AuditSink` on a temporary file, as the
  CLI wires it.
- bare: a Haystack `Agent` with the same generator and the same tool as a plain async Haystack `Tool`
  (`async_function`, awaited by Haystack 3.4's ToolInvoker), no hooks.

- floor (`--floor`, informational): only the work the contracts require of every tool round, nothing
  else: the envelope check and business-input validation of the call, then one durable commit of its
  STARTED invocation row through `AuditSink` (WAL, synchronous=NORMAL), plus the run's own start and
  finish commits. No model, no hooks, no tool. The harness cannot beat `bare + floor`, so this says
  how close to the bare Agent any harness keeping the audit's durability guarantee can get.

Runs are interleaved (harness, bare, harness, bare, ...) in one event loop, for each round count of the
sweep (16, 100, 300 by default; a fresh audit file per count). Reported: medians, the ratio at the first
count (target: within 1.3x), the harness overhead per tool round at every count (target: at most
0.5 ms) and the per-round slope of both sides between the shortest and the longest run (target: the
overhead per round stays flat). Exit status 1 if any target is missed.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import agent.use_case as use_case_module
from agent.run_events import RunFinished, RunStarted, ToolStarted
from agent.scripted import ScriptedChatGenerator
from agent.settings import load_settings
from agent.use_case import DiagnosisUseCase
from agent.vocabulary import Outcome, StopReason
from audit import AuditSink, AuditStore
from tests.benchmarks.machine import hardware
from tests.support.long_runs import knowledge_rounds
from tools.adapter import AdapterResult, ToolRequest
from tools.boundary import ToolBoundary
from tools.definitions import DESCRIPTIONS, ENVELOPE_KEYS, ToolName
from tools.input_models import envelope_schema
from tools.redaction import Redactor
from tools.vocabulary import EvidenceStatus

TARGET_RATIO = 1.3
TARGET_OVERHEAD_MS = 0.5  # harness overhead per tool round, at every count of the sweep
SWEEP = (16, 100, 300)
# "Flat": the overhead per round at the longest run is at most this multiple of the shortest's, plus a
# slack for the noise of a shared machine.
FLAT_TOLERANCE = 1.25
FLAT_SLACK_MS = 0.05
QUERY = "payment-service 02:10Z 起超时，支付回调大量失败"
PROJECTION: dict[str, Any] = {
    "documents": [
        {
            "title": "支付超时与连接池耗尽",
            "source": "payment-timeouts.md",
            "snippet": "HikariPool-1 - Connection is not available; check the pool size and lock waits.",
            "score": 4.2,
        }
    ],
    "returned": 1,
}


class InstantKnowledge:
    """The in-process adapter of the harness side: a small FOUND projection, no I/O."""

    async def execute(self, request: ToolRequest) -> AdapterResult:
        return AdapterResult(EvidenceStatus.FOUND, PROJECTION)


async def bare_lookup(previous_observation: Any = None, input: Any = None) -> str:
    """The bare side's tool: the same tiny work (answer the projection as JSON text)."""
    return json.dumps(PROJECTION, ensure_ascii=False)


class _Passthrough(Redactor):
    """Attribution only (--breakdown): a redactor that does nothing, to price the redaction step."""

    def text(self, value: str) -> str:
        return value

    def value(self, obj: Any) -> Any:
        return obj


_cached_tools = functools.cache(use_case_module.frozen_tools)


class HarnessSide:
    """The use case as the CLI wires it; the keyword switches exist only to attribute the overhead."""

    def __init__(
        self,
        tool_rounds: int,
        audit_path: Path,
        *,
        audit: bool = True,
        redaction: bool = True,
        reuse_tools: bool = False,
    ) -> None:
        limit = tool_rounds + 4  # STOP_REQUIRED comes only when one call remains: never within the script
        self.settings = load_settings(
            None,
            overrides={
                "budget": {
                    "max_model_calls": limit,
                    "max_total_tokens": 10_000_000,
                    "deadline_s": 600,
                    "max_run_bytes": 100_000_000,
                    "max_tool_calls_per_run": tool_rounds,  # one call per round: none is refused
                },
                "protocol": {"max_consecutive_no_gain": 100, "max_protocol_violations": 100},
            },
        )
        self.rounds = knowledge_rounds(tool_rounds)
        # The configured-secret layer is exercised too, as it is when a DSN password or API key is set.
        self.redactor = Redactor(["bench-secret-value-123"]) if redaction else _Passthrough()
        self.store = AuditStore(audit_path)
        self.audit = audit
        self.reuse_tools = reuse_tools
        self.boundary = ToolBoundary({ToolName.LOOKUP_KNOWLEDGE: InstantKnowledge()}, redactor=self.redactor)

    async def run_once(self) -> str:
        use_case = DiagnosisUseCase(
            self.settings,
            ScriptedChatGenerator(self.rounds),
            self.boundary,
            model_label="scripted: bench",
            required_sinks=[AuditSink(self.store)] if self.audit else [],
            redactor=self.redactor,
        )
        original = use_case_module.frozen_tools
        if self.reuse_tools:
            use_case_module.frozen_tools = _cached_tools
        try:
            result = await use_case.execute(QUERY)
        finally:
            use_case_module.frozen_tools = original
        return f"{result.outcome.value}/{result.stop_reason.value}"

    def close(self) -> None:
        self.store.close()


class BareSide:
    def __init__(self, tool_rounds: int) -> None:
        from haystack.tools.tool import Tool

        self.rounds = knowledge_rounds(tool_rounds)
        self.max_steps = tool_rounds + 4
        self.tools = [
            Tool(
                name=ToolName.LOOKUP_KNOWLEDGE,
                description=DESCRIPTIONS[ToolName.LOOKUP_KNOWLEDGE],
                parameters=envelope_schema(ToolName.LOOKUP_KNOWLEDGE),
                async_function=bare_lookup,
            )
        ]

    async def run_once(self) -> str:
        from haystack.components.agents import Agent
        from haystack.dataclasses import ChatMessage

        # A new Agent per run, as the harness builds one per run.
        agent = Agent(
            chat_generator=ScriptedChatGenerator(self.rounds),
            tools=self.tools,
            exit_conditions=["text"],
            max_agent_steps=self.max_steps,
        )
        messages = [ChatMessage.from_system("你是诊断助手。"), ChatMessage.from_user(QUERY)]
        output = await agent.run_async(messages=messages)
        last = output["messages"][-1]
        return "DRAFT/COMPLETED" if last.text else "NO_TEXT"

    def close(self) -> None:
        pass


class FloorSide:
    """The contracts' minimum per tool round (see the module docstring), on the script's own calls."""

    def __init__(self, tool_rounds: int, audit_path: Path) -> None:
        self.calls = [call for round_ in knowledge_rounds(tool_rounds) for call in round_.tool_calls]
        self.store = AuditStore(audit_path)
        self.sink = AuditSink(self.store)
        self.runs = 0

    async def run_once(self) -> str:
        self.runs += 1
        run_id, seq = f"floor-{self.runs}", iter(range(1, 1_000_000))
        at = "2026-01-01T00:00:00.000000Z"
        self.sink(RunStarted(run_id, "floor", next(seq), at, query=QUERY, previous_turn=None, model=None))
        for round_, call in enumerate(self.calls, start=1):
            envelope = call.arguments
            if "input" not in envelope or not set(envelope) <= ENVELOPE_KEYS:
                raise SystemExit("floor: the script's envelope is invalid")
            ToolBoundary.validate_input(call.name, envelope["input"])
            self.sink(
                ToolStarted(
                    run_id,
                    "floor",
                    next(seq),
                    at,
                    round=round_,
                    tool_call_id=call.id or f"call-{round_}",
                    tool=call.name,
                    input=envelope["input"],
                )
            )
        finished = RunFinished(
            run_id, "floor", next(seq), at, outcome=Outcome.DRAFT, stop_reason=StopReason.COMPLETED, result={}
        )
        self.sink(finished)
        return "DRAFT/COMPLETED"

    def close(self) -> None:
        self.store.close()


Side = HarnessSide | BareSide | FloorSide


async def interleaved(sides: dict[str, Side], repeats: int, warmup: int) -> dict[str, list[float]]:
    """Round-robin over the sides (ABAB...), so drift (CPU frequency, page cache, audit growth) hits all."""
    for name, side in sides.items():
        outcome = await side.run_once()
        if outcome != "DRAFT/COMPLETED":
            raise SystemExit(f"{name} did not complete the script: {outcome}")
    for _ in range(warmup):
        for side in sides.values():
            await side.run_once()
    samples: dict[str, list[float]] = {name: [] for name in sides}
    for _ in range(repeats):
        for name, side in sides.items():
            t0 = time.perf_counter()
            await side.run_once()
            samples[name].append(time.perf_counter() - t0)
    return samples


def build_sides(tool_rounds: int, folder: Path, breakdown: bool, floor: bool = False) -> dict[str, Side]:
    sides: dict[str, Side] = {
        "harness": HarnessSide(tool_rounds, folder / "audit.db"),
        "bare": BareSide(tool_rounds),
    }
    if floor:
        sides["floor (contract minimum, no model)"] = FloorSide(tool_rounds, folder / "floor.db")
    if breakdown:
        sides["harness, Tools reused"] = HarnessSide(tool_rounds, folder / "a2.db", reuse_tools=True)
        sides["harness, Tools reused, no audit"] = HarnessSide(
            tool_rounds, folder / "a3.db", reuse_tools=True, audit=False
        )
        sides["harness, Tools reused, no audit, no redaction"] = HarnessSide(
            tool_rounds, folder / "a4.db", reuse_tools=True, audit=False, redaction=False
        )
        sides["harness, 1 tool round"] = HarnessSide(1, folder / "a5.db")
        sides["bare, 1 tool round"] = BareSide(1)
    return sides


def median_ms(values: list[float]) -> float:
    return statistics.median(values) * 1000


def repeats_for(rounds: int, repeats: int) -> int:
    """Fewer runs for long scripts, so every count costs about the same time (at least 5)."""
    return max(5, repeats * SWEEP[0] // max(rounds, SWEEP[0]))


def measure(
    rounds: int, repeats: int, warmup: int, breakdown: bool, floor: bool = False
) -> dict[str, list[float]]:
    with tempfile.TemporaryDirectory(prefix="bench-harness-") as tmp:
        sides = build_sides(rounds, Path(tmp), breakdown, floor)
        try:
            return asyncio.run(interleaved(sides, repeats, warmup))
        finally:
            for side in sides.values():
                side.close()


def report_breakdown(samples: dict[str, list[float]], rounds: int) -> None:
    full, bare = median_ms(samples["harness"]), median_ms(samples["bare"])
    tools = full - median_ms(samples["harness, Tools reused"])
    reused = median_ms(samples["harness, Tools reused"])
    audit = reused - median_ms(samples["harness, Tools reused, no audit"])
    redaction = median_ms(samples["harness, Tools reused, no audit"]) - median_ms(
        samples["harness, Tools reused, no audit, no redaction"]
    )
    rest = median_ms(samples["harness, Tools reused, no audit, no redaction"]) - bare
    slope_h = (full - median_ms(samples["harness, 1 tool round"])) / (rounds - 1)
    slope_b = (bare - median_ms(samples["bare, 1 tool round"])) / (rounds - 1)
    print("attribution of the overhead per run (differences of medians):")
    print(f"  building the 3 frozen Tools (jsonschema check) per run  {tools:7.2f} ms")
    print(f"  SQLite audit sink (one commit per tool call)            {audit:7.2f} ms")
    print(f"  redaction of every event and projection                 {redaction:7.2f} ms")
    print(f"  hooks, protocol, events, boundary (the rest)            {rest:7.2f} ms")
    print(
        f"marginal cost of one more tool round: harness {slope_h * 1000:.0f} us, "
        f"bare {slope_b * 1000:.0f} us -> {(slope_h - slope_b) * 1000:.0f} us harness overhead per round"
    )


def report_floor(samples: dict[str, list[float]], rounds: int) -> None:
    """The floor per tool round against the bare Agent's whole round, and the best ratio it allows."""
    floor = median_ms(samples["floor (contract minimum, no model)"])
    bare = median_ms(samples["bare"])
    print(
        f"  floor {floor * 1000 / rounds:.0f} us per tool round against the bare Agent's "
        f"{bare * 1000 / rounds:.0f} us: no audited harness beats {(bare + floor) / bare:.2f}x here"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.benchmarks.bench_harness", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "--rounds",
        type=int,
        nargs="+",
        default=list(SWEEP),
        help="tool-round counts to sweep (one call each, then the Draft); the first is the headline",
    )
    parser.add_argument("--repeats", type=int, default=60, help="measured runs per side at the first count")
    parser.add_argument("--warmup", type=int, default=5, help="unmeasured runs per side first")
    parser.add_argument(
        "--breakdown", action="store_true", help="also time variants that attribute the overhead (slower)"
    )
    parser.add_argument(
        "--floor", action="store_true", help="also time the contracts' minimum work per tool round"
    )
    args = parser.parse_args(argv)
    print(hardware())
    results: list[tuple[int, float, float]] = []
    for index, rounds in enumerate(args.rounds):
        repeats = repeats_for(rounds, args.repeats)
        print(f"{rounds} tool rounds + 1 Draft round per run, {repeats} interleaved runs per side")
        samples = measure(rounds, repeats, args.warmup, args.breakdown and index == 0, args.floor)
        width = max(len(name) for name in samples)
        for name, values in samples.items():
            p90 = statistics.quantiles(values, n=10)[-1] * 1000
            print(f"  {name:<{width}}  median {median_ms(values):8.2f} ms   p90 {p90:8.2f} ms")
        harness, bare = median_ms(samples["harness"]), median_ms(samples["bare"])
        results.append((rounds, harness, bare))
        print(
            f"  ratio {harness / bare:.2f}x; harness overhead {(harness - bare) * 1000 / rounds:.0f} us "
            f"per tool round ({harness - bare:.2f} ms per run / {rounds} rounds)"
        )
        if args.breakdown and index == 0:
            report_breakdown(samples, rounds)
        if args.floor:
            report_floor(samples, rounds)
    return verdict(results)


def verdict(results: list[tuple[int, float, float]]) -> int:
    """Print the headline and the slopes; 0 only if every target is met."""
    rounds, harness, bare = results[0]
    ratio = harness / bare
    overheads = [(n, (h - b) / n) for n, h, b in results]  # ms per tool round
    worst = max(per_round for _, per_round in overheads)
    met = ratio <= TARGET_RATIO and worst <= TARGET_OVERHEAD_MS
    print(f"ratio {ratio:.2f}x at {rounds} rounds (target <= {TARGET_RATIO}x: ", end="")
    print("met)" if ratio <= TARGET_RATIO else "MISSED)")
    print(
        "harness overhead per tool round: "
        + ", ".join(f"{per_round * 1000:.0f} us at {n}" for n, per_round in overheads)
        + f" (target <= {TARGET_OVERHEAD_MS * 1000:.0f} us: "
        + ("met)" if worst <= TARGET_OVERHEAD_MS else "MISSED)")
    )
    if len(results) > 1:
        (n0, h0, b0), (n1, h1, b1) = results[0], results[-1]
        slope_h, slope_b = (h1 - h0) / (n1 - n0), (b1 - b0) / (n1 - n0)
        first, last = overheads[0][1], overheads[-1][1]
        flat = last <= first * FLAT_TOLERANCE + FLAT_SLACK_MS
        met = met and flat
        print(
            f"per-round slope {n0}->{n1} rounds: harness {slope_h * 1000:.0f} us, "
            f"bare {slope_b * 1000:.0f} us; "
            f"overhead per round {first * 1000:.0f} -> {last * 1000:.0f} us "
            f"({'flat' if flat else 'GROWS'}: target <= {FLAT_TOLERANCE}x + {FLAT_SLACK_MS * 1000:.0f} us)"
        )
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
