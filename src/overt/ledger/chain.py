"""Building and checking the chain, the same for every backend.

See :mod:`overt.ledger.canonical` for the contract. A backend hands rows in
``seq`` order to :func:`verify_rows` and gets a :class:`VerifyReport`; it hands
drafts and its current head to :func:`chain` and stores the rows it returns.

Pruning removes a prefix ``1..N`` of the chain in the same transaction that
appends a ``ledger.pruned`` entry naming ``N`` and the hash of entry ``N``.
Verification of a pruned chain starts from that hash: the first remaining entry
must have ``seq = N + 1`` and ``prev_hash`` equal to the sealed hash, and the
seal itself is an entry of the chain it anchors, so forging one breaks the chain.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from json.encoder import encode_basestring
from typing import Any, TypeVar

from overt.errors import LedgerConflict, LedgerIntegrityError
from overt.events import Event
from overt.ids import new_ulid
from overt.ledger.base import Entry, TurnSummary, VerifyReport
from overt.ledger.canonical import GENESIS, canonical_json, chain_hash, digest_text, entry_payload

Draft = tuple[str, str | None, str | None, dict[str, Any], str]
"""(kind, turn_id, session_id, data, canonical data JSON)"""

Row = tuple[int, str, str, str, str | None, str | None, str, str, str]
"""(seq, id, kind, at, turn_id, session_id, data JSON, prev_hash, hash): the stored columns"""

T = TypeVar("T")

Progress = Callable[[int, int], None]
"""What ``verify(progress=...)`` calls: (rows checked so far, rows to check in all)."""

PROGRESS_CALLS = 100
"""About how many times a verify reports its progress (at most every 10,000 rows)."""

_SURROGATE = re.compile("[\ud800-\udfff]")

ENTRY_COLUMNS = "seq, id, kind, at, turn_id, session_id, data, prev_hash, hash"


def clean_text(text: str) -> str:
    """``text`` made storable: lone surrogates (not encodable as UTF-8) become U+FFFD."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)
    return text


def drafts(events: Sequence[Event]) -> list[Draft]:
    """The events as drafts, their data canonicalised once, outside any lock.

    Raises:
        TypeError, ValueError: an event's data is not JSON (NaN, an object…).
    """
    out: list[Draft] = []
    for ev in events:
        data = ev.data()
        session = ev.session_id if ev.session_id is None else clean_text(ev.session_id)
        out.append((ev.kind, ev.turn_id, session, data, clean_text(canonical_json(data))))
    return out


def batch_claims(batch: Sequence[Draft]) -> list[tuple[str, str]]:
    """The (kind, claim) pairs a batch takes; a pair twice in it is a conflict.

    Raises:
        LedgerConflict: the batch claims the same (kind, claim) twice.
    """
    claims: list[tuple[str, str]] = []
    for kind, _, _, data, _ in batch:
        claim = data.get("claim")
        if claim is not None:
            pair = (kind, str(claim))
            if pair in claims:
                raise LedgerConflict(*pair)
            claims.append(pair)
    return claims


def chain(head: tuple[int, str], at: str,
          batch: Iterable[Draft]) -> tuple[list[Row], list[Entry], tuple[int, str]]:
    """Rows and entries for ``batch`` chained onto ``head`` = (seq, hash); and the new head."""
    seq, prev = head
    rows: list[Row] = []
    entries: list[Entry] = []
    for kind, turn_id, session_id, data, data_json in batch:
        seq += 1
        entry_id = new_ulid()
        digest = chain_hash(prev, entry_payload(seq, entry_id, kind, at, turn_id, session_id,
                                                data_json))
        rows.append((seq, entry_id, kind, at, turn_id, session_id, data_json, prev, digest))
        entries.append(Entry(seq, entry_id, kind, at, turn_id, session_id, data, prev, digest))
        prev = digest
    return rows, entries, (seq, prev)


def content_rows(first_seq: int, entries: Sequence[Entry],
                 contents: Mapping[str, str]) -> list[tuple[int, str, str]]:
    """(seq, digest, body) for a batch's content, each body keyed by the seq of the
    first entry of the batch naming its digest in a field, so that a reader holding
    the entry finds the body by its exact key. A body no entry names is keyed by
    the batch's ``first_seq``. Either way a body's seq is never after an entry of
    the batch naming it, which is what a search back from that entry and a prune
    through a seq rely on."""
    seq_of: dict[str, int] = {}
    for entry in entries:
        for value in entry.data.values():
            if value.__class__ is str and value in contents and value not in seq_of:
                seq_of[value] = entry.seq
    return [(seq_of.get(digest, first_seq), digest, clean_text(body))
            for digest, body in contents.items()]


