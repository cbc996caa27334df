"""What several commands share: the help of their common options, and `--scenario NAME` read
together with `--scenario-dir DIR`."""

from __future__ import annotations

import argparse

from agent.scenario_folder import is_scenario_file_name, scenario_files
from console.errors import SetupError

CONFIG_HELP = "TOML configuration file (default: $DIAGNOSE_CONFIG, else the embedded defaults)"
SCENARIO_HELP = "built-in scenario name, a scenario file, or the name of a file of --scenario-dir"
SCENARIO_DIR_HELP = "a folder of scenario files: listed in the picker, and named by --scenario NAME"


def scenario_from_folder(args: argparse.Namespace) -> None:
    """`--scenario NAME` with `--scenario-dir DIR`: a file of DIR whose scenario is named NAME (or whose
    file name is NAME.yaml) is the one meant, before a built-in of that name, since the picker lists it.
    The argument is replaced by that file's path."""
    scenario, folder = getattr(args, "scenario", None), getattr(args, "scenario_dir", None)
    if not scenario or folder is None or is_scenario_file_name(scenario):
        return
    if not folder.is_dir():
        raise SetupError(f"--scenario-dir {folder} is not a folder")
    from agent.scenarios import ScenarioError, load_scenario_file

    for path in scenario_files(folder):
        try:
            named = path.stem == scenario or load_scenario_file(path).name == scenario
        except ScenarioError:
            named = False  # reported by the check of the whole folder
        if named:
            args.scenario = str(path)
            return
