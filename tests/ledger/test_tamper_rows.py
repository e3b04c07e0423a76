"""A ledger whose rows or schema overt cannot understand, on both backends: an entry's
``data`` edited behind the ledger's back to something that is not a JSON object is
refused as a :class:`LedgerIntegrityError` by every reader (never a traceback of
``json`` or a ``TypeError`` from the CLI's table), and a ledger a later overt migrated
past the versions this code knows is refused before anything is written to it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from overt.cli.main import main
from overt.errors import LedgerError, LedgerIntegrityError, MigrationError
from overt.ledger import open_ledger
from overt.ledger.base import Ledger
from overt.ledger.schema import NAMES
from overt.models.fake import ScriptedModel
from overt.sessions import list_sessions
from tests.backends import Raw
from tests.conftest import RuntimeFactory, cli_message, run

NOT_OBJECTS = ["{not json", "[1, 2]", "5", "null"]


def one_turn(make_runtime: RuntimeFactory) -> Any:
    result = run(make_runtime(ScriptedModel(["an answer"])).respond(cli_message("a question")))
    assert result.error is None
    return result


@pytest.mark.slow
@pytest.mark.parametrize("data", NOT_OBJECTS)
def test_an_entry_whose_data_is_not_a_json_object_is_refused_by_every_reader(
    make_runtime: RuntimeFactory, ledger: Ledger, raw: Raw, ledger_url: str, data: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    result = one_turn(make_runtime)
    raw.drop_guards().execute("UPDATE audit_log SET data = ? WHERE kind = 'turn.started'",
                              (data,))
    with pytest.raises(LedgerIntegrityError, match="changed behind the ledger's back"):
        run(ledger.entries(turn_id=result.turn_id))
    with pytest.raises(LedgerIntegrityError, match="changed behind the ledger's back"):
        run(list_sessions(ledger))
    with pytest.raises(LedgerError):  # SQLite's and PostgreSQL's JSON readers refuse it
        run(ledger.recent_turns())  # first; else the row's fields are checked
    assert not run(ledger.verify()).ok
    capsys.readouterr()
    for argv in (["runs"], ["show", result.turn_id], ["sessions"],
                 ["trail", result.session_id], ["ledger", "export"]):
        assert main(["--db", ledger_url, *argv]) == 5, argv
        err = capsys.readouterr().err
        assert err.startswith("overt: ") and "Traceback" not in err, (argv, err)


def test_a_turn_whose_fields_are_not_what_overt_writes_is_refused_by_runs(
    make_runtime: RuntimeFactory, ledger: Ledger, raw: Raw
) -> None:
    """The ``turns`` view reads fields out of valid JSON: a source that is not text, or
    tools_used that is not a list, is named rather than passed to the table."""
    result = one_turn(make_runtime)
    raw.drop_guards().execute("UPDATE audit_log SET data = ? WHERE kind = 'turn.completed'",
                              ('{"status": "completed", "tools_used": "rm -rf", '
                               '"duration_ms": 3}',))
    with pytest.raises(LedgerIntegrityError, match=f"turn {result.turn_id}'s entries"):
        run(ledger.recent_turns())


def test_a_sqlite_entry_whose_data_is_not_utf8_is_refused(
    make_runtime: RuntimeFactory, ledger: Ledger, raw: Raw
) -> None:
    if raw.pg:
        pytest.skip("PostgreSQL's TEXT holds only valid text")
    result = one_turn(make_runtime)
    raw.drop_guards().execute("UPDATE audit_log SET data = x'ff00fe' WHERE kind = 'turn.started'")
    with pytest.raises(LedgerIntegrityError, match="not JSON"):
        run(ledger.entries(turn_id=result.turn_id))


def test_a_ledger_of_a_newer_schema_is_refused_and_not_written(
    make_runtime: RuntimeFactory, ledger: Ledger, raw: Raw, ledger_url: str,
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    one_turn(make_runtime)
    replies = tmp_path / "replies.jsonl"
    replies.write_text('{"text": "hello"}\n')
    newer = max(NAMES) + 1
    raw.execute("INSERT INTO overt_migrations VALUES (?, 'a later overt', '2030-01-01')",
                (newer,))
    before = raw.query("SELECT count(*), max(seq) FROM audit_log")
    for read_only in (False, True):
        with pytest.raises(MigrationError, match=f"schema version {newer}, newer than"):
            open_ledger(ledger_url, read_only=read_only)
    capsys.readouterr()
    assert main(["--db", ledger_url, "ask", "hi", "--model", f"scripted:{replies}"]) == 5
    err = capsys.readouterr().err
    # what to do either way: a later overt wrote it, or someone with write access did
    # (on PostgreSQL not the writer role: tests/ledger/test_roles.py)
    assert f"schema version {newer}" in err and "upgrade overt" in err
    assert "remove that row" in err and "owner" in err
    assert raw.query("SELECT count(*), max(seq) FROM audit_log") == before


REMOVE_PLANTED_VERSION = {
    # README, "Migrations": a row no overt wrote, removed as the ledger's owner
    "postgres": ["BEGIN",
                 "ALTER TABLE overt_migrations DISABLE TRIGGER overt_migrations_append_only",
                 "DELETE FROM overt_migrations WHERE version = 999",
                 "ALTER TABLE overt_migrations ENABLE TRIGGER overt_migrations_append_only",
                 "COMMIT"],
    "sqlite": ["DROP TRIGGER overt_migrations_no_delete",
               "DELETE FROM overt_migrations WHERE version = 999"],
}


def test_a_planted_version_row_is_removed_as_the_readme_says_and_the_ledger_opens(
    make_runtime: RuntimeFactory, ledger: Ledger, raw: Raw, ledger_url: str
) -> None:
    one_turn(make_runtime)
    raw.execute("INSERT INTO overt_migrations VALUES (999, 'planted', '2030-01-01')")
    with pytest.raises(MigrationError, match="schema version 999"):
        open_ledger(ledger_url)
    for statement in REMOVE_PLANTED_VERSION["postgres" if raw.pg else "sqlite"]:
        raw.execute(statement)
    opened: Any = open_ledger(ledger_url)
    try:
        assert run(opened.verify()).ok
        with pytest.raises(raw.append_only_error):  # the guard is back
            raw.execute("DELETE FROM overt_migrations WHERE version = 1")
    finally:
        opened.close_sync()
