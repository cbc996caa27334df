"""YAML read safely: PyYAML's safe loader, with aliases refused.

An alias (`*name`) shares one object wherever it is used, so a chain of anchors, each a list of two
aliases of the one before, is a few hundred bytes that expand to gigabytes once anything serialises it
(a scripted tool call's arguments are sent, counted and audited as JSON): 23 links made a run take
half a gigabyte and 17 s, 30 would exhaust the machine. No file this project reads (a scenario, an eval
case, a runbook's front matter) needs one.
"""

from __future__ import annotations

import functools
from typing import Any


class AliasRefused(Exception):
    """The document holds an alias; `line` is 1-based."""

    def __init__(self, line: int) -> None:
        super().__init__(line)
        self.line = line


@functools.cache
def alias_free_loader() -> type:
    """A `yaml.SafeLoader` subclass that raises `AliasRefused` at the first alias."""
    import yaml

    class AliasFreeLoader(yaml.SafeLoader):
        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                # types-PyYAML leaves Parser.peek_event unannotated
                raise AliasRefused(self.peek_event().start_mark.line + 1)  # type: ignore[no-untyped-call]
            return super().compose_node(parent, index)

    return AliasFreeLoader
