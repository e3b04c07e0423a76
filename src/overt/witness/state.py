"""A witness's memory: per log origin, the latest cosigned size, root and note, and
the checkpoints it refused beside the ones they conflict with. Plain SQLite rows,
its own file, never the ledger."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

_SCHEMA = """
CREATE TABLE IF NOT EXISTS latest (
    origin TEXT PRIMARY KEY,
    size INTEGER NOT NULL,
    root BLOB NOT NULL,
    note TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS evidence (
    id INTEGER PRIMARY KEY,
    origin TEXT NOT NULL,
    kind TEXT NOT NULL,
    held_note TEXT NOT NULL,
    refused_note TEXT NOT NULL,
    refused_at INTEGER NOT NULL
);
"""


@dataclass(frozen=True, slots=True)
class Latest:
    size: int
    root: bytes
    note: str


@dataclass(frozen=True, slots=True)
class Evidence:
    """A refused checkpoint and the cosigned one it conflicts with."""

    origin: str
    kind: str  # "fork" or "rollback"
    held_note: str
    refused_note: str
    refused_at: int


class WitnessState:
    """The witness's SQLite file."""

    def __init__(self, path: Path) -> None:
        self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._db.executescript(_SCHEMA)

    def close(self) -> None:
        self._db.close()

    def latest(self, origin: str) -> Latest | None:
        row = self._db.execute("SELECT size, root, note FROM latest WHERE origin = ?",
                               (origin,)).fetchone()
        return None if row is None else Latest(int(row[0]), bytes(row[1]), str(row[2]))

    def advance(self, origin: str, old: int, latest: Latest) -> bool:
        """Move ``origin`` from size ``old`` (0: never seen) to ``latest``; False
        when another request moved it first (compare and swap)."""
        if old == 0:
            cur = self._db.execute(
                "INSERT OR IGNORE INTO latest (origin, size, root, note) VALUES (?, ?, ?, ?)",
                (origin, latest.size, latest.root, latest.note))
        else:
            cur = self._db.execute(
                "UPDATE latest SET size = ?, root = ?, note = ? WHERE origin = ? AND size = ?",
                (latest.size, latest.root, latest.note, origin, old))
        return cur.rowcount == 1

    def record(self, evidence: Evidence) -> None:
        self._db.execute(
            "INSERT INTO evidence (origin, kind, held_note, refused_note, refused_at)"
            " VALUES (?, ?, ?, ?, ?)",
            (evidence.origin, evidence.kind, evidence.held_note, evidence.refused_note,
             evidence.refused_at))

    def evidence(self) -> list[Evidence]:
        rows = self._db.execute("SELECT origin, kind, held_note, refused_note, refused_at"
                                " FROM evidence ORDER BY id").fetchall()
        return [Evidence(str(r[0]), str(r[1]), str(r[2]), str(r[3]), int(r[4])) for r in rows]
