"""Numbered migrations, one module per backend, with the same numbers and meaning on both.

:data:`NAMES` is the one list of what each version does; each backend's module
pairs a version with the statements that do it there (a step that the other
backend's layout already satisfies is recorded, and changes nothing).
"""

from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any

from overt.clock import now_iso
from overt.errors import MigrationError

NAMES: dict[int, str] = {
    1: "initial: audit_log chain, content_blobs, append-only guards, views",
    2: "failures index counts plugin failures (hook.error)",
    3: "once-only entries: one per (kind, claim)",
    4: "reasoning steps: index by phase and time, reasoning_steps view",
    5: "memory: nodes, links, full-text search",
    6: "indexes that append: kind and time without the high-volume kinds, steps by time",
    7: "memory search by actor: each actor's nodes together in the index",
    8: "memory search ranks without per-node lengths (SQLite's index; PostgreSQL's already)",
    9: "content keyed so a commit appends to one page (SQLite: seq << 20 | n)",
    10: "prunes only through the sealed path: no row or session setting opens a guard",
    11: "trail index in plain columns: each session's trail entries together",
    12: "Merkle tree: stored subtrees (tiles of 256 entries, a prune's edge)",
    13: "memory search indexes each word's first three characters (SQLite; GIN already does)",
    14: "trail index keyed by session, kind and seq: a trail reads each kind as one range",
    15: "failed replies by the claim they were owed under: a sweep counts one reply's",
    16: "calls outside a turn by id, and replies awaiting an approval: approvals and a "
        "delivery sweep read what they concern",
    17: "roles: the writer appends; the owner's triggers and functions write the rest "
        "(PostgreSQL; SQLite has no roles)",
    18: "memory search finds text inside words: an index of trigrams (SQLite: FTS5 "
        "trigram; PostgreSQL: pg_trgm)",
    19: "memory provenance: each memory row names its session, tool call and origin, "
        "as its entry does",
    20: "turns by cost and by duration: a page of the dearest or slowest turns is one range",
}


def refuse_newer(applied: Iterable[int], ledger: str) -> None:
    """Refuse a ledger whose schema a later overt brought past the versions this one
    knows: its rows may mean what this code cannot tell, so nothing is read or written.

    Raises:
        MigrationError: which version, and what to do.
    """
    newer = max((v for v in applied if v > max(NAMES)), default=None)
    if newer is not None:
        raise MigrationError(
            f"ledger {ledger} has schema version {newer}, newer than this overt knows "
            f"(up to {max(NAMES)}); nothing was read or written. If a later overt migrated "
            f"it, upgrade overt to use it. If none did, row {newer} of overt_migrations was "
            "written by someone with write access to the database, not by overt: as the "
            "ledger's owner, remove that row (README, \"Migrations\": a row no overt wrote)")


def apply_pending(conn: Any, migrations: Sequence[tuple[int, str, str]],
                  fills: Mapping[int, Callable[[Any], None]], *, ph: str,
                  transaction: Callable[[], AbstractContextManager[Any]],
                  run: Callable[[str], None]) -> list[int]:
    """Apply on ``conn`` each of ``migrations`` not recorded yet, each in a
    ``transaction()`` of its own, after reading again what is recorded (so processes
    migrating at once each apply a migration once): its script by ``run``, then its
    Python step in ``fills``, then its row in ``overt_migrations``. The versions
    applied (``ph``: the placeholder)."""
    applied: list[int] = []
    for version, name, script in migrations:
        with transaction():
            if conn.execute(f"SELECT 1 FROM overt_migrations WHERE version = {ph}",
                            (version,)).fetchone():
                continue
            run(script)
            fill = fills.get(version)
            if fill is not None:
                fill(conn)
            conn.execute(f"INSERT INTO overt_migrations VALUES ({ph}, {ph}, {ph})",
                         (version, name, now_iso()))
            applied.append(version)
    return applied
