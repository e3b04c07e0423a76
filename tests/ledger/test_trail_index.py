"""The trail index, on both backends: written with the entries, filled by its
migration, pruned with them, append-only, and checked against the chain by verify."""

from __future__ import annotations

import time
from typing import Any

import pytest

from overt.clock import now_iso
from overt.errors import LedgerError
from overt.ledger import open_ledger, pg_migrate, sqlite, trail_index
from overt.ledger.base import TrailRows
from overt.ledger.canonical import digest_text
from overt.ledger.chain import entry_data
from overt.ledger.trail_index import COLUMNS, TRAIL_FIELDS, check, index_row
from overt.ledger.trail_read import row_of
from overt.reasoning.trail import TurnTrail, assemble
from tests.backends import Raw
from tests.conftest import run
from tests.reasoning.turns import (
    held_for_approval_then_approved,
    thinking_two_calls_a_denial_and_an_error,
)


def _scenario(ledger: Any) -> None:
    """Two sessions, every kind the trail reads (a denial, an error, an approval)."""
    run(thinking_two_calls_a_denial_and_an_error(ledger, "s1", "first"))
    run(thinking_two_calls_a_denial_and_an_error(ledger, "s2", "elsewhere"))
    run(held_for_approval_then_approved(ledger, "s1"))


def _from_chain(ledger: Any, **scope: Any) -> list[TurnTrail]:
    """The trail projected here from the chain's entries and bodies, without the index."""
    turn_id = scope.get("turn_id")
    turns = None
    if turn_id is None and ("since" in scope or "until" in scope):
        turns = {e.turn_id for e in run(ledger.entries(
            kinds=["turn.started"], session_id=scope.get("session_id"),
            since=scope.get("since"), until=scope.get("until")))}
    entries = run(ledger.entries(turn_id=turn_id, session_id=None if turns is not None
                                 or turn_id is not None else scope.get("session_id")))
    rows = TrailRows([], [], [])
    for e in entries:
        if e.kind not in TRAIL_FIELDS or e.turn_id is None or (
                turns is not None and e.turn_id not in turns):
            continue
        values = dict(zip(COLUMNS, index_row(e.seq, e.kind, e.at, e.turn_id, e.session_id,
                                             e.data, None), strict=True))
        digest = values["body_digest"]
        body = None if digest is None else run(ledger.content(digest, seq=e.seq))
        group, row = row_of(values, body)
        getattr(rows, group).append(row)
    return assemble(rows, session_id=scope.get("session_id"))


def _indexed(ledger: Any, **scope: Any) -> list[TurnTrail]:
    return assemble(run(ledger.trail_rows(**scope)))


def _same(a: list[TurnTrail], b: list[TurnTrail]) -> bool:
    fields = ("turn_id", "session_id", "started_at", "source", "model", "message", "status",
              "completed_at", "paused_on", "steps", "tool_calls", "decisions", "approvals")
    return [[getattr(t, f) for f in fields] for t in a] == \
        [[getattr(t, f) for f in fields] for t in b]


def test_the_indexed_trail_is_the_trail_the_chain_holds_in_every_scope(ledger: Any) -> None:
    since = now_iso()
    _scenario(ledger)
    turn_id = _indexed(ledger, session_id="s2")[0].turn_id
    for scope in ({"session_id": "s1"}, {"session_id": "s2"}, {"turn_id": turn_id},
                  {"since": since}, {"since": since, "session_id": "s1"}):
        indexed = _indexed(ledger, **scope)
        assert indexed and _same(indexed, _from_chain(ledger, **scope)), scope
    s1 = _indexed(ledger, session_id="s1")
    assert [t.message for t in s1] == ["first", "send the report"]
    assert s1[1].approvals[0].decision == "approved" and s1[0].decisions[0].effect == "deny"
    assert run(ledger.verify(check_bodies=False)).ok


def test_the_index_holds_each_trail_entry_once_in_plain_columns_with_no_body(
        ledger: Any, raw: Raw) -> None:
    _scenario(ledger)
    entries = raw.query("SELECT seq, kind FROM audit_log ORDER BY seq")
    indexed = raw.query("SELECT seq, kind, phase, tool_name, effect FROM trail_index "
                        "ORDER BY seq")
    assert [(s, k) for s, k, *_ in indexed] == [(s, k) for s, k in entries if k in TRAIL_FIELDS]
    assert ("deny" in {r[4] for r in indexed}) and ("thinking" in {r[2] for r in indexed})
    every = {v for row in raw.query("SELECT * FROM trail_index") for v in row}
    assert not {"first", "send the report"} & every  # bodies stay out


