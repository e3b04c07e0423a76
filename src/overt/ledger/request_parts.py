"""The parts a stored request body names, followed to the last, for a prune and a verify.

An inference's ``request_digest`` names a body in the content tier, and that body
names others: the head of its message chain, each chain part the part before it and
the long texts of its messages, the list of tool schemas and each schema, the
parts of the adapter's packed payload (the format is
:mod:`overt.engine.request_body`'s). Parts are stored once, with the commit that
first needed them, so a request of today can name a part stored months ago.

So a prune keeps what a kept request names (:func:`carry_parts`, inside its
transaction: a part stored only in the removed range is stored again with the
first entry it keeps), and ``verify`` checks that every part a kept request names
is stored (:class:`Walk`, fed the content tier as ``verify`` reads it).

Content has no index by digest (a body is looked up from the entry that names it,
:func:`overt.ledger.sql.select_content`), so the walk is one pass over the content
tier, newest first: a part is stored with or before every part and request that
names it, so by the time the pass reaches a part, whatever names it has been read
(the rows of one commit are taken together, until nothing new is wanted). A part
whose only copy the pass had passed before it was wanted (a body stored twice) is
read by digest afterwards (:meth:`Walk.finish`).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from operator import itemgetter
from typing import Any

from overt.ledger import sql
from overt.ledger.base import VerifyReport
from overt.ledger.sql import Dialect

BODY, CHAIN, PACKED_CHAIN, TOOLS, LEAF = "body", "chain", "packed_chain", "tools", "leaf"
"""What a part is, which says what it links to: a request body, a part of its message
chain, a part of the adapter's packed ``messages``, the list of tool schemas, or a
part that names nothing (a text, a tool schema)."""

PART, JSON_PART = "$part", "$json"

Link = tuple[str, str]
"""(what the part is, its digest)."""


def _packed(value: Any, out: list[Link]) -> None:
    """The links of a packed payload value (``request_body.pack``)."""
    if isinstance(value, dict):
        if isinstance(value.get(PART), str) and "chain" in value:
            out.append((PACKED_CHAIN, value[PART]))
        elif set(value) == {PART} and isinstance(value[PART], str):
            out.append((LEAF, value[PART]))
        elif set(value) == {JSON_PART} and isinstance(value[JSON_PART], str):
            out.append((LEAF, value[JSON_PART]))
        else:
            for item in value.values():
                _packed(item, out)
    elif isinstance(value, list):
        for item in value:
            _packed(item, out)


def links(kind: str, text: str) -> list[Link]:
    """The parts that the part ``text`` (of kind ``kind``) names; none for a text that
    is not the JSON its kind has (``verify`` checks every body's digest apart)."""
    if kind == LEAF:
        return []
    try:
        data = json.loads(text)
    except ValueError:
        return []
    out: list[Link] = []
    if kind == TOOLS:
        if isinstance(data, list):
            out += [(LEAF, d) for d in data if isinstance(d, str)]
        return out
    if not isinstance(data, dict):
        return out
    if kind == BODY:
        if isinstance(data.get("messages"), str):
            out.append((CHAIN, data["messages"]))
        if isinstance(data.get("tools"), str):
            out.append((TOOLS, data["tools"]))
        if "sent" in data:
            _packed(data["sent"], out)
    elif kind in (CHAIN, PACKED_CHAIN):
        if isinstance(data.get("p"), str):
            out.append((kind, data["p"]))
        message = data.get("m")
        if kind == CHAIN:
            if isinstance(message, dict) and isinstance(message.get("content"), str):
                out.append((LEAF, message["content"]))
        else:
            _packed(message, out)
    return out


def _text(body: Any) -> str:
    """A body as text to read links from; a body that is not UTF-8 (never overt's: the
    content check reports it) names nothing."""
    if isinstance(body, str):
        return body
    try:
        return bytes(body).decode("utf-8")
    except (UnicodeDecodeError, TypeError):
        return ""


class Walk:
    """The parts some requests name, found in one pass over the content tier, newest
    first (module docstring).

    ``wanted`` maps each part found named so far to what it is and the first seq
    whose request needs it (a part is read after every part that names it, or in the
    same commit, where a part read before an older request named it is followed
    again); ``read`` holds the parts whose links were followed.
    """

    def __init__(self, requests: Iterable[tuple[int, str]]) -> None:
        self.wanted: dict[str, tuple[str, int]] = {}
        for seq, digest in requests:
            if digest not in self.wanted or seq < self.wanted[digest][1]:
                self.wanted[digest] = (BODY, seq)
        self.read: set[str] = set()
        self._group: dict[str, Any] = {}

    def commit(self, rows: Sequence[Sequence[Any]]) -> list[Sequence[Any]]:
        """Take the content rows (seq, digest, body, ...) stored with one seq; the
        wanted ones among them."""
        found: list[Sequence[Any]] = []
        wanted = self.wanted
        if not any(row[1] in wanted for row in rows):
            return found
        self._group = {row[1]: row[2] for row in rows}
        pending = list(rows)
        while pending:
            later = []
            for row in pending:
                if row[1] not in self.wanted:
                    later.append(row)
                    continue
                found.append(row)
                self._follow(row[1], row[2])
            if len(later) == len(pending):
                break
            pending = later
        return found

    def _follow(self, digest: str, body: Any, *, again: bool = False) -> None:
        if digest in self.read and not again:
            return
        self.read.add(digest)
        kind, seq = self.wanted[digest]
        for link_kind, link in links(kind, _text(body)):
            known = self.wanted.get(link)
            if known is None:
                self.wanted[link] = (link_kind, seq)
            elif known[1] > seq:  # an older request needs it too
                self.wanted[link] = (known[0], seq)
                if link in self.read and link in self._group:  # read in this commit: again
                    self._follow(link, self._group[link], again=True)

    def finish(self, present: set[str], read: Callable[[Sequence[str]], dict[str, Any]]) -> None:
        """Follow the wanted parts that are stored but were passed before they were
        wanted, reading them by digest (``read``: digest -> body, those stored)."""
        while True:
            left = [d for d in self.wanted if d in present and d not in self.read
                    and self.wanted[d][0] != LEAF]
            if not left:
                return
            bodies = read(left)
            for digest in left:
                if digest in bodies:
                    self._follow(digest, bodies[digest])
                else:
                    self.read.add(digest)

    def missing(self, present: set[str]) -> list[tuple[int, str]]:
        """(first seq needing it, digest) of the wanted parts not in ``present``."""
        return sorted((seq, d) for d, (_, seq) in self.wanted.items() if d not in present)


def requests(conn: Any, d: Dialect, after: int = 0) -> list[tuple[int, str, str | None]]:
    """(seq, request digest, turn) of the inferences after ``after`` naming a request."""
    return [(int(seq), digest, turn) for seq, digest, turn in conn.execute(
        f"SELECT seq, {d.text('request_digest')}, turn_id FROM audit_log WHERE seq > {d.ph} "
        f"AND kind = 'inference' AND {sql.KIND_INDEXED} "
        f"AND {d.text('request_digest')} IS NOT NULL ORDER BY seq", (after,)).fetchall()]


def reader(conn: Any, d: Dialect) -> Callable[[Sequence[str]], dict[str, Any]]:
    """Reads bodies by digest (a scan of the content tier per 500: for the few parts
    :meth:`Walk.finish` needs)."""
    def read(digests: Sequence[str]) -> dict[str, Any]:
        found: dict[str, Any] = {}
        for chunk in sql.chunks(list(digests)):
            for digest, body in conn.execute(
                    f"SELECT digest, body FROM content_blobs WHERE digest IN "
                    f"({d.phs(len(chunk))})", tuple(chunk)).fetchall():
                found.setdefault(digest, body)
        return found
    return read


def by_commit(rows: Iterable[Sequence[Any]]) -> Iterator[list[Sequence[Any]]]:
    """Content rows (seq, digest, body, ...), newest seq first, as each seq's rows."""
    for _, group in itertools.groupby(rows, key=itemgetter(0)):
        yield list(group)


def newest_first(d: Dialect, after: int | None = None) -> str:
    """The content tier (what was stored with entries after ``after``, when given),
    newest first: (seq, digest, body, created_at)."""
    where = "" if after is None else f"WHERE {sql.content_seq(d, '>', str(int(after)))} "
    return (f"SELECT seq, digest, body, created_at FROM content_blobs {where}"
            f"ORDER BY {sql.content_order(d)} DESC")


StoreAgain = Callable[[Any, Dialect, int, str, str, Any], None]
Stream = Callable[[str], Iterable[Sequence[Any]]]
"""A statement's rows as they come, not all in memory at once (the backend's
``stream`` on the prune's connection)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Carry:
    """What a prune through ``through`` stores again, as found in a read snapshot taken
    before the prune holds the write lock (:func:`search_carry`): the search over the
    whole content tier runs while the ledger still takes appends, and the prune then
    walks only what was committed after ``head``."""

    through: int
    head: int
    """The newest entry the snapshot held."""
    rows: dict[str, Sequence[Any]]
    """The parts to store again (digest: the row, seq, digest, body, created_at): named
    by a request kept, stored only at or before ``through``."""
    reached: frozenset[str]
    """Every part the requests kept then name, followed to the last, that is stored."""


def search_carry(through: int, head: int, requested: Iterable[tuple[int, str]],
                 content: Iterable[Sequence[Any]]) -> Carry:
    """The :class:`Carry` of a prune through ``through``: ``requested`` the (seq, request
    digest) of the inferences after ``through`` up to ``head``, ``content`` the
    content tier up to ``head``, newest first (seq, digest, body, created_at)."""
    walk = Walk(requested)
    kept: set[str] = set()
    carry: dict[str, Sequence[Any]] = {}
    if walk.wanted:
        for group in by_commit(content):
            if int(group[0][0]) == through + 1:  # (where the carried parts go: not twice)
                kept.update(row[1] for row in group)
            for row in walk.commit(group):
                if int(row[0]) > through:
                    kept.add(row[1])
                elif row[1] not in kept:
                    carry.setdefault(row[1], row)
    return Carry(through, head, carry, frozenset(walk.read))


def carry_parts(conn: Any, d: Dialect, through: int, store_again: StoreAgain,
                stream: Stream, found: Carry | None = None) -> int:
    """Inside a prune through ``through``, before the content is deleted: store again,
    with entry ``through + 1`` (the first one kept, or the prune's own), each part a
    kept request names that is stored only at or before ``through``. How many.

    ``found``: what a search before the write lock found: only the requests
    committed after its head are walked then, unless one of them names a part it
    did not reach (the whole tier is walked again, as without it).

    Stored with the first kept entry, the carried parts are the oldest content left,
    so a later walk still finds each after whatever names it."""
    carry = _since(conn, d, found, stream) if found is not None and found.through == through \
        else None
    if carry is None:
        carry = search_carry(through, head_seq(conn), ((seq, digest) for seq, digest, _
                                                        in requests(conn, d, through)),
                             stream(newest_first(d))).rows
    for digest, (_, _, body, created_at) in carry.items():
        store_again(conn, d, through + 1, digest, body, created_at)
    return len(carry)


def _since(conn: Any, d: Dialect, found: Carry, stream: Stream
           ) -> dict[str, Sequence[Any]] | None:
    """``found``'s parts to carry, if the requests committed after its head name no
    part it did not reach and none committed since; else ``None``."""
    walk = Walk((seq, digest) for seq, digest, _ in requests(conn, d, found.head))
    if walk.wanted:
        for group in by_commit(stream(newest_first(d, after=found.head))):
            walk.commit(group)
        if any(digest not in walk.read and digest not in found.reached
               for digest in walk.wanted):
            return None
    return found.rows


def head_seq(conn: Any) -> int:
    """The newest entry's seq (0: none)."""
    row = conn.execute(sql.HEAD).fetchone()
    return int(row[0]) if row else 0


def verify_rows(rows: Iterable[Sequence[Any]], walk: Walk | None) -> Iterable[Sequence[Any]]:
    """``rows`` (the content tier newest first: seq, digest, body), passed on as they
    are, each commit's also fed to ``walk`` (if one)."""
    return rows if walk is None else _fed(rows, walk)


def _fed(rows: Iterable[Sequence[Any]], walk: Walk) -> Iterator[Sequence[Any]]:
    for group in by_commit(rows):
        walk.commit(group)
        yield from group


def with_parts_check(report: VerifyReport, walk: Walk, present: set[str],
                     read: Callable[[Sequence[str]], dict[str, Any]]) -> VerifyReport:
    """``report``, failed at the first inference whose request names a part (followed
    to the last) that is not stored: that request can no longer be read back as sent."""
    if not report.ok:
        return report
    walk.finish(present, read)
    for seq, digest in walk.missing(present):
        return dataclasses.replace(
            report, ok=False, bad_seq=seq,
            problem=f"its request names the part {digest}, which is not stored (the "
                    "request as sent can no longer be read back)")
    return report


def cut_turns(conn: Any) -> set[str]:
    """The turns with an inference on record whose ``turn.started`` is not: a prune
    cut them in two (their requests may name what went with their start)."""
    return {turn for (turn,) in conn.execute(
        "SELECT DISTINCT a.turn_id FROM audit_log a WHERE a.kind = 'inference' "
        "AND a.turn_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM audit_log s "
        "WHERE s.turn_id = a.turn_id AND s.kind = 'turn.started')").fetchall()}


def verify_walk(conn: Any, d: Dialect, pruned: bool) -> Walk:
    """The walk ``verify`` feeds: the requests of every inference, but those of a turn
    a prune cut in two when the ledger was pruned (``pruned``)."""
    cut = cut_turns(conn) if pruned else set()
    return Walk((seq, digest) for seq, digest, turn in requests(conn, d) if turn not in cut)
