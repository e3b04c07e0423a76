"""The README's Python example runs as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def test_the_python_example_in_the_readme_runs(tmp_path: Path) -> None:
    block = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)[0]
    out = subprocess.run([sys.executable, "-c", block], cwd=tmp_path, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("You have plenty of space. ['disk_free']")
    assert (tmp_path / "ledger.db").exists()


def test_the_readme_quick_start_has_exactly_the_two_set_up_commands() -> None:
    quick = README.read_text().split("## Quick start", 1)[1].split("##", 1)[0]
    commands = [line.split("#")[0].strip() for line in quick.splitlines()
                if line.startswith("make ")]
    assert commands == ["make demo", "make test"]
