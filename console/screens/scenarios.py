"""The scenario picker: trainers choose a built-in scenario (or the scenario file the console was
started with); picking one reopens the environment with its scripted model and prefills its query.

One line per scenario and the highlighted one's description under the list: at 80×24 the list still
shows a dozen scenarios, and the box never outgrows the terminal, so the entry enter opens is the one
on screen.

A file in the trainer's folder that does not load (bad YAML, or settings a scenario may not carry) is
listed under the choices with the reason, so a trainer sees why their lesson is missing."""

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
    """One line (a narrow terminal cuts the title; the description under the list has it whole). A
    scenario file is someone else's text: shown neutralised, never as markup."""
    return Text.assemble(
        ("● " if current else "  ", "green"),
        (neutralize(choice.name, newlines=False), "bold"),
        "  ",
        neutralize(choice.title, newlines=False),
        no_wrap=True,
        overflow="ellipsis",
    )


def choice_description(choice: ScenarioChoice) -> Text:
    """What the highlighted scenario demonstrates (and which file it is, when it is not built in)."""
    text = Text(neutralize(choice.title, newlines=False), style="bold")
    text.append("\n" + (neutralize(" ".join(choice.description.split())) or "no description"))
    if choice.source != choice.name:
        text.append("\n" + neutralize(choice.source, newlines=False), style="dim")
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
        names = [c.name for c in self.choices]
        self.initial = names.index(current) if current in names else 0  # highlighted when it opens

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
            yield OptionList(*options, id="scenario-list")
            problems = Static(
                Text("\n").join(Text.assemble("✗ ", neutralize(problem)) for problem in self.problems),
                id="scenario-problems",
            )
            problems.display = bool(self.problems)
            yield problems
            yield Static(choice_description(self.choices[self.initial]), id="scenario-about")

    def on_mount(self) -> None:
        options = self.query_one(OptionList)
        options.highlighted = self.initial
        options.focus()

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        event.stop()
        about = choice_description(self.choices[event.option_index])
        self.query_one("#scenario-about", Static).update(about)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.dismiss(self.choices[event.option_index])

    def action_close(self) -> None:
        self.dismiss(None)
