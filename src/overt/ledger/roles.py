"""Least privilege on PostgreSQL: an owner role and a writer role for one ledger.

The **owner** owns the ledger's schema, its tables and its functions: it runs
migrations (DDL) and prunes (``overt_prune``, a ``SECURITY DEFINER`` function only
it may execute, deleting only through the ``through_seq`` sealed by the
``ledger.pruned`` entry at the head of the chain; only the owner may append that
entry). The **writer**, the role ``overt serve`` connects as, may ``SELECT`` every
table and ``INSERT`` into two: ``audit_log`` and ``content_blobs``. Every other
table (the trail index, the memory tables and their search index, the Merkle
tree's tiles, ``overt_migrations``) is written by the owner's own code: triggers
and ``overt_write_<table>`` functions that run as the owner and derive or check
each row from the chain (:mod:`overt.ledger.schema.derived`); the writer may
execute those functions and nothing else that runs as the owner. It has no
``UPDATE``, ``DELETE`` or ``TRUNCATE`` on any table and no DDL, and the
append-only guards refuse any delete not run as the owner, whatever the session
sets.

Run as a role that may create roles (a superuser or ``CREATEROLE``), after the
ledger is migrated: ``overt --db URL ledger setup-roles --owner O --writer W``.
Roles that exist already are reused (their passwords are left as they are). Run it
again after a migration that adds a table or function: it grants what is listed
above and revokes everything else the writer held (the same statements each time,
so a second run changes nothing).
"""

from __future__ import annotations

import re

from overt.errors import LedgerError, UsageError
from overt.ledger.sql import WRITE_FUNCTION_PREFIX

_ROLE_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def _role(name: str) -> str:
    if not _ROLE_NAME.match(name):
        raise UsageError(f"invalid role name {name!r}: use [a-z_][a-z0-9_]*")
    return f'"{name}"'


WRITER_TABLES = ("audit_log", "content_blobs")
"""The tables the writer may ``INSERT`` into (it may ``SELECT`` every table)."""


def setup_roles(url: str, owner: str, writer: str) -> list[str]:
    """Create (or reuse) ``owner`` and ``writer`` and grant them the ledger at ``url``
    (see the module docstring); the statements run, in order (all in one
    transaction). Idempotent: whatever granted the writer more than this, it is
    revoked.

    Raises:
        UsageError: a role name is not a plain identifier, the two are the same,
            or ``url`` is not a PostgreSQL ledger.
        LedgerError: the database refused (for instance: not allowed to create roles).
    """
    import psycopg

    from overt.ledger.pg_url import parse_url

    if owner == writer:
        raise UsageError("the owner and the writer must be two roles")
    if not url.startswith(("postgresql://", "postgres://")):
        raise UsageError("setup-roles is for a PostgreSQL ledger (--db postgresql://...)")
    o, w = _role(owner), _role(writer)
    conninfo, schema = parse_url(url)
    s = f'"{schema}"'
    done: list[str] = []
    try:
        with psycopg.connect(conninfo, autocommit=False) as conn:
            def run(statement: str) -> None:
                conn.execute(statement)
                done.append(statement)

            for name, quoted in ((owner, o), (writer, w)):
                if not conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s",
                                    (name,)).fetchone():
                    run(f"CREATE ROLE {quoted} LOGIN")
            # every relation of the schema (partitions too: a grant on a partitioned
            # table is not one on its partitions), none an extension brought
            relations = conn.execute(
                "SELECT c.relname, c.relkind = 'S' FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = %s AND c.relkind IN ('r', 'v', 'm', 'p', 'S') "
                "AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_class'::regclass "
                "AND d.objid = c.oid AND d.deptype = 'e') ORDER BY 1", (schema,)).fetchall()
            if "audit_log" not in {name for name, _ in relations}:
                raise UsageError(f"no ledger in schema {schema}: run `overt ledger migrate` "
                                 "first")
            functions = conn.execute(
                "SELECT format('%%I.%%I(%%s)', n.nspname, p.proname, "
                "pg_get_function_identity_arguments(p.oid)), p.proname, p.prosecdef "
                "FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
                "WHERE n.nspname = %s AND p.prokind = 'f' "
                "AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass "
                "AND d.objid = p.oid AND d.deptype = 'e') ORDER BY 1", (schema,)).fetchall()
            run(f"ALTER SCHEMA {s} OWNER TO {o}")
            run(f"REVOKE ALL ON SCHEMA {s} FROM {w}")
            run(f"GRANT USAGE ON SCHEMA {s} TO {w}")
            for name, sequence in relations:
                if not sequence:  # (a sequence goes with the table whose column owns it)
                    run(f'ALTER TABLE {s}."{name}" OWNER TO {o}')
                run(f'REVOKE ALL ON {s}."{name}" FROM {w}, PUBLIC')
                run(f'GRANT SELECT ON {s}."{name}" TO {w}')
            run(f"GRANT INSERT ON {', '.join(f'{s}.{t}' for t in WRITER_TABLES)} TO {w}")
            # memory search inside words uses pg_trgm's operator class, wherever the
            # extension was installed: both roles need to reach it
            trgm = conn.execute("SELECT n.nspname FROM pg_extension e JOIN pg_namespace n "
                                "ON n.oid = e.extnamespace WHERE e.extname = 'pg_trgm'").fetchone()
            if trgm is not None and trgm[0] != schema:
                # one schema shared by every ledger of the database: two setups granting
                # on it at once fail ("tuple concurrently updated"), so they take turns
                conn.execute("SELECT pg_advisory_xact_lock(hashtext('overt setup-roles: '"
                             " || %s))", (trgm[0],))
                run(f'GRANT USAGE ON SCHEMA "{trgm[0]}" TO {o}, {w}')
            for signature, name, definer in functions:
                run(f"ALTER FUNCTION {signature} OWNER TO {o}")
                if definer:  # runs as the owner: only what the writer is meant to call
                    run(f"REVOKE ALL ON FUNCTION {signature} FROM PUBLIC, {w}")
                    if name.startswith(WRITE_FUNCTION_PREFIX):
                        run(f"GRANT EXECUTE ON FUNCTION {signature} TO {w}")
            # tables a later migration creates: the writer reads them, and nothing more
            run(f"ALTER DEFAULT PRIVILEGES FOR ROLE {o} IN SCHEMA {s} "
                f"REVOKE ALL ON TABLES FROM {w}")
            run(f"ALTER DEFAULT PRIVILEGES FOR ROLE {o} IN SCHEMA {s} "
                f"GRANT SELECT ON TABLES TO {w}")
    except psycopg.Error as exc:
        raise LedgerError(f"cannot set up roles: {exc}") from exc
    return done
