"""The PostgreSQL server the benchmarks run on, and a throwaway schema on it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from overt.ids import new_ulid

PG = os.environ.get("OVERT_BENCH_PG", "postgresql://127.0.0.1:5432/test")
"""The server and database (env ``OVERT_BENCH_PG``); each run makes a schema of its own."""


def unreachable() -> str | None:
    """Why the benchmarks cannot use :data:`PG` (no driver, no server answering), or
    ``None`` when they can: a benchmark then prints its SQLite figures alone."""
    try:
        import psycopg
    except ImportError:
        return "the PostgreSQL driver is not installed (overt[postgres])"
    try:
        psycopg.connect(PG, connect_timeout=3).close()
    except psycopg.Error as exc:
        return f"no server at {PG} ({type(exc).__name__})"
    return None


@contextmanager
def scratch_schema(name: str) -> Iterator[tuple[str, str]]:
    """A ledger URL on a new schema ``overt_bench_NAME_<ulid>`` of :data:`PG`, and the
    schema's name; the schema is dropped afterwards, whatever happened inside."""
    schema = f"overt_bench_{name}_{new_ulid().lower()}"
    try:
        yield f"{PG}?schema={schema}", schema
    finally:
        import psycopg

        with psycopg.connect(PG, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
