"""The complete schema a ledger's database holds, as sorted text lines, on both backends.

SQLite: every table (columns, rowid or not), index (columns, uniqueness, its SQL),
trigger, view and virtual table of ``sqlite_master``, read through the pragmas so that
the order columns were added in, and a table's name before a rename, do not show.
PostgreSQL: every relation of the ledger's schema (kind, columns, types, defaults,
partitioning, options), constraint, index, trigger, view and function (arguments,
rights it runs with, settings, body), with each one's owner and grants, the schema's,
its default privileges, and ``pg_trgm``'s schema. Names that differ from run to run
(the schema, the roles) are written as ``<schema>``, ``<owner>``, ``<writer>`` and
``<migrator>``. SQL text is compared with its whitespace collapsed.

``python -m tests.ledger.schema_dump DIR`` writes the dumps of a fresh ledger on each
backend (``sqlite.txt``, ``postgres.txt``: PostgreSQL's once as migrated, once after
``setup-roles``) into ``DIR``.
"""

from __future__ import annotations

import re
import sqlite3
import sys
from pathlib import Path
from typing import Any

import psycopg

_SPACE = re.compile(r"\s+")


def _flat(sql: str | None) -> str:
    return _SPACE.sub(" ", sql or "").strip().rstrip(";").strip()


def sqlite_dump(path: str | Path) -> list[str]:
    """The schema of the SQLite ledger at ``path`` (read-only)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return _sqlite_lines(conn)
    finally:
        conn.close()


def _sqlite_lines(conn: sqlite3.Connection) -> list[str]:
    out: list[str] = []
    objects = conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master "
                           "WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name").fetchall()
    kinds = {name: (kind, wr) for _, name, kind, _, wr, _ in
             conn.execute("PRAGMA main.table_list")}
    for kind, name, table, sql in objects:
        if kind == "table":
            listed, without_rowid = kinds[name]
            head = f"table {name}: {listed}" + (" without rowid" if without_rowid else "")
            if listed == "virtual":
                head += f": {_flat(sql)}"
            out.append(head)
            for cid, col, typ, notnull, default, pk, hidden in conn.execute(
                    f'PRAGMA table_xinfo("{name}")'):
                out.append(f"  column {cid} {col} {typ!r} notnull={notnull} "
                           f"default={default} pk={pk} hidden={hidden}")
            for row in conn.execute(f'PRAGMA foreign_key_list("{name}")'):
                out.append(f"  foreign key {tuple(row)}")
            if listed == "table" and sql and "CHECK" in sql.upper():
                out.append(f"  check constraint in: {_flat(sql)}")
            indexes = []
            for _, index, unique, origin, partial in conn.execute(
                    f'PRAGMA index_list("{name}")'):
                columns = [(c, d, coll, key) for _, _, c, d, coll, key in conn.execute(
                    f'PRAGMA index_xinfo("{index}")') if key]
                made = "" if index.startswith("sqlite_autoindex") else f" {index}"
                indexes.append(f"  index{made} unique={unique} origin={origin} "
                               f"partial={partial} columns={columns}")
            out.extend(sorted(indexes))
        elif kind == "index":
            out.append(f"index {name} on {table}: {_flat(sql)}" if sql
                       else f"index (automatic) on {table}")
        elif kind == "view":
            out.append(f"view {name}: {_flat(sql)}")
            for cid, col, typ, *_ in conn.execute(f'PRAGMA table_info("{name}")'):
                out.append(f"  column {cid} {col} {typ!r}")
        else:
            out.append(f"{kind} {name} on {table}: {_flat(sql)}")
    for pragma in ("user_version", "application_id", "auto_vacuum", "page_size"):
        out.append(f"pragma {pragma} = {conn.execute(f'PRAGMA {pragma}').fetchone()[0]}")
    for version, name, _ in conn.execute("SELECT * FROM overt_migrations ORDER BY version"):
        out.append(f"migration {version}: {name}")
    return [line for line in out if not line.startswith("index (automatic)")]


def postgres_dump(conninfo: str, schema: str, names: dict[str, str]) -> list[str]:
    """The schema ``schema`` of the PostgreSQL database at ``conninfo``; ``names`` maps
    a role or schema name to the placeholder it is written as."""
    with psycopg.connect(conninfo, autocommit=True) as conn:
        lines = _postgres_lines(conn, schema)
    swaps = {schema: "<schema>", **names}
    pattern = re.compile(r"(?<!\w)(" + "|".join(
        re.escape(k) for k in sorted(swaps, key=len, reverse=True)) + r")(?!\w)")
    return [pattern.sub(lambda m: swaps[m.group(0)], line).replace("\n", "\\n")
            for line in lines]


def _rows(conn: Any, sql: str, schema: str) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in conn.execute(sql, {"s": schema}).fetchall()]


_RELATIONS = """
SELECT c.relname, c.relkind, c.relpersistence, c.reloptions, c.relispartition,
       pg_get_partkeydef(c.oid), pg_get_expr(c.relpartbound, c.oid),
       (SELECT p.relname FROM pg_inherits i JOIN pg_class p ON p.oid = i.inhparent
        WHERE i.inhrelid = c.oid), pg_get_userbyid(c.relowner), c.relacl::text,
       c.relrowsecurity
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = %(s)s AND c.relkind NOT IN ('i', 'I', 't')
ORDER BY c.relname"""

_COLUMNS = """
SELECT a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull,
       pg_get_expr(d.adbin, d.adrelid), a.attgenerated, a.attidentity,
       (SELECT collname FROM pg_collation WHERE oid = a.attcollation
        AND a.attcollation <> 100), a.attacl::text
FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE n.nspname = %(s)s AND c.relname = %(t)s AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum"""

_CONSTRAINTS = """
SELECT c.relname, k.conname, k.contype, pg_get_constraintdef(k.oid), k.condeferrable
FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = %(s)s ORDER BY 1, 2"""

_INDEXES = """
SELECT c.relname, pg_get_indexdef(c.oid), c.reloptions, pg_get_userbyid(c.relowner)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = %(s)s AND c.relkind IN ('i', 'I') ORDER BY 1"""

_TRIGGERS = """
SELECT c.relname, t.tgname, pg_get_triggerdef(t.oid), t.tgenabled
FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = %(s)s AND NOT t.tgisinternal ORDER BY 1, 2"""

_VIEWS = """
SELECT c.relname, pg_get_viewdef(c.oid)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = %(s)s AND c.relkind IN ('v', 'm') ORDER BY 1"""

_FUNCTIONS = """
SELECT p.proname, pg_get_function_identity_arguments(p.oid),
       pg_get_function_result(p.oid), l.lanname, p.prokind, p.prosecdef, p.provolatile,
       p.proisstrict, p.proconfig, pg_get_userbyid(p.proowner), p.proacl::text, p.prosrc
FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
JOIN pg_language l ON l.oid = p.prolang
WHERE n.nspname = %(s)s ORDER BY 1, 2"""

_SCHEMA = """
SELECT pg_get_userbyid(nspowner), nspacl::text FROM pg_namespace WHERE nspname = %(s)s"""

_DEFAULT_ACL = """
SELECT pg_get_userbyid(d.defaclrole), d.defaclobjtype, d.defaclacl::text
FROM pg_default_acl d JOIN pg_namespace n ON n.oid = d.defaclnamespace
WHERE n.nspname = %(s)s ORDER BY 1, 2"""

_EXTENSIONS = """
SELECT e.extname, n.nspname, n.nspacl::text FROM pg_extension e
JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'pg_trgm'"""


def _postgres_lines(conn: Any, schema: str) -> list[str]:
    out: list[str] = []
    for owner, acl in _rows(conn, _SCHEMA, schema):
        out.append(f"schema owner={owner} acl={acl}")
    for row in _rows(conn, _DEFAULT_ACL, schema):
        out.append(f"default privileges {row}")
    for name, where, acl in [tuple(r) for r in conn.execute(_EXTENSIONS)]:
        out.append(f"extension {name} in schema {where} acl={acl}")
    for (name, kind, persistence, options, partition, partkey, bound, parent, owner, acl,
         rls) in _rows(conn, _RELATIONS, schema):
        out.append(f"relation {name}: kind={kind} persistence={persistence} options={options} "
                   f"partition={partition} partkey={partkey} bound={bound} parent={parent} "
                   f"owner={owner} acl={acl} rls={rls}")
        columns = conn.execute(_COLUMNS, {"s": schema, "t": name}).fetchall()
        for position, (col, typ, notnull, default, generated, identity, coll, cacl) in \
                enumerate(columns):
            out.append(f"  column {position} {col} {typ} notnull={notnull} default={default} "
                       f"generated={generated!r} identity={identity!r} collation={coll} "
                       f"acl={cacl}")
    for table, name, kind, definition, deferrable in _rows(conn, _CONSTRAINTS, schema):
        out.append(f"constraint {name} on {table}: {kind} {definition} "
                   f"deferrable={deferrable}")
    for name, definition, options, owner in _rows(conn, _INDEXES, schema):
        out.append(f"index {name}: {definition} options={options} owner={owner}")
    for table, name, definition, enabled in _rows(conn, _TRIGGERS, schema):
        out.append(f"trigger {name} on {table}: {definition} enabled={enabled}")
    for name, definition in _rows(conn, _VIEWS, schema):
        out.append(f"view {name}: {_flat(definition)}")
    for (name, args, result, language, kind, definer, volatile, strict, config, owner, acl,
         source) in _rows(conn, _FUNCTIONS, schema):
        out.append(f"function {name}({args}) returns {result}: language={language} "
                   f"kind={kind} security_definer={definer} volatile={volatile} "
                   f"strict={strict} config={config} owner={owner} acl={acl}")
        out.append(f"  body {_flat(source)}")
    for version, name, _ in _rows(
            conn, f'SELECT * FROM "{schema}".overt_migrations ORDER BY version', schema):
        out.append(f"migration {version}: {name}")
    return out


def _fresh_dumps(out: Path) -> None:
    """Write a fresh ledger's dumps on both backends into ``out``."""
    import tempfile

    from overt.ids import new_ulid
    from overt.ledger import open_ledger
    from overt.ledger.pg_url import parse_url
    from overt.ledger.roles import setup_roles
    from tests import backends

    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ledger.db"
        open_ledger(str(path)).close_sync()  # type: ignore[attr-defined]
        (out / "sqlite.txt").write_text("\n".join(sqlite_dump(path)) + "\n")
    url = backends.new_url("postgres", Path("."))
    suffix = new_ulid().lower()[-10:]
    owner, writer = f"overt_owner_{suffix}", f"overt_writer_{suffix}"
    conninfo, schema = parse_url(url)
    try:
        open_ledger(url).close_sync()  # type: ignore[attr-defined]
        with psycopg.connect(conninfo) as conn:
            migrator = conn.execute("SELECT current_user").fetchone()[0]  # type: ignore[index]
        names = {owner: "<owner>", writer: "<writer>", migrator: "<migrator>"}
        migrated = postgres_dump(conninfo, schema, names)
        setup_roles(url, owner, writer)
        roles = postgres_dump(conninfo, schema, names)
        (out / "postgres.txt").write_text(
            "\n".join(["# as migrated", *migrated, "# after setup-roles", *roles]) + "\n")
    finally:
        backends.drop(url)
        with psycopg.connect(backends.PG_BASE, autocommit=True) as conn:
            for role in (writer, owner):
                if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s",
                                (role,)).fetchone():
                    conn.execute(f'DROP OWNED BY "{role}"')
                    conn.execute(f'DROP ROLE "{role}"')


if __name__ == "__main__":
    _fresh_dumps(Path(sys.argv[1]))