def test_a_ledger_written_before_the_index_is_filled_by_its_migration(
        ledger_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for module in (sqlite, pg_migrate):
        monkeypatch.setattr(module, "MIGRATIONS", module.MIGRATIONS[:10])
    # as overt was: no index rows written
    monkeypatch.setattr(trail_index, "index_rows", lambda entries, bodies: [])
    monkeypatch.setattr(trail_index, "inserts", lambda entries, bodies, ph: [])
    old: Any = open_ledger(ledger_url)
    _scenario(old)
    old.close_sync()
    monkeypatch.undo()
    current: Any = open_ledger(ledger_url)
    assert 11 in current.schema_versions()
    trail = _indexed(current, session_id="s1")
    assert [t.message for t in trail] == ["first", "send the report"]
    assert all(s.content is not None for t in trail for s in t.steps)
    assert _same(trail, _from_chain(current, session_id="s1"))
    assert run(current.verify(check_bodies=False)).ok
    current.close_sync()


def test_a_prune_removes_the_index_rows_of_what_it_removes(ledger: Any, raw: Raw) -> None:
    run(thinking_two_calls_a_denial_and_an_error(ledger, "s1", "old"))
    time.sleep(0.002)  # the cutoff must fall strictly between the two turns' times
    cutoff = now_iso()
    run(thinking_two_calls_a_denial_and_an_error(ledger, "s1", "new"))
    pruned = run(ledger.prune(cutoff))
    assert pruned.removed_entries > 0
    assert raw.query("SELECT min(seq) FROM trail_index")[0][0] > pruned.through_seq
    assert [t.message for t in _indexed(ledger, session_id="s1")] == ["new"]
    assert run(ledger.verify(check_bodies=False)).ok


def test_the_index_is_append_only(ledger: Any, raw: Raw) -> None:
    _scenario(ledger)
    for statement in ("UPDATE trail_index SET body_seq = NULL",
                      "DELETE FROM trail_index WHERE seq = 2"):
        with pytest.raises(raw.append_only_error):
            raw.execute(statement)


def _first(raw: Raw, kind: str) -> int:
    return int(raw.query(f"SELECT min(seq) FROM audit_log WHERE kind = '{kind}'")[0][0])


@pytest.mark.slow
@pytest.mark.parametrize(("change", "problem"), [
    ("UPDATE trail_index SET effect = 'allow' WHERE seq = {seq}",
     "row of entry {seq} does not match"),
    # the kind is in the key: a row moved to another kind is no longer the entry's
    ("UPDATE trail_index SET kind = 'turn.resumed' WHERE seq = {seq}", "lacks entry {seq}"),
    ("DELETE FROM trail_index WHERE seq = {seq}", "lacks entry {seq}"),
])
def test_verify_catches_an_index_that_does_not_match_the_chain(
        ledger: Any, raw: Raw, change: str, problem: str) -> None:
    _scenario(ledger)
    decision = _first(raw, "policy.decision")
    raw.drop_guards().execute(change.format(seq=decision))
    report = run(ledger.verify())
    assert not report.ok and report.index_bad and report.bad_seq == decision
    assert problem.format(seq=decision) in (report.problem or "")


def test_verify_catches_a_step_shown_with_another_steps_text(ledger: Any, raw: Raw) -> None:
    _scenario(ledger)
    first, second = raw.query("SELECT seq, body_digest, body_seq FROM trail_index "
                              "WHERE kind = 'reasoning.step' ORDER BY seq")[:2]
    raw.drop_guards().execute("UPDATE trail_index SET body_seq = ? WHERE seq = ?",
                              (second[2], first[0]))
    report = run(ledger.verify())
    assert not report.ok and report.index_bad and report.bad_seq == first[0]


def test_verify_catches_rows_no_entry_accounts_for(ledger: Any, raw: Raw) -> None:
    _scenario(ledger)
    raw.drop_guards().execute("INSERT INTO trail_index (session_id, seq, turn_id, kind, at, "
                              "status) VALUES ('s1', 999999, 'T', 'turn.completed', "
                              "'2026-01-01T00:00:00Z', 'completed')")
    report = run(ledger.verify())
    assert not report.ok and report.bad_seq is None
    assert "1 rows no entry accounts for" in (report.problem or "")


def test_entry_data_that_is_not_a_json_object_is_a_ledger_error_naming_it() -> None:
    with pytest.raises(LedgerError, match="entry 7's data is not JSON"):
        entry_data("not json", 7)
    with pytest.raises(LedgerError, match="entry 7's data is not a JSON object"):
        entry_data("[1, 2]", 7)
    found = check([(7, "turn.completed", "at", "T", "s", "{", None, *COLUMNS)], 1, 0)
    assert found is not None and found[0] == 7 and "entry 7's data is not JSON" in found[1]


class _Shaped:
    """An entry of any kind with any data (an event's fields are not checked at run
    time, and an older or newer overt may have written other shapes)."""

    def __init__(self, kind: str, data: dict[str, Any], turn_id: str | None = "T",
                 session_id: str | None = "S") -> None:
        self.kind, self._data, self.turn_id, self.session_id = kind, data, turn_id, session_id

    def data(self) -> dict[str, Any]:
        return self._data


_ODD_VALUES: list[Any] = [3, -0, 2**62, 2.5, 3.0, 1e20, True, False, None, "text",
                          "é ✓ \n \"quoted\" \\ \u2028", {"b": [1, 2.5, None], "a": "x"}, [],
                          {}, 0.1]


def test_the_index_row_of_any_value_is_the_one_python_computes(ledger: Any) -> None:
    """PostgreSQL derives the rows in SQL (the owner's trigger, migration 17), SQLite's
    writer in Python: both must hold exactly what index_row says, whatever the types
    of the fields, or verify would fail a ledger nobody touched."""
    body = "the step's text"
    digest = digest_text(body)
    events: list[Any] = []
    for i, value in enumerate(_ODD_VALUES):
        for kind, fields in TRAIL_FIELDS.items():
            data = {field: value for field in fields}
            if kind == "reasoning.step" and i % 2:
                data["content_digest"] = digest  # a body stored with it
            if kind == "turn.started":
                data["message_digest"] = value if i % 3 else digest
            events.append(_Shaped(kind, data, session_id=None if i == 4 else f"S{i % 3}"))
        events.append(_Shaped("reasoning.step", {"step_number": value}, turn_id=""))
        events.append(_Shaped("turn.completed", {}))  # every field missing
        events.append(_Shaped("tool_call.completed", {"tool_name": value}, turn_id=None))
    for start in range(0, len(events), 40):
        run(ledger.record(events[start:start + 40], {digest: body}))
    entries = [e for e in run(ledger.entries()) if e.kind in TRAIL_FIELDS and e.turn_id is not None]
    rows = {(r[0], r[3], r[1]): r for r in run(ledger.select(
        f"SELECT {', '.join(COLUMNS)} FROM trail_index", ()))}
    assert len(rows) == len(entries)
    for e in entries:
        row = tuple(rows[(e.session_id or "", e.kind, e.seq)])
        assert row == index_row(e.seq, e.kind, e.at, e.turn_id, e.session_id, e.data,
                                row[6]), (e.kind, e.data)
        if e.data.get(trail_index.BODY_FIELDS.get(e.kind, "")) == digest:
            assert row[6] is not None and row[6] <= e.seq  # the body stored with its batch
    # the index checked against the chain (not the bodies: odd values name no body)
    report = run(ledger.verify(check_bodies=False))
    assert report.ok, report.problem


def test_a_worker_of_an_earlier_overt_still_sending_index_rows_goes_on(
    ledger: Any, raw: Raw
) -> None:
    """PostgreSQL: after migration 17 the owner's trigger writes the index; a worker
    started before it still sends the rows itself, in the same transaction, after the
    trigger made them. They are let through as the no-ops they are."""
    if not raw.pg:
        pytest.skip("SQLite's writer writes the index itself")
    from overt.events import TurnStarted
    from overt.ledger import sql
    from overt.ledger.chain import chain, drafts

    run(ledger.record([TurnStarted(turn_id="T0", session_id="S", source="cli",
                                   caller_session_id="cli:S", message_digest="sha256:00",
                                   model="m", route="r", max_tool_calls=1,
                                   actor="operator:default")]))
    head = raw.query(sql.HEAD)[0]
    rows, entries, _ = chain((int(head[0]), head[1]), now_iso(), drafts([TurnStarted(
        turn_id="T1", session_id="S", source="cli", caller_session_id="cli:S",
        message_digest="sha256:01", model="m", route="r", max_tool_calls=1,
        actor="operator:default")]))
    raw.execute("BEGIN")
    raw.execute(sql.insert_entries(sql.SQLITE), rows[0])
    for indexed in trail_index.index_rows(entries, {}):  # as the earlier writer did
        raw.execute(sql.insert_trail_index(sql.SQLITE), indexed)
    raw.execute("COMMIT")
    assert raw.query("SELECT seq FROM trail_index ORDER BY seq") == [(1,), (2,)]
    assert run(ledger.verify(check_bodies=False)).ok
