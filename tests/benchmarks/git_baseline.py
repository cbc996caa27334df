"""An earlier version of one module, taken from git, for a benchmark to run beside the current one."""

from __future__ import annotations

import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def baseline_file(revision: str, module_path: str, folder: Path) -> Path:
    """`module_path` (e.g. `tools/logs/file_source.py`) as of `revision`, written into `folder`."""
    source = subprocess.run(
        ["git", "show", f"{revision}:{module_path}"], cwd=REPO, check=True, capture_output=True, text=True
    ).stdout
    path = folder / f"{Path(module_path).stem}_{revision}.py"
    path.write_text(source, encoding="utf-8")
    return path
