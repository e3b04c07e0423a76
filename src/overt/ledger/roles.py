"""Least privilege on PostgreSQL: an owner role and a writer role for one ledger.

The **owner** owns the ledger's schema, its tables and its functions: it runs
migrations (DDL) and prunes (``overt_prune``, a ``SECURITY DEFINER`` function only
it may execute, deleting only through the ``through_seq`` sealed by the
``ledger.pruned`` entry at the head of the chain). The **writer**, the role
``overt serve`` connects as, may only ``SELECT`` and ``INSERT``: it has no
``UPDATE``, ``DELETE`` or ``TRUNCATE`` on any table, cannot execute
``overt_prune``, and the append-only guards refuse any delete not run as the
owner, whatever the session sets.

Run once, as a role that may create roles (a superuser or ``CREATEROLE``), after
the ledger is migrated: ``overt --db URL ledger setup-roles --owner O --writer W``.
Roles that exist already are reused (their passwords are left as they are).
"""

from __future__ import annotations

import re

from overt.errors import LedgerError, UsageError

_ROLE_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def _role(name: str) -> str:
    if not _ROLE_NAME.match(name):
        raise UsageError(f"invalid role name {name!r}: use [a-z_][a-z0-9_]*")
    return f'"{name}"'


def setup_roles(url: str, owner: str, writer: str) -> list[str]:
    """Create (or reuse) ``owner`` and ``writer`` and grant them the ledger at ``url``;
    the statements run, in order (all in one transaction).

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
            tables = [r[0] for r in conn.execute(
                "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = %s AND c.relkind IN ('r', 'v', 'm', 'p') ORDER BY 1",
                (schema,)).fetchall()]
            if "audit_log" not in tables:
                raise UsageError(f"no ledger in schema {schema}: run `overt ledger migrate` "
                                 "first")
            run(f"ALTER SCHEMA {s} OWNER TO {o}")
            run(f"GRANT USAGE ON SCHEMA {s} TO {w}")
            run(f"REVOKE CREATE ON SCHEMA {s} FROM {w}")
            for table in tables:
                run(f'ALTER TABLE {s}."{table}" OWNER TO {o}')
                run(f'REVOKE ALL ON {s}."{table}" FROM {w}, PUBLIC')
                run(f'GRANT SELECT, INSERT ON {s}."{table}" TO {w}')
            run(f"GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA {s} TO {w}")
            for function in ("overt_append_only()", "overt_sealed_through()",
                             "overt_prune(bigint)"):
                run(f"ALTER FUNCTION {s}.{function} OWNER TO {o}")
            run(f"REVOKE ALL ON FUNCTION {s}.overt_prune(bigint) FROM PUBLIC, {w}")
            run(f"ALTER DEFAULT PRIVILEGES FOR ROLE {o} IN SCHEMA {s} "
                f"GRANT SELECT, INSERT ON TABLES TO {w}")
    except psycopg.Error as exc:
        raise LedgerError(f"cannot set up roles: {exc}") from exc
    return done
