"""`diagnose scenarios`: the built-in scenarios, by name and title or as JSON."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from console.commands.output import print_out
from console.safe_text import neutralize

if TYPE_CHECKING:
    from console.interrupts import Interrupts


def add_scenarios_parser(subparsers: Any) -> None:
    scenarios = subparsers.add_parser("scenarios", help="list built-in scenarios")
    scenarios.add_argument("--json", action="store_true", help="name, title and description as JSON")
    scenarios.set_defaults(handler=run_scenarios_command)


def run_scenarios_command(args: argparse.Namespace, interrupts: Interrupts) -> int:
    return _scenarios(args.json)


def _scenarios(as_json: bool) -> int:
    from agent.scenarios import builtin_scenarios

    items = [{"name": s.name, "title": s.title, "description": s.description} for s in builtin_scenarios()]
    if as_json:
        print_out(neutralize(json.dumps(items, ensure_ascii=False, indent=2), form="json"), 0)
    else:
        width = max(len(i["name"]) for i in items)
        lines = [f"{item['name']:<{width}}  {item['title']}" for item in items]
        print_out(neutralize("\n".join(lines)), 0)
    return 0
