"""Flags with bad values: argparse's usage error (exit 2) or overt's own, never a
traceback (an OverflowError from SQLite for a huge --limit, a FileNotFoundError or
IsADirectoryError for an --output that cannot be written)."""

from __future__ import annotations

from pathlib import Path

import pytest

from overt.cli.main import main


@pytest.mark.parametrize("argv", [["runs", "--limit", "99999999999999999999"],
                                  ["runs", "--limit", "-5"], ["runs", "--limit", "x"],
                                  ["sessions", "--limit", "0"]])
def test_a_limit_out_of_range_is_a_usage_error(tmp_path: Path, argv: list[str],
                                               capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--db", str(tmp_path / "l.db"), *argv])
    assert exited.value.code == 2
    assert "--limit" in capsys.readouterr().err


@pytest.mark.slow
def test_an_output_that_cannot_be_written_is_a_usage_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "l.db")
    replies = tmp_path / "replies.jsonl"
    replies.write_text('{"text": "an answer"}\n')
    assert main(["--db", db, "ask", "a question", "--model", f"scripted:{replies}",
                 "--json"]) == 0
    turn_id = __import__("json").loads(capsys.readouterr().out)["turn_id"]
    for argv in (["ledger", "export", "--output", str(tmp_path)],
                 ["ledger", "export", "--output", str(tmp_path / "absent" / "x.jsonl")],
                 ["export", turn_id, "--output", str(tmp_path)]):
        assert main(["--db", db, *argv]) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("overt: --output: cannot write"), (argv, err)
    assert main(["--db", db, "ledger", "verify"]) == 0


@pytest.mark.parametrize(("argv", "flag"), [
    (["serve", "--port", "70000"], "--port"),  # was served on 4464 (70000 - 65536)
    (["serve", "--port", "-5"], "--port"),
    (["serve", "--max-body-bytes", "0"], "--max-body-bytes"),  # was a ValueError traceback
    (["serve", "--max-body-bytes", "-1"], "--max-body-bytes"),
])
def test_a_serve_port_or_body_size_out_of_range_is_a_usage_error(
        tmp_path: Path, argv: list[str], flag: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--db", str(tmp_path / "l.db"), *argv])
    assert exited.value.code == 2
    assert flag in capsys.readouterr().err
