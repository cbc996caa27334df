"""Runs every case N times against the configured model, one run at a time, and scores each run.

Each run goes through the same wiring as `diagnose run` (settings, evidence sources, the audit as a
required sink), so an eval run is replayable from its audit file like any other. With a configured
`[model] seed`, repetition i uses seed + i: repetitions are distinct samples, and reproducible.
"""

from __future__ import annotations

import dataclasses
import os
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agent.events.run_events import RunEvent
from agent.settings import Settings, load_settings
from console.evaluation.cases import EvalCase
from console.evaluation.scoring import RunScore, Scores, aggregate, score_run
from console.wiring import RunEnvironment, open_run_environment

Progress = Callable[[int, int, EvalCase, int, RunScore | None], None]
"""Called before each run (score None) and after it: (index, total, case, repetition, score)."""


@dataclass
class EvalReport:
    model: str
    settings: dict[str, Any]
    cases: list[EvalCase]
    repeat: int
    started_at: str
    machine: str
    runs: list[RunScore] = field(default_factory=list)
    wall_s: float = 0.0
    interrupted: bool = False

    def _evidence_of(self) -> dict[str, bool]:
        return {c.name: c.expect.evidence for c in self.cases}

    def overall(self) -> Scores:
        return aggregate(self.runs, self._evidence_of())

    def by_case(self) -> dict[str, Scores]:
        return {
            c.name: aggregate([r for r in self.runs if r.case == c.name], self._evidence_of())
            for c in self.cases
            if any(r.case == c.name for r in self.runs)
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "settings": self.settings,
            "repeat": self.repeat,
            "started_at": self.started_at,
            "machine": self.machine,
            "wall_s": round(self.wall_s, 3),
            "interrupted": self.interrupted,
            "overall": self.overall().to_json(),
            "cases": [
                {
                    "name": c.name,
                    "title": c.title,
                    "expect": c.expect.model_dump(),
                    "scores": scores.to_json(),
                }
                for c in self.cases
                if (scores := self.by_case().get(c.name)) is not None
            ],
            "runs": [dataclasses.asdict(r) for r in self.runs],
        }


class EvalRunner:
    def __init__(self, config: Path | None, audit_db: str | Path, repeat: int) -> None:
        self.config = config
        self.audit_db = audit_db
        self.repeat = repeat
        self._stop = False
        self._current: Any = None

    def stop(self) -> None:
        """Cancel the run in progress and start no other (Ctrl-C); the report keeps what finished."""
        self._stop = True
        if self._current is not None:
            self._current.cancel()

    async def run(self, cases: list[EvalCase], progress: Progress | None = None) -> EvalReport:
        base = load_settings(self.config)
        started = time.perf_counter()
        report = EvalReport(
            model="",
            settings=_settings_summary(base),
            cases=cases,
            repeat=self.repeat,
            started_at=datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
            machine=machine_description(),
        )
        total = len(cases) * self.repeat
        index = 0
        for case in cases:
            scripted = base.model.provider == "scripted"
            env = open_run_environment(
                self.config, scenario=case.scenario_ref() if scripted else None, audit_db=self.audit_db
            )
            try:
                report.model = env.model_label if not scripted else "scripted (each case's scenario)"
                for repetition in range(self.repeat):
                    if self._stop:
                        break
                    index += 1
                    if progress is not None:
                        progress(index, total, case, repetition, None)
                    score = await self._run_once(env, case, repetition)
                    report.runs.append(score)
                    if progress is not None:
                        progress(index, total, case, repetition, score)
            finally:
                await env.aclose()
            if self._stop:
                break
        report.interrupted = self._stop
        report.wall_s = time.perf_counter() - started
        return report

    async def _run_once(self, env: RunEnvironment, case: EvalCase, repetition: int) -> RunScore:
        run_env = dataclasses.replace(env, settings=_with_seed_offset(env.settings, repetition))
        events: list[RunEvent] = []
        use_case = run_env.use_case(sinks=[events.append])
        self._current = use_case
        started = time.perf_counter()
        try:
            result = await use_case.execute(case.query, case.previous_turn)
        finally:
            self._current = None
        return score_run(case, repetition, result, events, time.perf_counter() - started)


def _with_seed_offset(settings: Settings, offset: int) -> Settings:
    if settings.model.seed is None or offset == 0:
        return settings
    model = settings.model.model_copy(update={"seed": (settings.model.seed + offset) % 2**31})
    return settings.model_copy(update={"model": model})


def _settings_summary(settings: Settings) -> dict[str, Any]:
    """What the scores depend on (never a secret: only names and limits)."""
    model = settings.model
    return {
        "provider": model.provider,
        "name": model.name if model.provider == "openai" else None,
        "max_tokens": model.max_tokens,
        "temperature": model.temperature,
        "seed": model.seed,
        "structured_output": model.structured_output,
        "request_shaping": model.request_shaping,
        "budget": settings.budget.model_dump(),
        "protocol": settings.protocol.model_dump(),
    }


def machine_description() -> str:
    cpu = platform.processor() or "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{os.cpu_count()} cores ({cpu}), {platform.system()}, Python {platform.python_version()}"