def row_to_entry(row: Sequence[Any]) -> Entry:
    return Entry(int(row[0]), row[1], row[2], row[3], row[4], row[5], entry_data(row[6], row[0]),
                 row[7], row[8])


def entry_data(raw: Any, seq: Any = None) -> dict[str, Any]:
    """An entry's ``data`` column (the canonical JSON text overt wrote, as text or UTF-8
    bytes, or an object already decoded) as a dict.

    Raises:
        LedgerIntegrityError: it is not a JSON object (invalid JSON, not UTF-8, NULL, an
            array): the row was changed behind the ledger's back; ``seq`` names it.
    """
    value = raw
    if isinstance(raw, (str, bytes, bytearray, memoryview)):
        try:
            value = json.loads(bytes(raw) if isinstance(raw, memoryview) else raw)
        except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError alike
            raise LedgerIntegrityError(
                f"entry {seq}'s data is not JSON: the row was changed behind the ledger's "
                f"back (run overt ledger verify): {exc}") from None
    if not isinstance(value, dict):
        raise LedgerIntegrityError(
            f"entry {seq}'s data is not a JSON object but {type(value).__name__} "
            f"{str(value)[:60]!r}: the row was changed behind the ledger's back "
            "(run overt ledger verify)")
    return value


def turn_summary(row: Sequence[Any]) -> TurnSummary:
    """One row of the ``turns`` view (turn_id, session_id, started_at, source, model,
    status, tools_used as JSON text, duration_ms) as a :class:`TurnSummary`.

    Raises:
        LedgerIntegrityError: a field is not of the type overt writes (the turn's
            entries were changed behind the ledger's back); the message names the turn.
    """
    turn_id, session_id, at, source, model, status, tools_json, duration = row[:8]
    tools: Any = tools_json
    if isinstance(tools_json, (str, bytes)):
        try:
            tools = json.loads(tools_json)
        except ValueError:
            tools = tools_json
    ok = (all(isinstance(v, str) for v in (turn_id, at, source, model))
          and (status is None or isinstance(status, str))
          and (tools is None or (isinstance(tools, list)
                                 and all(isinstance(t, str) for t in tools)))
          and (duration is None or (isinstance(duration, (int, float))
                                    and not isinstance(duration, bool))))
    if not ok:
        raise LedgerIntegrityError(
            f"turn {turn_id}'s entries do not hold what overt writes (source {source!r}, "
            f"model {model!r}, status {status!r}, tools_used {tools_json!r}, duration_ms "
            f"{duration!r}): they were changed behind the ledger's back "
            "(run overt ledger verify)")
    return TurnSummary(turn_id, session_id, at, source, model, status, tools,
                       None if duration is None else float(duration))


def verify_rows(rows: Iterable[Sequence[Any]],
                anchors: Mapping[int, str] | None = None) -> VerifyReport:
    """Recompute the chain over ``rows`` (the nine stored columns, in ``seq`` order).

    Each entry's hash preimage (``prev_hash``, a newline, the payload of
    :func:`~overt.ledger.canonical.entry_payload`) is built here from the stored
    columns, the one place a verify builds it; a column of a type overt never
    stores (a BLOB written by hand) cannot match. ``anchors`` maps a pruned-through
    ``seq`` to the hash sealed for it (from ``ledger.pruned`` entries); it is how a
    chain whose prefix was pruned is verified from its first remaining entry.
    """
    prev = GENESIS
    expected = 1
    count = 0
    first: int | None = None
    sha256 = hashlib.sha256
    quote = encode_basestring  # a string's JSON literal, as canonical_json writes it
    for raw_seq, entry_id, kind, at, turn_id, session_id, data, prev_hash, digest in rows:
        seq = int(raw_seq)
        if first is None:
            first = seq
            if seq != 1:
                sealed = (anchors or {}).get(seq - 1)
                if sealed is None or sealed != prev_hash:
                    return VerifyReport(False, 0, first, None, None, seq,
                                        "chain starts after entries that no prune record seals")
                prev, expected = sealed, seq
        if seq != expected:
            problem = "missing entry before it" if seq > expected else "sequence out of order"
            return VerifyReport(False, count, first, expected - 1, prev, seq, problem)
        if prev_hash != prev:
            return VerifyReport(False, count, first, seq - 1, prev, seq,
                                "prev_hash does not match the previous entry")
        try:
            preimage = (prev + '\n{"at":' + quote(at) + ',"data":' + data
                        + ',"id":' + quote(entry_id) + ',"kind":' + quote(kind)
                        + ',"seq":' + str(seq)
                        + ',"session_id":' + ("null" if session_id is None
                                              else quote(session_id))
                        + ',"turn_id":' + ("null" if turn_id is None else quote(turn_id))
                        + "}").encode("utf-8")
        except (TypeError, ValueError):
            preimage = None  # a column of the wrong type: the entry cannot match
        if preimage is None or "sha256:" + sha256(preimage).hexdigest() != digest:
            return VerifyReport(False, count, first, seq - 1, prev, seq,
                                "hash does not match the entry's contents")
        prev = digest
        expected += 1
        count += 1
    return VerifyReport(True, count, first, expected - 1 if count else None,
                        prev if count else None)


