"""A ledger URL naming another application's database: refused, and nothing written to it."""

from __future__ import annotations

import hashlib
import sqlite3
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from overt.errors import LedgerError, MigrationError, UsageError
from overt.ledger import open_ledger
from overt.ledger.pg_url import parse_url
from tests import backends
from tests.conftest import run


def _other_app(path: Path, *tables: str) -> str:
    """A SQLite file another application made (rollback journal, its own tables);
    the SHA-256 of its bytes."""
    conn = sqlite3.connect(path)
    for table in tables:
        conn.execute(f"CREATE TABLE {table} (id INTEGER, note TEXT)")
        conn.execute(f"INSERT INTO {table} VALUES (1, 'theirs')")
    conn.commit()
    conn.close()
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("tables", [("audit_log",), ("orders", "customers")])
def test_a_sqlite_file_of_another_application_is_refused_and_left_byte_for_byte(
        tmp_path: Path, tables: tuple[str, ...]) -> None:
    path = tmp_path / "app.db"
    before = _other_app(path, *tables)
    with pytest.raises(LedgerError, match="not an overt ledger") as excinfo:
        open_ledger(str(path))
    assert all(t in str(excinfo.value) for t in tables)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["app.db"]  # no -wal, no -shm


@pytest.mark.slow
def test_the_cli_on_another_applications_file_says_so_in_one_line_and_exits_5(
        tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    before = _other_app(path, "audit_log", "settings")
    for command in (["ledger", "migrate"], ["ledger", "verify"], ["runs"],
                    ["ask", "hi", "--model", f"scripted:{tmp_path / 'r.jsonl'}"]):
        (tmp_path / "r.jsonl").write_text('{"text": "hello"}\n')
        out = subprocess.run([sys.executable, "-m", "overt.cli.main", "--db", str(path),
                              *command], capture_output=True, text=True, timeout=120)
        assert out.returncode == 5, (command, out.stderr)
        assert out.stderr.count("\n") == 1 and "not an overt ledger" in out.stderr, out.stderr
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before


def test_an_empty_file_and_an_overt_ledger_still_open(tmp_path: Path) -> None:
    empty = tmp_path / "empty.db"
    empty.touch()
    for path in (empty, empty):  # new, then an overt ledger with its tables
        ledger = open_ledger(str(path))
        assert run(ledger.verify()).ok
        run(ledger.close())


@pytest.mark.postgres
def test_a_postgres_schema_holding_another_applications_audit_log_is_left_as_it_was(
        tmp_path: Path) -> None:
    backends.require_pg()
    url = backends.new_url("postgres", tmp_path)
    schema = url.rsplit("schema=", 1)[1]
    try:
        with psycopg.connect(backends.PG_BASE, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{schema}"')
            conn.execute(f'CREATE TABLE "{schema}".audit_log (id INTEGER, note TEXT)')
            conn.execute(f"INSERT INTO \"{schema}\".audit_log VALUES (1, 'theirs')")
        with pytest.raises(MigrationError, match=r"another application's tables.*\?schema="):
            open_ledger(url)
        with psycopg.connect(backends.PG_BASE, autocommit=True) as conn:
            tables = conn.execute("SELECT table_name FROM information_schema.tables "
                                  "WHERE table_schema = %s", (schema,)).fetchall()
            functions = conn.execute("SELECT p.proname FROM pg_proc p JOIN pg_namespace n "
                                     "ON n.oid = p.pronamespace WHERE n.nspname = %s",
                                     (schema,)).fetchall()
            rows = conn.execute(f'SELECT * FROM "{schema}".audit_log').fetchall()
        assert tables == [("audit_log",)] and functions == [] and rows == [(1, "theirs")]
    finally:
        backends.drop(url)


@pytest.mark.parametrize("url", ["postgresql://[::1", "postgresql://u:hunter2@[::1/x"])
def test_an_unparseable_postgres_url_is_a_usage_error_without_the_password(url: str) -> None:
    with pytest.raises(UsageError, match="invalid ledger URL") as excinfo:
        parse_url(url)
    assert "hunter2" not in str(excinfo.value)
    with pytest.raises(UsageError, match="invalid ledger URL"):
        open_ledger(url)


@pytest.mark.slow
def test_the_cli_on_an_unparseable_postgres_url_exits_2_without_a_traceback() -> None:
    out = subprocess.run([sys.executable, "-m", "overt.cli.main", "--db",
                          "postgresql://u:hunter2@[::1/x", "ledger", "verify"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2, out.stderr
    assert out.stderr == "overt: invalid ledger URL: Invalid IPv6 URL\n"
