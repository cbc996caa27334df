"""The scenario picker: trainers choose a built-in scenario (or the scenario file the console was
started with); picking one reopens the environment with its scripted model and prefills its query.

A file in the trainer's folder that does not load (bad YAML, or settings a scenario may not carry) is
listed, disabled, with the reason, so a trainer sees why their lesson is missing."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from agent.scenario_folder import scenario_files
from console.safe_text import neutralize


@dataclass(frozen=True)
class ScenarioChoice:
    source: str  # what open_run_environment(scenario=...) takes: a built-in name or a file path
    name: str
    title: str
    description: str


def scenario_choices(
    started_with: str | None, scenario_dir: Path | None = None, problems: list[str] | None = None
) -> list[ScenarioChoice]:
    """Built-ins in name order, then a trainer's folder of scenario files; a scenario file given on the
    command line comes first. A file that does not load is left out, its reason added to `problems`."""
    from agent.scenarios import ScenarioError, builtin_scenarios, load_scenario_file

    choices = [ScenarioChoice(s.name, s.name, s.title, s.description) for s in builtin_scenarios()]
    if scenario_dir is not None and scenario_dir.is_dir():
        for path in scenario_files(scenario_dir):
            try:
                loaded = load_scenario_file(path)
            except ScenarioError as exc:
                if problems is not None:
                    problems.append(str(exc))
                continue
            choices.append(ScenarioChoice(str(path), loaded.name, loaded.title, loaded.description))
    if started_with and started_with not in {c.name for c in choices}:
        try:
            scenario = load_scenario_file(Path(started_with))
        except ScenarioError:
            return choices
        choices.insert(0, ScenarioChoice(started_with, scenario.name, scenario.title, scenario.description))
    return choices


def choice_prompt(choice: ScenarioChoice, current: bool) -> Text:
    """A scenario file is someone else's text: shown neutralised, never as markup."""
    text = Text.assemble(
        ("● " if current else "  ", "green"),
        (neutralize(choice.name, newlines=False), "bold"),
        "  ",
        neutralize(choice.title, newlines=False),
    )
    if choice.description:
        text.append("\n    " + neutralize(" ".join(choice.description.split())), style="dim")
    return text


class ScenarioPicker(ModalScreen[ScenarioChoice | None]):
    CSS_PATH = Path(__file__).with_name("scenarios.tcss")
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Close", tooltip="Close without changing the scenario")
    ]

    def __init__(
        self, current: str | None, started_with: str | None, scenario_dir: Path | None = None
    ) -> None:
        super().__init__(id="scenario-picker")
        self.current = current
        self.problems: list[str] = []
        self.choices = scenario_choices(started_with, scenario_dir, self.problems)

    def compose(self) -> ComposeResult:
        with Vertical(id="picker"):
            yield Static(
                Text.assemble(
                    ("Scenarios", "bold"),
                    ("  enter opens one with its scripted model · escape closes", "dim"),
                )
            )
            options = [
                Option(choice_prompt(c, c.name == self.current), id=str(i))
                for i, c in enumerate(self.choices)
            ]
            options += [
                Option(Text.assemble(("  ✗ ", "red"), (neutralize(problem), "red")), disabled=True)
                for problem in self.problems
            ]
            yield OptionList(*options, id="scenario-list")

    def on_mount(self) -> None:
        names = [c.name for c in self.choices]
        options = self.query_one(OptionList)
        options.highlighted = names.index(self.current) if self.current in names else 0
        options.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if event.option_index < len(self.choices):
            self.dismiss(self.choices[event.option_index])

    def action_close(self) -> None:
        self.dismiss(None)
