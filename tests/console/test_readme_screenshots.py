"""The README's screenshots are what the console draws today.

Regenerate after an intended change: python -m tests.support.readme_screenshots
"""

from __future__ import annotations

import pytest

from tests.support.readme_screenshots import DOCS, SHOTS, screenshot


@pytest.mark.parametrize("name", sorted(SHOTS))
def test_readme_screenshot_is_current(name: str) -> None:
    committed = (DOCS / name).read_text(encoding="utf-8")
    assert screenshot(name) == committed, f"docs/{name} is stale: python -m tests.support.readme_screenshots"


def test_the_readme_shows_every_screenshot() -> None:
    readme = (DOCS.parent / "README.md").read_text(encoding="utf-8")
    for name in SHOTS:
        assert f"(docs/{name})" in readme
