"""The baseline: one migration per backend makes 0.1.0's schema whole, every table of
it append-only, and no migration a release shipped is edited afterwards."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from overt.ledger import open_ledger, schema
from overt.ledger.pg_url import parse_url
from overt.ledger.schema import postgres as pg_schema
from overt.ledger.schema import sqlite as sqlite_schema
from tests.ledger.schema_dump import postgres_dump, sqlite_dump

SHIPPED = {
    "sqlite": {1: "9a9db12f6119988a6c9d1bfee1329d4314c3383cd0c39b994cf9ab6e0e135100"},
    "postgres": {1: "f7da57bb7f0a34c2cad75f9ca7bd1c246797822744b914814f9998443f36943b"},
}
"""The SHA-256 of each migration's statements, by backend and version."""


def test_no_shipped_migration_is_edited() -> None:
    for backend, module in (("sqlite", sqlite_schema), ("postgres", pg_schema)):
        made = {version: hashlib.sha256(script.encode()).hexdigest()
                for version, _, script in module.MIGRATIONS}
        for version, digest in SHIPPED[backend].items():
            assert made.get(version) == digest, (
                f"{backend} migration {version} is not as it was recorded: until the "
                "release that ships it is tagged, record its new digest in SHIPPED; after, "
                f"put it back and make the change migration {max(schema.NAMES) + 1}")
        assert set(made) == set(SHIPPED[backend]) == set(schema.NAMES), (
            "record each new migration's digest in SHIPPED")


def _guards(lines: list[str], prefix: str) -> dict[str, set[str]]:
    """Each table's triggers, from a schema dump."""
    found: dict[str, set[str]] = {}
    for line in lines:
        if line.startswith(prefix):
            name, table = line[len(prefix):].split(":", 1)[0].split(" on ")
            found.setdefault(table, set()).add(name)
    return found


def test_every_table_of_a_new_ledger_is_append_only(ledger: Any, ledger_url: str) -> None:
    """Every table holds a record, guarded against UPDATE and DELETE (and on PostgreSQL
    TRUNCATE) for every role; the search indexes, rebuilt from ``memory_nodes``, are
    indexes, not records."""
    if "schema=" not in ledger_url:
        lines = sqlite_dump(ledger_url)
        tables = {line.split()[1].rstrip(":") for line in lines
                  if line.startswith("table ") and line.split()[2] == "table"}
        guards = _guards(lines, "trigger ")
        assert tables >= {"audit_log", "content_blobs", "trail_index", "merkle_nodes",
                          "overt_migrations", "memory_nodes", "memory_search_rows"}
        for table in tables:
            assert {f"{table}_no_update", f"{table}_no_delete"} <= guards[table], table
        for line in lines:
            if line.startswith("trigger ") and "_no_" in line.split()[1]:
                table, kind = line.split()[3].rstrip(":"), line.split()[1].rsplit("_", 1)[1]
                assert line.endswith(  # refused whatever the row or the session
                    f"BEFORE {kind.upper()} ON {table} BEGIN SELECT RAISE(ABORT, "
                    f"'overt ledger is append-only: {kind.upper()} on {table}'); END"), line
        return
    conninfo, name = parse_url(ledger_url)
    lines = postgres_dump(conninfo, name, {})
    tables = {line.split()[1].rstrip(":") for line in lines
              if line.startswith("relation ") and ("kind=r " in line or "kind=p " in line)
              and "partition=False" in line} - {"memory_search", "memory_trigrams"}
    assert tables >= {"audit_log", "content_blobs", "trail_index", "merkle_nodes",
                      "overt_migrations", "memory_nodes"}
    guards = _guards(lines, "trigger ")
    pruned = {"audit_log", "content_blobs", "trail_index"}
    for table in tables:
        assert {f"{table}_append_only", f"{table}_no_truncate"} <= guards[table], table
        [row] = [line for line in lines if line.startswith(f"trigger {table}_append_only ")]
        gate = "'gated'" if table in pruned else ""  # only overt_prune's owner, sealed
        assert row.endswith(f"BEFORE DELETE OR UPDATE ON <schema>.{table} FOR EACH ROW "
                            f"EXECUTE FUNCTION <schema>.overt_append_only({gate}) "
                            "enabled=O"), row


def test_a_ledger_made_by_the_baseline_opens_again_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    open_ledger(str(path)).close_sync()  # type: ignore[attr-defined]
    made = sqlite_dump(path)
    for read_only in (False, True):
        again: Any = open_ledger(str(path), read_only=read_only, create=False)
        assert again.schema_versions() == [1]
        again.close_sync()
    assert sqlite_dump(path) == made
