"""Every code example of the README and the documentation runs as written.

How each kind of block runs, and how a page marks one that cannot, is in
:mod:`tests.docs.examples`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs.examples import ROOT, pages, run_page


@pytest.mark.slow
@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_page_s_examples_run_as_written(page: Path, tmp_path: Path) -> None:
    run_page(page, tmp_path)


def test_the_readme_quick_start_has_exactly_the_two_set_up_commands() -> None:
    quick = (ROOT / "README.md").read_text().split("## Quick start", 1)[1].split("\n## ", 1)[0]
    commands = [line.split("#")[0].strip() for line in quick.splitlines()
                if line.startswith("make ")]
    assert commands == ["make demo", "make test"]


def test_the_readme_is_short() -> None:
    assert len((ROOT / "README.md").read_text().splitlines()) <= 250
    assert len((ROOT / "benchmarks" / "README.md").read_text().splitlines()) <= 200
