"""Scenario files: a prefilled query plus a scripted model, for trainers and tests.
(docs/contracts.md, "Scenario files")

Built-in scenarios ship as package data; any YAML/JSON file with the same shape works the same way.
Nothing in the engine knows a scenario's name: built-ins get no special treatment.

A scenario file is content, not configuration: it is shared between trainers and picked from a
folder, so its `settings` may only tighten or loosen the run's budget and protocol limits. Any other
key (a model endpoint, an env var name, the audit path, a data source) would let a file's author
point the console, and the operator's credentials, wherever they like; it is an error naming the key.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic_core import PydanticCustomError

from agent.closest_name import did_you_mean
from agent.contracts import PreviousTurn
from agent.errors import DiagnoseError
from agent.input_files import InputFileError, parse_yaml_mapping, read_input_text
from agent.settings import BudgetSettings, ProtocolSettings

MAX_SCENARIO_BYTES = 1_000_000
# The only settings a scenario may carry: section -> the keys it may set.
SCENARIO_SETTINGS: dict[str, type[BaseModel]] = {"budget": BudgetSettings, "protocol": ProtocolSettings}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ScriptedToolCall(_Strict):
    id: str | None = None
    # Any text a model could send, lone surrogates included (a JSON `\ud800` escape), so a scenario
    # can show what the harness does with it. A length constraint would refuse those (pydantic checks
    # it on UTF-8), so only an empty name is refused, here.
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)

    @field_validator("name")
    @classmethod
    def _not_empty(cls, name: str) -> str:
        if not name:
            raise PydanticCustomError("string_too_short", "String should have at least 1 character")
        return name


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

    @field_validator("settings")
    @classmethod
    def _only_budget_and_protocol(cls, settings: dict[str, Any]) -> dict[str, Any]:
        for section, values in settings.items():
            model = SCENARIO_SETTINGS.get(section)
            if model is None:
                raise ValueError(
                    f"settings.{section!s:.60} is not allowed: a scenario file may only set "
                    "budget and protocol limits"
                )
            if not isinstance(values, dict):
                raise ValueError(f"settings.{section} must be a mapping of {section} limits")
            for key in values:
                if key not in model.model_fields:
                    known = ", ".join(model.model_fields)
                    raise ValueError(
                        f"settings.{section}.{key!s:.60} is not a {section} limit (known: {known})"
                    )
            try:
                model.model_validate(values)
            except ValidationError as exc:
                first = exc.errors(include_input=False)[0]
                where = ".".join(map(str, first["loc"]))
                raise ValueError(f"settings.{section}.{where}: {first['msg']}") from None
        return settings


# Under these keys a scenario holds what a model sends (any text, lone surrogates included), not fields.
SCRIPTED_MODEL_DATA = frozenset({"arguments"})


class ScenarioError(DiagnoseError):
    """A scenario cannot be loaded; the message names the file and the problem."""


def _builtin_dir() -> Path:
    return Path(str(resources.files("agent") / "data" / "scenarios"))


def builtin_scenarios() -> list[Scenario]:
    return [load_scenario_file(p) for p in sorted(_builtin_dir().glob("*.yaml"))]


def load_scenario_file(path: Path) -> Scenario:
    try:
        text = read_input_text(path, what="scenario file", limit=MAX_SCENARIO_BYTES)
    except InputFileError as exc:
        raise ScenarioError(str(exc)) from None
    return parse_scenario(text, source=str(path))


def parse_scenario(text: str, source: str = "<scenario>") -> Scenario:
    try:
        raw = parse_yaml_mapping(text, source=source, what="scenario", free_form=SCRIPTED_MODEL_DATA)
    except InputFileError as exc:
        raise ScenarioError(str(exc)) from None
    try:
        return Scenario.model_validate(raw)
    except RecursionError:
        raise ScenarioError(f"{source}: nested too deeply to be a scenario") from None
    except ValidationError as exc:
        first = exc.errors(include_input=False)[0]
        if first["type"] == "value_error":  # our own checks name the key themselves
            raise ScenarioError(f"{source}: {first['msg'].removeprefix('Value error, ')}") from None
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
    names = [s.name for s in builtin_scenarios()]
    raise ScenarioError(
        f"unknown scenario {name_or_file!r}{did_you_mean(name_or_file, names)}; "
        f"built-in scenarios: {', '.join(names)}"
    )
