"""Where scenario files are found: a trainer's folder, read without the scenario model.

Kept apart from `agent.scenarios` (which loads pydantic) so the console can name and list files
before its first frame, and a headless run never imports the console's screens to do it.
"""

from __future__ import annotations

from pathlib import Path

SCENARIO_SUFFIXES = frozenset({".yaml", ".yml", ".json"})


def is_scenario_file_name(name: str) -> bool:
    """Whether a `--scenario` argument names a file (by its suffix) rather than a built-in."""
    return Path(name).suffix in SCENARIO_SUFFIXES


def scenario_files(scenario_dir: Path) -> list[Path]:
    """The scenario files of a trainer's folder, in name order (not recursive)."""
    try:
        return sorted(p for p in scenario_dir.iterdir() if p.suffix in SCENARIO_SUFFIXES)
    except OSError:
        return []
