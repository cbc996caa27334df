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
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Any, ClassVar

from rich.segment import Segment
from textual.app import SystemCommand
from textual.binding import Binding, BindingType
from textual.color import Color
from textual.filter import LineFilter
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Input, Tabs, TextArea
from textual.worker import Worker, WorkerState, get_current_worker

from console.host import ConsoleHost, ConsoleOptions
from console.messages import EngineStatus
from console.palette import (
    APP_COMMANDS,
    REPLACED_COMMANDS,
    SCREEN_COMMANDS,
    UnavailableCommands,
    command_help,
)
from console.safe_text import neutralize
from console.screens.investigate import InvestigateScreen
from console.widgets.budget import BudgetGauge
from console.widgets.detail import DetailPanel
from console.widgets.protocol import ProtocolPanel
from console.widgets.result import ResultView
from console.widgets.timeline import Timeline

if TYPE_CHECKING:
    from agent.run_events import BudgetGauges
    from console.screens.help import KeySections
    from console.screens.scenarios import ScenarioChoice
    from console.wiring import RunEnvironment


def maximisable_panels() -> tuple[type[Widget], ...]:
    """What f8 maximises: the panel around the focused widget. (The audit screen's tables are among
    them; Textual's DataTable is imported here, on the first f8, not before the first frame.)"""
    from textual.widgets import DataTable

    return (Timeline, DetailPanel, ResultView, BudgetGauge, ProtocolPanel, TextArea, DataTable)


def budget_limits(env: Any) -> BudgetGauges | None:
    """The next run's limits, in the budget gauge's shape (used: unknown until the run starts)."""
    budget = getattr(getattr(env, "settings", None), "budget", None)
    if budget is None:
        return None
    from agent.budget import limits_of  # loaded with the engine, which is open by now
    from agent.run_events import budget_gauges

    return budget_gauges(limits_of(budget))


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


def _is_help_screen(screen: Screen[Any]) -> bool:
    """Whether `screen` is the help screen, without importing it (see `_is_audit_screen`)."""
    help_module = sys.modules.get("console.screens.help")
    return help_module is not None and isinstance(screen, help_module.HelpScreen)


