"""The PostgreSQL ledger's long reads: a trail, and ``verify``.

Both read in one snapshot (``REPEATABLE READ``), so a writer committing
meanwhile neither blocks them nor shows them half of a commit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from psycopg.abc import Buffer
from psycopg.adapt import Loader
from psycopg.pq import Format

from overt.ledger import memory_check, request_parts, sql, trail_index
from overt.ledger.base import TrailRows, VerifyReport
from overt.ledger.canonical import digest_bytes
from overt.ledger.chain import (
    Counted,
    Progress,
    began_pruned_on,
    body_text,
    content_checked,
    verify_payloads,
    with_body_check,
)
from overt.ledger.sql import POSTGRES as D

TRAIL_WORK_MEM = "64MB"
"""The sort memory of one trail read (a rare, whole-session read), for its
transaction alone: 50,000 steps with their text are about 15 MB, which the
default (4 MB) sorts on disk."""


class _Utf8Body(Loader):
    """A body (bytea) as the text it holds. PostgreSQL's ``convert_from`` refuses a
    body holding NUL, which text cannot hold and Python's can."""

    format = Format.BINARY

    def load(self, data: Buffer) -> str | None:
        return body_text(data)


def trail(conn: Any, reads: Sequence[tuple[str, Sequence[Any]]]) -> TrailRows:
    """The rows of a trail's ``reads`` (:func:`overt.ledger.trail_read.statements`)
    on ``conn`` (autocommit), in one snapshot; bodies read as text."""
    with conn.transaction(), conn.cursor(binary=True) as cur:
        cur.adapters.register_loader("bytea", _Utf8Body)  # this cursor's alone
        cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
        cur.execute(f"SET LOCAL work_mem = '{TRAIL_WORK_MEM}'")
        turns, steps, events = (cur.execute(s, p).fetchall() for s, p in reads)
        return TrailRows(turns, steps, events)


def verify(conn: Any, check_content: bool, check_index: bool, check_bodies: bool,
           progress: Progress | None) -> VerifyReport:
    """Verify the ledger on ``conn`` (a connection of its own, not in autocommit).

    Reads the chain through a server-side cursor, in one repeatable-read
    snapshot, so a concurrent writer neither blocks it nor shows it a torn head.
    """
    conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
    counted = Counted.of(conn, progress, check_index, check_content, check_bodies)
    anchors = {int(s): h for s, h in conn.execute(sql.prune_anchors(D))
               if s is not None and h is not None}
    with conn.cursor(name="overt_verify", binary=True) as cur:
        cur.itersize = 10_000
        cur.execute(sql.PG_VERIFY_PAYLOADS)
        report = verify_payloads(counted.rows(cur), anchors)
    if check_index and report.ok:
        report = trail_index.verified(report, conn, sql.trail_index_check(D),
                                      anchors, counted.rows)
        report = memory_check.verified(report, conn, D)
    if not check_content or not report.ok:
        return report
    walk = request_parts.verify_walk(conn, D, bool(anchors)) if check_bodies else None
    with conn.cursor(name="overt_verify_content") as cur:
        cur.itersize = 2_000
        cur.execute(request_parts.newest_first(D))
        report, present = content_checked(
            report, request_parts.verify_rows(counted.rows(cur), walk),
            lambda body: digest_bytes(bytes(body)))
    if not check_bodies:
        return report
    with conn.cursor(name="overt_verify_pointers") as cur:
        cur.itersize = 10_000
        cur.execute(sql.body_pointers(D))
        report = with_body_check(report, counted.rows(cur), present, pruned=bool(anchors),
                                 began_pruned=began_pruned_on(conn, D.ph))
    assert walk is not None
    return request_parts.with_parts_check(report, walk, present,
                                          request_parts.reader(conn, D))

