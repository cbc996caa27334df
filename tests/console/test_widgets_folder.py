"""`console/widgets/` holds widgets only: every module in it defines at least one Textual `Widget`.

What a widget draws from but is not one (the run-event reducer `console.run_state`, the column choice
`console.table_columns`) lives beside the widgets, in `console/`, where a Textual-free module can be
read and tested without the widget toolkit (docs/architecture.md, "Console structure").
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil

from textual.widget import Widget

import console.widgets


def test_every_module_of_the_widgets_folder_defines_a_widget() -> None:
    modules = [info.name for info in pkgutil.iter_modules(console.widgets.__path__)]
    assert modules, "console/widgets/ holds no module"
    without_widget = []
    for name in modules:
        module = importlib.import_module(f"console.widgets.{name}")
        defined = [
            value
            for value in vars(module).values()
            if inspect.isclass(value) and issubclass(value, Widget) and value.__module__ == module.__name__
        ]
        if not defined:
            without_widget.append(name)
    assert without_widget == [], (
        f"modules of console/widgets/ that define no Textual Widget: {without_widget}"
    )