class DiagnoseApp(ConsoleHost):
    """Owns the screens and the engine: opens the run environment, switches screens, offers commands."""

    TITLE = "diagnose"
    # The investigate screen's styles are read with the app's, so the first frame parses the stylesheet
    # once: a screen of its own CSS (or a mode) makes Textual parse every source again on first show.
    CSS_PATH: ClassVar[list[str | PurePath]] = [
        Path(__file__).with_name("app.tcss"),
        InvestigateScreen.CSS_PATH,
    ]
    ENABLE_COMMAND_PALETTE = True
    COMMANDS = ConsoleHost.COMMANDS | {UnavailableCommands}
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("f1", "help", "Help", tooltip="Every key of the console"),
        Binding(
            "question_mark",
            "help",
            "Help",
            show=False,
            tooltip="Every key of the console (outside the query box)",
        ),
        Binding("f2", "investigate", "Investigate", tooltip="The investigate screen"),
        Binding("f3", "audit", "Audit", tooltip="Browse audited runs and invocations"),
        Binding("f4", "scenarios", "Scenarios", tooltip="Pick a built-in scenario"),
        Binding(
            "f8", "toggle_maximize", "Maximize", show=False, tooltip="Maximize or restore the focused panel"
        ),
        Binding("ctrl+l", "toggle_theme", "Light/dark", show=False, tooltip="Toggle light and dark theme"),
        # ctrl+c stops a run, as it does in a shell; with no run it copies the selection, and with
        # nothing selected it says how to quit (a reflex ctrl+c must not meet silence).
        Binding(
            "ctrl+c",
            "cancel_run",
            "Cancel",
            show=False,
            priority=True,
            tooltip="Cancel the running run, from any screen (with no run: copy, or say how to quit)",
        ),
    ]

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
        # Why the engine could not open at start-up; the console is then blocked and exits 3 with it.
        self.startup_error: str | None = None
        quiet_logging()

    # ------------------------------------------------------------------ screens
    def get_line_filters(self) -> list[LineFilter]:
        return [*super().get_line_filters(), self._terminal_safe]

    def get_default_screen(self) -> Screen[Any]:
        """Investigate is the bottom of the screen stack, as Textual's default screen: unlike a mode, it
        is styled with the stylesheet already parsed (a mode's first show re-parses every source twice)."""
        return InvestigateScreen()

    @property
    def investigate(self) -> InvestigateScreen:
        screen = self.screen_stack[0]
        assert isinstance(screen, InvestigateScreen)  # noqa: S101 - invariant for the type checker
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
            env.close_traces()
            return None
        return env, env.model_label

    async def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.worker.group != "engine":
            return
        if event.state == WorkerState.SUCCESS and event.worker.result is not None:
            env, label = event.worker.result
            old, self.env = self.env, env
            from agent.secrets import redact_logs

            redact_logs(env.redactor)
            name = env.scenario.name if env.scenario is not None else None
            self.engine_status = EngineStatus("ready", label, scenario=name)
            if self._prefill and env.scenario is not None:  # a (re)load puts its scenario's query in
                self.investigate.prefill(env.scenario.query, env.scenario.previous_turn)
            self._prefill = False
            self.investigate.engine_ready(budget_limits(env))
            self.run_worker(self._prepare_evidence(env), group="prepare", exclusive=True, exit_on_error=False)
            for line in env.warnings:  # e.g. traces that could not be set up: the runs go on
                self.notify(neutralize(line), title="Warning", severity="warning", markup=False, timeout=15)
            self.run_worker(
                self._report_mysql_access(env), group="mysql-access", exclusive=True, exit_on_error=False
            )
            if old is not None:
                await old.aclose()
        elif event.state == WorkerState.ERROR:
            message = neutralize(str(event.worker.error) or type(event.worker.error).__name__)
            self.engine_status = EngineStatus("failed", "no engine", message=message)
            self.investigate.engine_failed(message)
            if self.env is None:  # the start-up itself failed: nothing can run, say so and block
                from console.screens.startup_failed import StartupFailed

                self.startup_error = message
                self.push_screen(StartupFailed(message))
                return
            self.notify(
                message, title="The engine could not start", severity="error", markup=False, timeout=15
            )

    async def _report_mysql_access(self, env: RunEnvironment) -> None:
        """Once the engine is ready: which MySQL diagnostic views the account can read, so a missing grant
        is a message now rather than an EMPTY answer mid-incident. Runs beside the first frames."""
        access = await env.mysql_access()
        if access is not None:
            line, complete = access
            self.notify(
                neutralize(line),
                title="MySQL diagnostics",
                severity="information" if complete else "warning",
                markup=False,
                timeout=15,
            )

    async def _prepare_evidence(self, env: RunEnvironment) -> None:
        """Index the runbook folder in the background once the engine is open, so the first lookup of
        a run does not wait for it; a folder large enough to take a while says so when it starts and
        when it is done."""

        told: set[str] = set()

        def progress(done: int, total: int) -> None:  # called from the indexing thread
            stage = "done" if done == total else "started"
            if stage not in told:
                told.add(stage)
                message = f"Runbooks indexed: {total:,}" if done == total else f"Indexing {total:,} runbooks…"
                self.call_from_thread(self.notify, message, title="Knowledge", markup=False)

        await env.boundary.prepare(progress)

    async def on_unmount(self) -> None:
        if self.env is not None:
            await self.env.aclose()

    # ------------------------------------------------------------------ actions
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Keep the footer short: a key that would lead where you already are is not offered. After a
        failed start-up only quitting is (the start-up screen's own keys)."""
        if self.startup_error is not None:
            return action == "quit"
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
        self.investigate.clear_run()
        self.load_engine(choice.source)

    def action_cancel_run(self) -> None:
        """ctrl+c: cancel the run; with none, copy what is selected; with nothing selected, say how to
        quit (Textual's own hint never showed here: the query box took ctrl+c as an empty copy)."""
        if self.investigate.running:
            self.investigate.action_cancel_run()
            return
        focused = self.screen.focused
        selected = focused.selected_text if isinstance(focused, TextArea | Input) else None
        selected = selected or self.screen.get_selected_text()
        if selected:
            self.copy_to_clipboard(selected)
            return
        self.notify("Nothing is running. ctrl+q quits the console; ctrl+c cancels a run while one goes.")

    def action_toggle_theme(self) -> None:
        self.theme = LIGHT_THEME if self.current_theme.dark else DARK_THEME

    def action_toggle_maximize(self) -> None:
        """Maximise the panel holding the focus (not a list or tab bar inside it)."""
        screen = self.screen
        if screen.maximized is not None:
            screen.minimize()
            return
        focused = screen.focused
        if focused is None:
            return
        if isinstance(focused, Tabs) and isinstance(screen, InvestigateScreen):
            view = screen.run_view
            focused = view.query_one(f"#{view.panel}")
        panels = maximisable_panels()
        panel = next((w for w in (focused, *focused.ancestors) if isinstance(w, panels)), focused)
        screen.maximize(panel, container=False)

    async def action_quit(self) -> None:
        """ctrl+q: during a run, ask first (quitting cancels the run, audited CANCELLED)."""
        from console.screens.confirm_quit import ConfirmQuit  # loads on first use, like the other screens

        if self.investigate.running and not isinstance(self.screen, ConfirmQuit):
            self.push_screen(ConfirmQuit(), self._quit_confirmed)
            return
        self.exit()

    def _quit_confirmed(self, confirmed: bool | None) -> None:
        if confirmed:
            self.exit()

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
                    ("ctrl+q", "Quit (during a run it asks first: quitting cancels the run)"),
                ],
            ),
            (
                "Investigate",
                [
                    *binding_rows(InvestigateScreen.BINDINGS),
                    ("left / right", "Below 120 columns, on the tab bar: Timeline, Detail, Result"),
                ],
            ),
            ("Timeline", binding_rows(Timeline.BINDINGS)),
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
        """Our commands that apply now, each described by its binding's tooltip and key; of Textual's
        own, only those we do not replace (its Maximize, Keys and Screenshot are ours here)."""
        investigate = self.investigate
        if screen is investigate:
            for title, action in SCREEN_COMMANDS:
                if investigate.check_action(action, ()) is True:
                    yield SystemCommand(
                        title,
                        command_help(InvestigateScreen.BINDINGS, action),
                        getattr(investigate, f"action_{action}"),
                    )
        for title, action in APP_COMMANDS:
            if self.check_action(action, ()) is True and not (action == "help" and _is_help_screen(screen)):
                yield SystemCommand(
                    title, command_help(self.BINDINGS, action), getattr(self, f"action_{action}")
                )
        yield SystemCommand(
            "Screenshot", "Save an SVG screenshot into the export folder", self.action_save_screenshot
        )
        for command in super().get_system_commands(screen):
            if command.title not in REPLACED_COMMANDS:
                yield command

    def action_save_screenshot(self) -> None:
        """An SVG of the screen in the export folder: a new file (0600, never through a link), as every
        file the console writes (audit.output_files); Textual's own would overwrite and follow links."""
        from audit.output_files import write_output
        from console.screens.export_dialog import default_export_dir

        stamp = self.options.clock().strftime("%Y%m%dT%H%M%S%fZ")
        folder = self.investigate.last_export_dir or self.options.export_dir or default_export_dir()
        written = folder / f"diagnose-screenshot-{stamp}.svg"
        try:
            write_output(written, self.export_screenshot())
        except OSError as exc:
            self.notify(str(exc), title="Screenshot not saved", severity="error", markup=False)
            return
        self.notify(str(written), title="Screenshot saved", markup=False)
