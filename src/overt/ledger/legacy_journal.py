"""Reading the journal an earlier overt kept in front of SQLite, once, to retire it.

Before the writer thread (:mod:`overt.ledger.sqlite`), a SQLite ledger committed
each record to a file beside the database, ``<db>-overt-journal``, and copied it
into SQLite later. A ledger last written by that overt may hold records in its
journal only. Opening it stores them into SQLite, checks that they continue the
chain SQLite holds, commits, and renames the file ``<db>-overt-journal.retired``.
Nothing here writes a journal.

**The old format.** A frame is an 8-byte header (payload length, CRC-32 of the
payload, both little-endian ``uint32``) and a payload in :mod:`marshal` format
version 4: this module is the one place overt still reads ``marshal``, because
that is what the old files are. The first frame is the *base* ``{"base": [seq,
hash], "python": "3.x"}``: the head SQLite held when the file was started. Each
later frame is a batch as it was to be stored: ``{"entries": [[seq, id, kind,
at, turn_id, session_id, data, prev_hash, hash], ...], "contents": [[key, seq,
digest, body, created_at], ...], "rows": [[table, [column, ...], [value, ...]],
...], "prune": through_seq}`` (keys other than ``entries`` optional).

A short last frame is a write the old process died in the middle of: it was
never committed, and is dropped with a warning. Any other frame that does not
match its checksum is corruption: opening fails and names it, the file stays
where it is, and nothing is stored.
"""

from __future__ import annotations

import contextlib
import logging
import marshal
import os
import sqlite3
import struct
import zlib
from typing import Any

from overt.errors import LedgerError
from overt.ledger import retention, sql, trail_index
from overt.ledger.canonical import GENESIS
from overt.ledger.chain import row_to_entry
from overt.ledger.schema.sqlite import lift_delete_guards, restore_delete_guards
from overt.ledger.sql import SQLITE as D

log = logging.getLogger("overt.ledger")

HEADER = struct.Struct("<II")
SUFFIX = "-overt-journal"
RETIRED = ".retired"

Payload = dict[str, Any]


def journal_path(db_path: str) -> str:
    return db_path + SUFFIX


def read_frames(path: str) -> list[Payload]:
    """The payloads of the journal at ``path``, in order.

    Raises:
        LedgerError: a frame is corrupt, or cannot be read by this Python.
    """
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise LedgerError(f"cannot read journal {path}: {exc}") from exc
    payloads: list[Payload] = []
    pos = 0
    while pos < len(data):
        if len(data) - pos < HEADER.size:
            _torn(path, pos)
            break
        length, crc = HEADER.unpack_from(data, pos)
        body = data[pos + HEADER.size:pos + HEADER.size + length]
        if len(body) < length:
            _torn(path, pos)
            break
        if zlib.crc32(body) != crc:
            raise LedgerError(f"journal {path} is corrupt at byte {pos}: a frame does not "
                              "match its checksum; nothing was stored from it")
        try:
            payload = marshal.loads(body)
        except (ValueError, EOFError, TypeError) as exc:
            raise LedgerError(f"journal {path}: the frame at byte {pos} cannot be read "
                              f"({exc}); open the ledger with the Python named in its first "
                              "frame") from exc
        if not isinstance(payload, dict):
            raise LedgerError(f"journal {path} is corrupt at byte {pos}: not a frame")
        payloads.append(payload)
        pos += HEADER.size + length
    return payloads


def _torn(path: str, pos: int) -> None:
    log.warning("overt.legacy_journal_torn_tail %s: the bytes from %d are a write its process "
                "died in; they were never committed and are not stored", path, pos)


def upgrade(conn: sqlite3.Connection, db_path: str) -> int:
    """Store what the journal beside ``db_path`` holds that SQLite does not, then
    retire the journal; the entries stored (0 when there is no journal).

    Raises:
        LedgerError: the journal is corrupt or does not continue SQLite's chain;
            nothing was stored and the journal stays.
    """
    path = journal_path(db_path)
    if not os.path.exists(path):
        return 0
    payloads = read_frames(path)
    stored = 0
    conn.execute("BEGIN IMMEDIATE")
    try:
        row = conn.execute(sql.HEAD).fetchone()
        head = (int(row[0]), str(row[1])) if row else (0, GENESIS)
        for payload in payloads:
            head, n = _store(conn, payload, head, path)
            stored += n
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    with contextlib.suppress(FileNotFoundError):  # another process retired it first
        os.replace(path, path + RETIRED)
    log.info("overt.legacy_journal_retired %s: %d entries stored", path, stored)
    return stored


def _store(conn: sqlite3.Connection, payload: Payload, head: tuple[int, str],
           path: str) -> tuple[tuple[int, str], int]:
    base = payload.get("base")
    if base is not None:
        if int(base[0]) > head[0]:
            raise LedgerError(f"journal {path} starts after entry {base[0]}, but the database "
                              f"holds entries only to {head[0]}")
        return head, 0
    entries = payload.get("entries") or []
    if not entries:
        raise LedgerError(f"journal {path}: a frame holds no entries")
    first, last = int(entries[0][0]), int(entries[-1][0])
    if last <= head[0]:  # stored already: it must be what SQLite holds
        row = conn.execute("SELECT hash FROM audit_log WHERE seq = ?", (last,)).fetchone()
        if row is not None and row[0] != entries[-1][8]:
            raise LedgerError(f"journal {path}: its entry {last} is not the database's")
        return head, 0
    if first != head[0] + 1 or entries[0][7] != head[1]:
        raise LedgerError(f"journal {path}: its entry {first} does not continue the chain the "
                          f"database holds (to entry {head[0]})")
    contents = payload.get("contents") or []
    conn.executemany(sql.insert_content(D), contents)
    conn.executemany(sql.insert_entries(D), entries)
    indexed = trail_index.index_rows(
        [row_to_entry(r) for r in entries], {c[2]: int(c[1]) for c in contents})
    if indexed:
        conn.executemany(sql.insert_trail_index(D), indexed)
    for table, columns, values in payload.get("rows") or ():
        try:
            statement = sql.insert_row(D, table, columns)
        except ValueError as exc:
            raise LedgerError(f"journal {path}, entries {first}-{last}: {exc}") from exc
        conn.execute(statement, values)
    through = payload.get("prune")
    if through is not None:
        retention.carry_bodies(conn, D, through)
        lift_delete_guards(conn)
        conn.execute(sql.delete_content_through(D), (through,))
        conn.execute(sql.delete_trail_index_through(D), (through,))
        conn.execute(sql.delete_entries_through(D), (through,))
        restore_delete_guards(conn)
    return (last, str(entries[-1][8])), len(entries)