def verify_total(*, index: bool, content: bool, bodies: bool) -> str:
    """How many rows a verify reads (for its progress): the chain's entries, then as
    checked, the trail index's rows, the bodies, and the chain's entries again for
    the bodies they point to."""
    parts = ["(SELECT count(*) FROM audit_log)"]
    if index:
        parts.append("(SELECT count(*) FROM trail_index)")
    if content:
        parts.append("(SELECT count(*) FROM content_blobs)")
        if bodies:
            parts.append("(SELECT count(*) FROM audit_log)")
    return "SELECT " + " + ".join(parts)


class Counted:
    """The rows a verify reads, counted against ``total`` (the rows it reads in all,
    counted in the same snapshot: :func:`verify_total`) and
    reported to ``callback`` as (checked, total) every ``total / 100`` rows (at most
    every 10,000, at least every row) and at the last, so a verify that passes ends
    with (total, total). Without a callback, rows pass through untouched. The
    callback runs on the thread the verify reads on: it should be quick."""

    def __init__(self, callback: Progress | None, total: int) -> None:
        self.callback, self.total, self.checked = callback, max(int(total), 0), 0
        self.every = max(1, min(10_000, self.total // PROGRESS_CALLS))

    @classmethod
    def of(cls, conn: Any, callback: Progress | None, index: bool, content: bool,
           bodies: bool) -> Counted:
        """For a verify on ``conn`` (either backend's), counting its rows first when
        there is a callback to report them to."""
        if callback is None:
            return cls(None, 0)
        statement = verify_total(index=index, content=content, bodies=bodies)
        return cls(callback, int(conn.execute(statement).fetchone()[0]))

    def rows(self, rows: Iterable[T]) -> Iterable[T]:
        return rows if self.callback is None else self._counted(rows)

    def _counted(self, rows: Iterable[T]) -> Iterator[T]:
        callback, every, total = self.callback, self.every, self.total
        assert callback is not None
        for row in rows:
            yield row
            self.checked += 1
            if self.checked % every == 0 or self.checked == total:
                callback(min(self.checked, total), total)


CONTENT_CANDIDATES = 4
"""How many rows stored under one digest a read of a body looks at (nearest the
entry naming it first) for one whose body matches the digest."""


def body_text(body: Any) -> str | None:
    """A content body as read from either backend (text, or bytes of UTF-8) as text;
    ``None`` for none.

    Raises:
        LedgerIntegrityError: the body is not UTF-8 text, which overt never stores: the
            content tier was changed behind the ledger's back.
    """
    if body is None or isinstance(body, str):
        return body
    try:
        return bytes(body).decode("utf-8")
    except (TypeError, UnicodeDecodeError) as exc:
        raise LedgerIntegrityError(
            "a content body is not UTF-8 text: the content tier was changed behind the "
            f"ledger's back (run overt ledger verify): {exc}") from exc


def checked_body(digest: str, bodies: Iterable[Any]) -> str | None:
    """The first of ``bodies`` (stored under ``digest``) that hashes to it, so a body
    changed or inserted behind the ledger's back is never read as the record;
    ``None`` when there are none.

    Raises:
        LedgerIntegrityError: there are bodies, and none matches ``digest``.
    """
    seen = 0
    for raw in bodies:
        body = body_text(raw)
        if body is not None and digest_text(body) == digest:
            return body
        seen += 1
    if seen:
        raise LedgerIntegrityError(
            f"the content body stored under {digest} does not match its digest: the "
            "content tier was changed behind the ledger's back (run overt ledger verify)")
    return None


def content_checked(report: VerifyReport, rows: Iterable[Sequence[Any]],
                    digest_of: Callable[[Any], str]) -> tuple[VerifyReport, set[str]]:
    """``report`` with the content tier's ``rows`` (seq, digest, body) checked, each
    body hashed by ``digest_of``; and the digests the tier holds."""
    checked, bad, present, first = 0, [], set(), None
    for seq, digest, body, *_ in rows:
        checked += 1
        present.add(digest)
        if digest_of(body) != digest:
            bad.append(digest)
            if first is None or int(seq) < first[0]:
                first = (int(seq), digest)
    return with_content_check(report, checked, bad, first), present


def with_content_check(report: VerifyReport, checked: int, bad: list[str],
                       first: tuple[int, str] | None = None) -> VerifyReport:
    """``report`` with the outcome of checking ``checked`` bodies, ``bad`` of which
    failed; ``first``: the (seq, digest) of the failed body stored with the earliest
    entry, named in the problem."""
    if bad:
        where = (f": the first, stored with entry {first[0]}, is {first[1]}"
                 if first is not None else "")
        return VerifyReport(False, report.entries, report.first_seq, report.last_seq,
                            report.head_hash, None,
                            f"{len(bad)} content bodies do not match their digest{where}",
                            checked, bad)
    return VerifyReport(True, report.entries, report.first_seq, report.last_seq,
                        report.head_hash, content_checked=checked)


BODY_FIELDS: tuple[str, ...] = (
    "message_digest", "response_digest", "args_sha256", "result_digest", "reply_digest",
    "reason_digest", "checkpoint_digest", "content_digest", "context_digest",
    "before_digest", "after_digest", "error_digest", "request_digest", "policy_digest")
"""The entry fields that point to a body in the content tier (``verify`` checks each
body is present). Memory's ``title_digest``/``body_digest`` name rows of the memory
tables, not bodies, and an unknown tool's digested name points to nothing."""


def turn_started_before(ph: str) -> str:
    """Whether the turn of entry ``seq`` (the parameter) has no ``turn.started`` on
    record: it began in a range a prune removed (one row, or none)."""
    return (f"SELECT 1 FROM audit_log e WHERE e.seq = {ph} AND e.turn_id IS NOT NULL "
            "AND NOT EXISTS (SELECT 1 FROM audit_log s WHERE s.turn_id = e.turn_id "
            "AND s.kind = 'turn.started')")


def began_pruned_on(conn: Any, ph: str) -> Callable[[int], bool]:
    """``began_pruned`` for :func:`with_body_check`, asking ``conn`` (either backend's)."""
    return lambda seq: bool(conn.execute(turn_started_before(ph), (seq,)).fetchone())


def with_body_check(report: VerifyReport, pointers: Iterable[Sequence[Any]],
                    present: set[str], pruned: bool,
                    began_pruned: Callable[[int], bool] | None = None) -> VerifyReport:
    """``report``, failed at the first entry pointing to a body that is not stored.

    ``pointers`` are (seq, one value per :data:`BODY_FIELDS`) rows in ``seq``
    order; ``present`` the digests the content tier holds. When the ledger was
    pruned (``pruned``), a body may have gone with the pruned range only if the
    entry pointing to it belongs to a turn that began there (a turn a prune cut
    in two, whose later entries name bodies stored with its earlier ones):
    ``began_pruned(seq)`` says so (:func:`turn_started_before`). Any other
    missing body fails.
    """
    if not report.ok:
        return report
    for seq, *digests in pointers:
        for digest in digests:
            if digest is None or digest in present:
                continue
            if pruned and began_pruned is not None and began_pruned(int(seq)):
                continue
            return dataclasses.replace(
                report, ok=False, bad_seq=int(seq),
                problem=f"the content body {digest} it points to is missing "
                        "(and no prune record accounts for it)")
    return report
