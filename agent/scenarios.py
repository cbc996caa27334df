"""Scenario files (DESIGN 3.6): a prefilled query plus a scripted model, for trainers and tests.

Built-in scenarios ship as package data; any YAML/JSON file with the same shape works the same way.
Nothing in the engine knows a scenario's name: built-ins get no special treatment.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agent.contracts import PreviousTurn

MAX_SCENARIO_BYTES = 1_000_000


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ScriptedToolCall(_Strict):
    id: str | None = None
    name: str = Field(min_length=1)
    arguments: dict[str, Any] = Field(default_factory=dict)


class ScriptedUsage(_Strict):
    """The usage the scripted provider reports; a count left out is one the provider does not report."""

    prompt_tokens: int | None = Field(default=None, ge=0)
    completion_tokens: int | None = Field(default=None, ge=0)
    total_tokens: int | None = Field(default=None, ge=0)

    def reported(self) -> dict[str, int]:
        counts = self.model_dump(exclude_none=True)
        if {"prompt_tokens", "completion_tokens"} <= set(counts) and self.total_tokens is None:
            counts["total_tokens"] = counts["prompt_tokens"] + counts["completion_tokens"]
        return counts


class ScriptedRound(_Strict):
    text: str | None = None
    tool_calls: list[ScriptedToolCall] = Field(default_factory=list)
    # None (or left out): the provider reports no usage at all, as many OpenAI-compatible servers do.
    usage: ScriptedUsage | None = None
    delay_ms: int = Field(default=0, ge=0, le=600_000)


class Scenario(_Strict):
    name: str = Field(min_length=1, max_length=100)
    title: str = ""
    description: str = ""
    query: str = ""
    previous_turn: PreviousTurn | None = None
    settings: dict[str, Any] = Field(default_factory=dict)
    rounds: list[ScriptedRound] = Field(min_length=1)


class ScenarioError(Exception):
    """A scenario cannot be loaded; the message names the file and the problem."""


def _builtin_dir() -> Path:
    return Path(str(resources.files("agent") / "data" / "scenarios"))


def builtin_scenarios() -> list[Scenario]:
    return [load_scenario_file(p) for p in sorted(_builtin_dir().glob("*.yaml"))]


def load_scenario_file(path: Path) -> Scenario:
    try:
        raw_bytes = path.read_bytes()
    except OSError as exc:
        raise ScenarioError(f"cannot read scenario file {path}: {exc.strerror}") from None
    if len(raw_bytes) > MAX_SCENARIO_BYTES:
        raise ScenarioError(f"scenario file {path} is larger than {MAX_SCENARIO_BYTES} bytes")
    try:
        text = raw_bytes.decode("utf-8", errors="strict")
    except UnicodeDecodeError:
        raise ScenarioError(f"scenario file {path} is not UTF-8 text") from None
    return parse_scenario(text, source=str(path))


def parse_scenario(text: str, source: str = "<scenario>") -> Scenario:
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise ScenarioError(f"{source}: not valid YAML{where}") from None
    except RecursionError:
        raise ScenarioError(f"{source}: nested too deeply to be a scenario") from None
    if not isinstance(raw, dict):
        raise ScenarioError(f"{source}: a scenario must be a mapping")
    try:
        return Scenario.model_validate(raw)
    except RecursionError:
        raise ScenarioError(f"{source}: nested too deeply to be a scenario") from None
    except ValidationError as exc:
        first = exc.errors(include_input=False)[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise ScenarioError(f"{source}: {loc}: {first['msg']}") from None


def resolve_scenario(name_or_file: str) -> Scenario:
    """A built-in name, or a path to a scenario file."""
    path = Path(name_or_file)
    if path.suffix in {".yaml", ".yml", ".json"} or path.exists():
        return load_scenario_file(path)
    builtin = _builtin_dir() / f"{name_or_file}.yaml"
    if builtin.is_file():
        return load_scenario_file(builtin)
    names = ", ".join(s.name for s in builtin_scenarios())
    raise ScenarioError(f"unknown scenario {name_or_file!r}; built-in scenarios: {names}")
