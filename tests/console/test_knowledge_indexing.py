"""The console indexes the runbook folder in the background once its engine is open: the screen stays
live, a large folder says when indexing starts and ends, and the first lookup finds the index built."""

from __future__ import annotations

from pathlib import Path

from tests.support.console import SIZE, engine_ready, make_app, wait_until
from tests.support.resilience import write_config
from tools.knowledge.adapter import PROGRESS_STEP


async def test_a_large_runbook_folder_is_indexed_in_the_background_and_says_so(tmp_path: Path) -> None:
    runbooks = tmp_path / "runbooks"
    runbooks.mkdir()
    total = PROGRESS_STEP + 10
    for n in range(total):
        (runbooks / f"rb-{n}.md").write_text(f"# Runbook {n}\n\nservice-{n}\n", encoding="utf-8")
    config = write_config(tmp_path / "diagnose.toml", {"knowledge": {"path": str(runbooks)}})
    app = make_app(tmp_path, "evidence-backed-diagnosis", config=config)
    async with app.run_test(size=SIZE) as pilot:
        await engine_ready(pilot)

        def said() -> list[str]:
            return [n.message for n in app._notifications if n.title == "Knowledge"]

        await wait_until(lambda: len(said()) == 2, pilot, what="indexing to finish")
        assert said() == [f"Indexing {total:,} runbooks…", f"Runbooks indexed: {total:,}"]


async def test_a_small_folder_is_indexed_without_a_word(tmp_path: Path) -> None:
    app = make_app(tmp_path, "evidence-backed-diagnosis")
    async with app.run_test(size=SIZE) as pilot:
        await engine_ready(pilot)
        await app.workers.wait_for_complete()
        assert not [n for n in app._notifications if n.title == "Knowledge"]
