"""DiagnoseApp: the operator console — investigate, audit, scenarios, help (docs/architecture.md,
"Console structure").

The first frame is painted before the engine is imported: `console.wiring` pulls in Haystack (~0.7 s),
so the environment is opened in a thread worker after mount while the status bar says so. Nothing here
imports the engine at module level, and the screens other than investigate (audit, replay, scenarios,
help) load when first opened; the import-hygiene test keeps it that way.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from rich.segment import Segment
from textual.app import SystemCommand
from textual.binding import Binding, BindingType
from textual.color import Color
from textual.filter import LineFilter
from textual.screen import Screen
from textual.worker import Worker, WorkerState, get_current_worker

from console.host import ConsoleHost, ConsoleOptions
from console.messages import EngineStatus
from console.safe_text import neutralize
from console.screens.investigate import InvestigateScreen

if TYPE_CHECKING:
    from console.screens.help import KeySections
    from console.screens.scenarios import ScenarioChoice
    from console.wiring import RunEnvironment

EnvFactory = Callable[[str | None], "RunEnvironment"]
DARK_THEME, LIGHT_THEME = "textual-dark", "textual-light"


def quiet_logging() -> None:
    """Library logging must never write over the screen: without any handler, Python's last-resort
    handler prints warnings to stderr. (`diagnose` itself logs to a file before the app starts.)"""
    root = logging.getLogger()
    if not root.handlers:
        root.addHandler(logging.NullHandler())


class TerminalSafeFilter(LineFilter):
    """The console's last line of defence: no painted segment carries a character that could drive
    the terminal or hide what is shown (see `console.safe_text`).

    Widgets show untrusted text escaped already; this catches any that does not (Textual's own toasts,
    inputs and tables included). A line's layout is fixed by now, so such characters are blanked to
    their width rather than escaped.
    """

    def apply(self, segments: list[Segment], background: Color) -> list[Segment]:
        if all(neutralize(segment.text, newlines=False) is segment.text for segment in segments):
            return segments
        return [
            Segment(neutralize(text, newlines=False, form="blank"), style, control)
            for text, style, control in segments
        ]


def _is_audit_screen(screen: Screen[Any]) -> bool:
    """Whether `screen` is the audit screen, without importing it: the screens other than investigate
    load on first use, so the first frame does not pay for them (nothing can be one before that)."""
    audit = sys.modules.get("console.screens.audit")
    return audit is not None and isinstance(screen, audit.AuditScreen)


class DiagnoseApp(ConsoleHost):
    """Owns the screens and the engine: opens the run environment, switches screens, offers commands."""

    TITLE = "diagnose"
    CSS_PATH = Path(__file__).with_name("app.tcss")
    ENABLE_COMMAND_PALETTE = True
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("f1", "help", "Help", tooltip="Every key of the console"),
        Binding("question_mark", "help", "Help", show=False, tooltip="Every key of the console"),
        Binding("f2", "investigate", "Investigate", tooltip="The investigate screen"),
        Binding("f3", "audit", "Audit", tooltip="Browse audited runs and invocations"),
        Binding("f4", "scenarios", "Scenarios", tooltip="Pick a built-in scenario"),
        Binding(
            "f8", "toggle_maximize", "Maximize", show=False, tooltip="Maximize or restore the focused panel"
        ),
        Binding("ctrl+l", "toggle_theme", "Light/dark", show=False, tooltip="Toggle light and dark theme"),
    ]

    SCREENS: ClassVar[dict[str, Callable[[], Screen[Any]]]] = {"investigate": InvestigateScreen}
    MODES: ClassVar[dict[str, str | Callable[[], Screen[Any]]]] = {"investigate": "investigate"}
    DEFAULT_MODE = "investigate"

    def __init__(
        self,
        config: Path | None = None,
        scenario: str | None = None,
        audit_db: Path | None = None,
        *,
        scenario_dir: Path | None = None,
        env_factory: EnvFactory | None = None,
        options: ConsoleOptions | None = None,
    ) -> None:
        """`env_factory` replaces how the run environment is opened (a test's stub engine); `options`
        pins IDs, clock, timings and cursor blink for tests and snapshots."""
        super().__init__(options)
        self.config = config
        self.scenario_arg = scenario
        self.audit_db = audit_db
        self.scenario_dir = scenario_dir
        self.env_factory: EnvFactory = env_factory or self._open_environment
        self.theme = DARK_THEME
        self._prefill = True
        self._terminal_safe = TerminalSafeFilter()
        quiet_logging()

    # ------------------------------------------------------------------ screens
    def get_line_filters(self) -> list[LineFilter]:
        return [*super().get_line_filters(), self._terminal_safe]

    @property
    def investigate(self) -> InvestigateScreen:
        screen = self.get_screen("investigate")
        assert isinstance(screen, InvestigateScreen)
        return screen

    def on_mount(self) -> None:
        self.call_after_refresh(self.load_engine, self.scenario_arg)

    # ------------------------------------------------------------------ the engine, opened lazily
    def _open_environment(self, scenario: str | None) -> RunEnvironment:
        from console.wiring import open_run_environment  # imports Haystack: never before the first frame

        return open_run_environment(config=self.config, scenario=scenario, audit_db=self.audit_db)

    def load_engine(self, scenario: str | None) -> None:
        """(Re)open the run environment for a scenario in a thread; the UI stays live meanwhile.
        Once open, its scenario's query is put into the input."""
        self._prefill = True
        self.engine_status = EngineStatus("loading", "loading engine…", scenario=scenario)
        self.run_worker(
            partial(self._opened, scenario), thread=True, group="engine", exclusive=True, exit_on_error=False
        )

    def _opened(self, scenario: str | None) -> tuple[RunEnvironment, str] | None:
        env = self.env_factory(scenario)
        if get_current_worker().is_cancelled:  # a newer pick replaced this one while it opened
            env.audit.close()
            return None
        return env, env.model_label

    async def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.worker.group != "engine":
            return
        if event.state == WorkerState.SUCCESS and event.worker.result is not None:
            env, label = event.worker.result
            old, self.env = self.env, env
            for handler in logging.getLogger().handlers:
                handler.addFilter(env.redactor.logging_filter())  # configured secret values, exactly
            name = env.scenario.name if env.scenario is not None else None
            self.engine_status = EngineStatus("ready", label, scenario=name)
            if self._prefill and env.scenario is not None:  # a (re)load puts its scenario's query in
                self.investigate.prefill(env.scenario.query, env.scenario.previous_turn)
            self._prefill = False
            if old is not None:
                await old.aclose()
        elif event.state == WorkerState.ERROR:
            message = neutralize(str(event.worker.error) or type(event.worker.error).__name__)
            self.engine_status = EngineStatus("failed", "no engine", message=message)
            self.notify(
                message, title="The engine could not start", severity="error", markup=False, timeout=15
            )

    async def on_unmount(self) -> None:
        if self.env is not None:
            await self.env.aclose()

    # ------------------------------------------------------------------ actions
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Keep the footer short: a key that would lead where you already are is not offered."""
        if action == "investigate":
            return len(self.screen_stack) > 1
        if action == "audit":
            return not _is_audit_screen(self.screen)
        return True

    def action_help(self) -> None:
        from console.screens.help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.key_sections()))

    def action_investigate(self) -> None:
        while len(self.screen_stack) > 1:
            self.pop_screen()

    def action_audit(self) -> None:
        from console.screens.audit import AuditScreen

        if any(isinstance(screen, AuditScreen) for screen in self.screen_stack):
            while not isinstance(self.screen, AuditScreen):
                self.pop_screen()
            return
        self.action_investigate()
        self.push_screen(AuditScreen())

    def action_scenarios(self) -> None:
        from console.screens.scenarios import ScenarioPicker

        if isinstance(self.screen, ScenarioPicker):
            return
        if self.investigate.running:
            self.notify("A run is in progress; escape cancels it first.", severity="warning")
            return
        current = self.engine_status.scenario
        self.push_screen(ScenarioPicker(current, self.scenario_arg, self.scenario_dir), self._scenario_chosen)

    def _scenario_chosen(self, choice: ScenarioChoice | None) -> None:
        if choice is None:
            return
        self.action_investigate()
        self.load_engine(choice.source)

    def action_toggle_theme(self) -> None:
        self.theme = LIGHT_THEME if self.current_theme.dark else DARK_THEME

    def action_toggle_maximize(self) -> None:
        screen = self.screen
        if screen.maximized is not None:
            screen.minimize()
        elif screen.focused is not None:
            screen.maximize(screen.focused)

    def key_sections(self) -> KeySections:
        """Every key, where it works and what it does (the help screen and the README table)."""
        from console.screens.audit import AuditScreen
        from console.screens.export_dialog import ExportDialog
        from console.screens.help import binding_rows
        from console.screens.replay import ReplayScreen
        from console.screens.scenarios import ScenarioPicker

        return [
            (
                "Everywhere",
                [
                    *binding_rows(self.BINDINGS),
                    ("ctrl+p", "Command palette: every action by name"),
                    ("tab / shift+tab", "Move between panels"),
                    ("ctrl+q", "Quit"),
                ],
            ),
            ("Investigate", binding_rows(InvestigateScreen.BINDINGS)),
            (
                "Timeline",
                [
                    ("up / down", "Move; the detail panel shows the highlighted entry"),
                    ("enter", "Show the entry in the detail panel"),
                    ("space", "Fold or unfold a round"),
                ],
            ),
            ("Result", [("up / down, enter", "Choose a citation or check: shows that call in the timeline")]),
            (
                "Audit",
                [
                    *binding_rows(AuditScreen.BINDINGS),
                    ("enter", "Open the highlighted run's timeline (on an invocation: at that call)"),
                ],
            ),
            ("Audit replay", binding_rows(ReplayScreen.BINDINGS)),
            ("Scenario picker", [*binding_rows(ScenarioPicker.BINDINGS), ("enter", "Open the scenario")]),
            ("Export dialog", [*binding_rows(ExportDialog.BINDINGS), ("enter", "Write the files")]),
        ]

    # ------------------------------------------------------------------ command palette
    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        investigate = self.investigate
        yield SystemCommand("Run query", "Run the query in the input (ctrl+r)", investigate.action_run)
        yield SystemCommand("Cancel run", "Cancel the running run (escape)", investigate.action_cancel_run)
        yield SystemCommand(
            "Follow-up",
            "Ask a follow-up carrying the last Draft, or drop it (ctrl+f)",
            investigate.action_follow_up,
        )
        yield SystemCommand(
            "Copy Draft", "Copy the Draft as Markdown (ctrl+g)", investigate.action_copy_draft
        )
        yield SystemCommand(
            "Copy Draft as JSON", "Copy the Draft JSON exactly", investigate.action_copy_draft_json
        )
        yield SystemCommand(
            "Export run", "Write the run as Markdown and JSON files (ctrl+s)", investigate.action_export
        )
        yield SystemCommand("Investigate", "Go to the investigate screen (f2)", self.action_investigate)
        yield SystemCommand("Audit", "Browse audited runs and invocations (f3)", self.action_audit)
        yield SystemCommand("Scenarios", "Pick a built-in scenario (f4)", self.action_scenarios)
        yield SystemCommand("Help", "Every key of the console (f1)", self.action_help)
        yield SystemCommand(
            "Toggle light/dark", "Switch between the light and dark theme (ctrl+l)", self.action_toggle_theme
        )
        yield SystemCommand(
            "Maximize panel", "Maximize or restore the focused panel (f8)", self.action_toggle_maximize
        )
        yield from super().get_system_commands(screen)
