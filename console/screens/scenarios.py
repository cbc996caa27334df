"""The scenario picker: trainers choose a built-in scenario (or the scenario file the console was
started with); picking one reopens the environment with its scripted model and prefills its query.

One line per scenario and the highlighted one's description under the list: at 80×24 the list still
shows a dozen scenarios, and the box never outgrows the terminal, so the entry enter opens is the one
on screen. Typing filters the list (every word must appear in the name or the title; backspace
erases), so a trainer finds a lesson among dozens without scrolling.

A file in the trainer's folder that does not load (bad YAML, or settings a scenario may not carry) is
listed, dimmed, after the scenarios: highlighting it shows why it cannot be used, and enter does not
open it. The console starts all the same, so one broken lesson never takes the others away."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual import events
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
    problem: str | None = None  # why a file of the folder cannot be used: listed, never opened

    @property
    def usable(self) -> bool:
        return self.problem is None


def scenario_choices(started_with: str | None, scenario_dir: Path | None = None) -> list[ScenarioChoice]:
    """Built-ins in name order, then a trainer's folder of scenario files, then the folder's files that
    do not load (with the reason); a scenario file given on the command line comes first."""
    from agent.scenarios import ScenarioError, builtin_scenarios, load_scenario_file

    choices = [ScenarioChoice(s.name, s.name, s.title, s.description) for s in builtin_scenarios()]
    unusable: list[ScenarioChoice] = []
    if scenario_dir is not None and scenario_dir.is_dir():
        for path in scenario_files(scenario_dir):
            try:
                loaded = load_scenario_file(path)
            except ScenarioError as exc:
                reason = str(exc).removeprefix(f"{path}: ")
                unusable.append(ScenarioChoice(str(path), path.name, "cannot be used", "", problem=reason))
                continue
            choices.append(ScenarioChoice(str(path), loaded.name, loaded.title, loaded.description))
    if started_with and started_with not in {c.name for c in choices}:
        try:
            scenario = load_scenario_file(Path(started_with))
        except ScenarioError:
            return choices + unusable
        choices.insert(0, ScenarioChoice(started_with, scenario.name, scenario.title, scenario.description))
    return choices + unusable


def matches(choice: ScenarioChoice, typed: str) -> bool:
    """Whether every word typed appears in the scenario's name or title (case does not matter)."""
    haystack = f"{choice.name} {choice.title}".casefold()
    return all(word in haystack for word in typed.casefold().split())


def choice_prompt(choice: ScenarioChoice, current: bool) -> Text:
    """One line (a narrow terminal cuts the title; the description under the list has it whole). A
    scenario file is someone else's text: shown neutralised, never as markup."""
    if not choice.usable:
        return Text.assemble(
            ("✗ ", "red"),
            neutralize(choice.name, newlines=False),
            "  cannot be used: ",
            neutralize(choice.problem or "", newlines=False),
            style="dim",
            no_wrap=True,
            overflow="ellipsis",
        )
    return Text.assemble(
        ("● " if current else "  ", "green"),
        (neutralize(choice.name, newlines=False), "bold"),
        "  ",
        neutralize(choice.title, newlines=False),
        no_wrap=True,
        overflow="ellipsis",
    )


def choice_description(choice: ScenarioChoice) -> Text:
    """What the highlighted scenario demonstrates (and which file it is, when it is not built in); for
    a file that does not load, why."""
    if not choice.usable:
        text = Text(f"{neutralize(choice.name, newlines=False)} cannot be used", style="bold red")
        text.append("\n" + neutralize(choice.problem or ""))
    else:
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
        self.choices = scenario_choices(started_with, scenario_dir)
        self.typed = ""  # the filter: what the trainer typed since the picker opened
        self.shown = list(range(len(self.choices)))  # indexes into `choices`, in list order
        names = [c.name for c in self.choices]
        self.initial = names.index(current) if current in names else 0  # highlighted when it opens

    def compose(self) -> ComposeResult:
        with Vertical(id="picker"):
            yield Static(
                Text.assemble(
                    ("Scenarios", "bold"),
                    ("  type to filter · enter opens · escape closes", "dim"),
                ),
                id="scenario-heading",
            )
            yield Static(id="scenario-filter")
            yield OptionList(*self._options(), id="scenario-list")
            yield Static(choice_description(self.choices[self.initial]), id="scenario-about")

    def _options(self) -> list[Option]:
        return [
            Option(choice_prompt(self.choices[i], self.choices[i].name == self.current)) for i in self.shown
        ]

    def on_mount(self) -> None:
        options = self.query_one(OptionList)
        options.highlighted = self.initial
        options.focus()
        self._show_filter()

    def on_key(self, event: events.Key) -> None:
        """Printable keys filter the list, backspace erases: the list keeps the focus, so up, down and
        enter move and choose in it."""
        if event.key == "backspace" and self.typed:
            self.typed = self.typed[:-1]
        elif event.is_printable and event.character and (event.character != " " or self.typed):
            self.typed += event.character
        else:
            return
        event.stop()
        event.prevent_default()
        self._filter()

    def _filter(self) -> None:
        highlighted = self.query_one(OptionList).highlighted
        before = self.shown[highlighted] if highlighted is not None and self.shown else None
        self.shown = [i for i, choice in enumerate(self.choices) if matches(choice, self.typed)]
        options = self.query_one(OptionList)
        options.set_options(self._options())
        if self.shown:
            options.highlighted = self.shown.index(before) if before in self.shown else 0
        self._show_filter()

    def _show_filter(self) -> None:
        line = self.query_one("#scenario-filter", Static)
        line.display = bool(self.typed)
        if self.typed:
            found = len(self.shown)
            line.update(
                Text.assemble(
                    ("filter ", "dim"),
                    (neutralize(self.typed, newlines=False), "bold"),
                    (f"  {found} of {len(self.choices)} · backspace erases", "dim"),
                )
            )
        if not self.shown:
            self.query_one("#scenario-about", Static).update(Text("No scenario matches.", style="dim"))

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        event.stop()
        about = choice_description(self.choices[self.shown[event.option_index]])
        self.query_one("#scenario-about", Static).update(about)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        choice = self.choices[self.shown[event.option_index]]
        if not choice.usable:
            self.app.bell()  # the reason is already shown under the list
            return
        self.dismiss(choice)

    def action_close(self) -> None:
        self.dismiss(None)
