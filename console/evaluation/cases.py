"""Eval case files: one YAML file per incident case, in a folder.

```yaml
name: payment-timeout
title: One line for the report
query: "..."
previous_turn: null                  # optional {query, conclusion, limitations}
expect:
  evidence: true                     # evidence exists: the Draft concludes ...
  cite_tools: [query_logs]           # ... with a finding citing a FOUND, non-NO_GAIN call of one of these
  red_herring:                       # optional: misleading evidence the Draft must not conclude from
    tool: query_logs
    input: {service: order-service}  # the calls of that tool whose input holds these values
scenario: evidence-backed-diagnosis  # optional: what the scripted model replays (built-in or file)
```

`expect: {evidence: false}` means no evidence exists: the honest Draft has `conclusion: null`.
A `scenario` is used only with `[model] provider = "scripted"`; a file path is relative to the case.
A bad file is a typed `EvalCaseError` that names the file and the problem.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from agent.contracts import PreviousTurn
from agent.errors import DiagnoseError
from agent.input_files import InputFileError, parse_yaml_mapping, read_input_text
from agent.scenarios import SCRIPTED_MODEL_DATA
from tools.definitions import ToolName

MAX_CASE_BYTES = 256_000
MAX_CASES = 500


class EvalCaseError(DiagnoseError):
    """A case file or folder cannot be used; the message names the file and the problem."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RedHerring(_Strict):
    """Misleading evidence of a case: the calls of `tool` whose business input holds `input`'s values."""

    tool: ToolName
    input: dict[str, str | int | None] = Field(default_factory=dict)

    def matches(self, tool: str, call_input: Any) -> bool:
        if tool != self.tool:
            return False
        given = call_input if isinstance(call_input, dict) else {}
        return all(given.get(key) == value for key, value in self.input.items())


class Expectation(_Strict):
    evidence: bool
    cite_tools: list[ToolName] = Field(default_factory=list)
    red_herring: RedHerring | None = None

    @model_validator(mode="after")
    def _tools_only_with_evidence(self) -> Expectation:
        if not self.evidence and self.cite_tools:
            raise ValueError("cite_tools only applies when evidence is true")
        return self


class EvalCase(_Strict):
    name: str = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    title: str = Field(default="", max_length=300)
    query: str = Field(min_length=1)
    previous_turn: PreviousTurn | None = None
    expect: Expectation
    scenario: str | None = None
    source: Path | None = Field(default=None, exclude=True)

    def scenario_ref(self) -> str | None:
        """The scenario as `resolve_scenario` takes it: a built-in name, or a file next to the case."""
        if self.scenario is None:
            return None
        candidate = Path(self.scenario)
        if self.source is not None and candidate.suffix in {".yaml", ".yml", ".json"}:
            if not candidate.is_absolute():
                candidate = self.source.parent / candidate
            return str(candidate)
        return self.scenario


def bundled_cases_path() -> Path:
    """The demo incidents (the bundled runbooks and incident log): the default case set."""
    return Path(str(resources.files("console") / "data" / "eval_cases"))


def load_cases(folder: Path | None = None, only: list[str] | None = None) -> list[EvalCase]:
    root = folder or bundled_cases_path()
    if not root.is_dir():
        raise EvalCaseError(f"case folder not found: {root}")
    files = sorted(p for p in root.glob("*") if p.suffix in {".yaml", ".yml"} and p.is_file())
    if not files:
        raise EvalCaseError(f"no case files (*.yaml) in {root}")
    if len(files) > MAX_CASES:
        raise EvalCaseError(f"{root} holds {len(files)} case files; at most {MAX_CASES} are allowed")
    cases = [load_case_file(p) for p in files]
    seen: dict[str, Path | None] = {}
    for case in cases:
        if case.name in seen:
            raise EvalCaseError(f"{case.source}: case name {case.name!r} is also used by {seen[case.name]}")
        seen[case.name] = case.source
    if only:
        unknown = sorted(set(only) - set(seen))
        if unknown:
            raise EvalCaseError(f"unknown case(s) {', '.join(unknown)}; known: {', '.join(seen)}")
        cases = [c for c in cases if c.name in only]
    return cases


def load_case_file(path: Path) -> EvalCase:
    try:
        text = read_input_text(path, what="case file", limit=MAX_CASE_BYTES)
        raw = parse_yaml_mapping(text, source=str(path), what="case", free_form=SCRIPTED_MODEL_DATA)
    except InputFileError as exc:
        raise EvalCaseError(str(exc)) from None
    try:
        return EvalCase.model_validate({**raw, "source": path})
    except ValidationError as exc:
        first = exc.errors(include_input=False)[0]
        loc = ".".join(str(p) for p in first["loc"]) or "case"
        raise EvalCaseError(f"{path}: {loc}: {first['msg']}") from None
