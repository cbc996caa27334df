"""The `diagnose` console script's entry point (`[project.scripts]` in pyproject.toml): the command
line itself, its parser and each command's handler, is `console.commands`."""

from console.commands.main import main

__all__ = ["main"]
