"""One runbook as the index and the reader see it: its title, its front matter, its headings, its text.

Runbook collections put what a runbook is about in YAML front matter (Hugo, Jekyll, Docusaurus:
`title`, an alert name, `severity`, `tags`), so those fields are read, and weigh more than body text.
The front matter is someone's content: it is parsed by PyYAML's safe loader with aliases refused
(`tools.yaml_loader`), only within its first `MAX_FRONT_MATTER_BYTES`, and only the string values of
the keys below are used; front matter that is not valid YAML is ordinary text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from tools.yaml_loader import AliasRefused, alias_free_loader

MAX_TITLE_CHARS = 200
MAX_FRONT_MATTER_BYTES = 64 * 1024
MARKDOWN_SUFFIXES = (".md", ".markdown")
# Front-matter keys whose text says what the runbook is about (alert rules name their alert).
TITLE_KEY = "title"
META_KEYS = (
    "alert",
    "alertname",
    "alert_name",
    "alerts",
    "severity",
    "tags",
    "keywords",
    "categories",
    "summary",
    "description",
)
# A folder's landing page: when the folder holds other runbooks it lists them (tools.knowledge.index).
INDEX_PAGE_STEMS = frozenset({"readme", "_index", "index", "summary", "toc", "contents"})
_FRONT_MATTER = re.compile(r"\A\ufeff?---[ \t]*\r?\n(.*?\r?\n)?(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.DOTALL)
# The heading's text is trimmed in Python: a lazy `(.+?)[ \t#]*$` is quadratic on a line of spaces.
_HEADING = re.compile(r"^(#{1,6})[ \t]+(\S.*)$")
_FENCE = re.compile(r"^[ \t]{0,3}(```|~~~)")
# A link's target stops at the next bracket or parenthesis: `[^)\s]+` rescans "]((((" to the end from
# every "](", quadratic in a hostile line.
_LINK = re.compile(r"\]\([^()\[\]\s]+\)|\]\[[^\[\]]*\]")


@dataclass(frozen=True)
class Runbook:
    source: str
    title: str
    meta: tuple[str, ...]  # front-matter alert names, tags, severity, summary; the file's name
    headings: tuple[str, ...]
    body: str  # the text after the front matter
    lists_runbooks: bool  # a table of contents: most of its lines are links

    @property
    def is_landing_page(self) -> bool:
        return _stem(self.source).lower() in INDEX_PAGE_STEMS


def is_markdown(name: str) -> bool:
    return name.lower().endswith(MARKDOWN_SUFFIXES)


def parse_runbook(source: str, text: str) -> Runbook:
    """Title = front matter `title`, else the first `# ` heading outside code fences, else file name."""
    fields, body = _split_front_matter(text)
    headings, first_heading = _headings(body)
    title = _one_line(_string(fields.get(TITLE_KEY))) or first_heading or source.rsplit("/", 1)[-1]
    meta = [_one_line(value) for key in META_KEYS for value in _strings(fields.get(key))]
    meta.append(_stem(source))
    return Runbook(
        source=source,
        title=title[:MAX_TITLE_CHARS],
        meta=tuple(value for value in meta if value),
        headings=tuple(headings),
        body=body,
        lists_runbooks=_is_table_of_contents(body),
    )


def _stem(source: str) -> str:
    """The file name without its suffix (string work: it runs for every runbook indexed)."""
    return source.rsplit("/", 1)[-1].rsplit(".", 1)[0]


def _split_front_matter(text: str) -> tuple[dict[str, Any], str]:
    match = _FRONT_MATTER.match(text[: MAX_FRONT_MATTER_BYTES + 8])
    if match is None:
        return {}, text
    fields = _load_yaml(match.group(1) or "")
    if fields is None:
        return {}, text
    return fields, text[match.end() :]


def _load_yaml(block: str) -> dict[str, Any] | None:
    """The block's mapping, or None when it is not one (or not YAML, or holds an alias)."""
    import yaml

    # libyaml is ~15x faster; a block without `*` cannot hold an alias, so it is safe to use there.
    loader = yaml.CSafeLoader if "*" not in block and yaml.__with_libyaml__ else alias_free_loader()
    try:
        loaded = yaml.load(block, Loader=loader)  # noqa: S506 - CSafeLoader or a SafeLoader that refuses aliases
    except (yaml.YAMLError, AliasRefused, RecursionError, ValueError, OverflowError):
        return None
    if loaded is None:
        return {}
    return loaded if isinstance(loaded, dict) else None


def _string(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _strings(value: Any) -> list[str]:
    """A key's text: a string, or the strings of a list (tags); numbers, dates and mappings say nothing."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [item for item in value if isinstance(item, str)]
    return []


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _headings(body: str) -> tuple[list[str], str]:
    """The text of every heading outside code fences (a shell comment is no heading), and the first
    `# ` one."""
    headings: list[str] = []
    first = ""
    fence = ""
    for line in body.splitlines():
        opened = _FENCE.match(line)
        if opened:
            if not fence:
                fence = opened.group(1)
            elif opened.group(1) == fence:
                fence = ""
            continue
        if fence:
            continue
        heading = _HEADING.match(line)
        if heading:
            text = _one_line(heading.group(2).rstrip(" \t#"))
            headings.append(text)
            if not first and len(heading.group(1)) == 1:
                first = text
    return headings, first


def _is_table_of_contents(body: str) -> bool:
    """Five links or more, on at least 60 % of the non-blank lines that are not headings."""
    lines = [line for line in body.splitlines() if line.strip() and not _HEADING.match(line)]
    linked = sum(1 for line in lines if _LINK.search(line))
    return linked >= 5 and linked >= 0.6 * len(lines)


def passages(runbook: Runbook) -> tuple[str, ...]:
    """Blank-line separated paragraphs of the body without its title heading; a heading is glued to
    the paragraph it introduces (the snippet shows what it is about)."""
    body = _without_title_heading(runbook.body)
    found: list[str] = []
    pending_heading = ""
    for raw in re.split(r"\n\s*\n", body):
        block = " ".join(raw.split())
        if not block:
            continue
        if _HEADING.match(block) and "\n" not in raw.strip() and not pending_heading:
            pending_heading = block
            continue
        found.append(f"{pending_heading} {block}" if pending_heading else block)
        pending_heading = ""
    if pending_heading:
        found.append(pending_heading)
    return tuple(found)


def _without_title_heading(body: str) -> str:
    fence = ""
    offset = 0
    for line in body.splitlines(keepends=True):
        opened = _FENCE.match(line)
        if opened:
            fence = "" if fence == opened.group(1) else fence or opened.group(1)
        elif not fence:
            heading = _HEADING.match(line.rstrip("\r\n"))
            if heading and len(heading.group(1)) == 1:
                return body[:offset] + body[offset + len(line) :]
        offset += len(line)
    return body
