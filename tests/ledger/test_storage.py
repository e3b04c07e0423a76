"""The ledger's storage contract, on both backends."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
from typing import Any

import pytest

from overt.errors import LedgerError
from overt.events import RuntimeStarted, TurnStarted
from overt.ledger import open_ledger
from overt.ledger.canonical import digest_text
from tests.backends import Raw
from tests.conftest import latest, run

TABLES = ["audit_log", "content_blobs", "overt_migrations"]


def _event(n: int) -> TurnStarted:
    return TurnStarted(turn_id=f"T{n}", session_id="S-1", source="cli",
                       caller_session_id="cli:S-1", message_digest=digest_text(f"m{n}"),
                       model="m", route="default", max_tool_calls=5, actor="operator:default")


def _fill(ledger: Any, n: int = 6) -> None:
    for i in range(n):
        run(ledger.record([_event(i)], {digest_text(f"m{i}"): f"m{i}"}))


def test_migrations_run_once_and_running_them_again_is_a_no_op(ledger: Any,
                                                               ledger_url: str) -> None:
    assert ledger.migrate() == []
    assert ledger.schema_versions() == latest(ledger_url)
    again = open_ledger(ledger_url)
    assert again.schema_versions() == latest(ledger_url)  # type: ignore[attr-defined]
    again.close_sync()  # type: ignore[attr-defined]


@pytest.mark.parametrize("table", TABLES)
def test_update_of_a_ledger_row_is_rejected_by_the_database(
    ledger: Any, raw: Raw, table: str
) -> None:
    _fill(ledger)
    column = {"audit_log": "kind", "content_blobs": "created_at",
              "overt_migrations": "name"}[table]
    with pytest.raises(raw.append_only_error, match="append-only"):
        raw.execute(f"UPDATE {table} SET {column} = 'x'")


@pytest.mark.parametrize("table", TABLES)
def test_delete_of_a_ledger_row_is_rejected_by_the_database(
    ledger: Any, raw: Raw, table: str
) -> None:
    _fill(ledger)
    with pytest.raises(raw.append_only_error, match="append-only"):
        raw.execute(f"DELETE FROM {table}")


def test_a_fresh_chain_verifies(ledger: Any) -> None:
    _fill(ledger)
    report = run(ledger.verify())
    assert report.ok and report.entries == 6 and report.last_seq == 6
    assert report.content_checked == 6


def test_an_empty_ledger_verifies(ledger: Any) -> None:
    assert run(ledger.verify()).ok


@pytest.mark.slow
@pytest.mark.parametrize(
    "column", ["id", "kind", "at", "turn_id", "session_id", "data", "prev_hash", "hash"]
)
def test_changing_a_byte_of_any_column_is_caught_by_verify(
    ledger: Any, raw: Raw, column: str
) -> None:
    _fill(ledger)
    raw.drop_guards()
    (value,) = raw.query(f"SELECT {column} FROM audit_log WHERE seq = 4")[0]
    changed = value[:-2] + ("0" if value[-2] != "0" else "1") + value[-1]
    raw.execute(f"UPDATE audit_log SET {column} = ? WHERE seq = 4", (changed,))
    report = run(ledger.verify())
    assert not report.ok and report.bad_seq == 4


def test_a_deleted_entry_is_caught_by_verify(ledger: Any, raw: Raw) -> None:
    _fill(ledger)
    raw.drop_guards().execute("DELETE FROM audit_log WHERE seq = 3")
    report = run(ledger.verify())
    assert not report.ok and report.bad_seq == 4 and "missing" in (report.problem or "")


def test_a_deleted_first_entry_is_caught_by_verify(ledger: Any, raw: Raw) -> None:
    _fill(ledger)
    raw.drop_guards().execute("DELETE FROM audit_log WHERE seq = 1")
    report = run(ledger.verify())
    assert not report.ok and "no prune record seals" in (report.problem or "")


def test_a_truncated_tail_verifies_but_changes_the_head_hash(ledger: Any, raw: Raw) -> None:
    # Cutting the newest entries cannot be seen from the chain alone; the head
    # hash that verify prints is what an operator anchors elsewhere to see it.
    _fill(ledger)
    head = run(ledger.verify()).head_hash
    raw.drop_guards().execute("DELETE FROM audit_log WHERE seq = 6")
    raw.execute("DELETE FROM trail_index WHERE seq = 6")  # and what the trail index holds
    report = run(ledger.verify())
    assert report.ok and report.head_hash != head


def test_an_inserted_entry_is_caught_by_verify(ledger: Any, raw: Raw) -> None:
    _fill(ledger)
    raw.drop_guards()
    row = raw.query("SELECT * FROM audit_log WHERE seq = 6")[0]
    raw.execute("UPDATE audit_log SET seq = 7 WHERE seq = 6")
    raw.execute("INSERT INTO audit_log VALUES (6, 'X', ?, ?, ?, ?, ?, ?, ?)", row[2:])
    assert run(ledger.verify()).bad_seq == 6


def test_two_swapped_entries_are_caught_by_verify(ledger: Any, raw: Raw) -> None:
    _fill(ledger)
    raw.drop_guards()
    raw.execute("UPDATE audit_log SET seq = -2 WHERE seq = 2")
    raw.execute("UPDATE audit_log SET seq = 2 WHERE seq = 3")
    raw.execute("UPDATE audit_log SET seq = 3 WHERE seq = -2")
    report = run(ledger.verify())
    assert not report.ok and report.bad_seq == 2


def test_a_changed_content_body_is_caught_by_verify(ledger: Any, raw: Raw) -> None:
    _fill(ledger)
    raw.drop_guards()
    if raw.pg:
        raw.execute("UPDATE content_blobs SET body = 'tampered'::bytea WHERE body = 'm2'::bytea")
    else:
        raw.execute("UPDATE content_blobs SET body = 'tampered' WHERE body = 'm2'")
    report = run(ledger.verify())
    assert not report.ok and report.content_bad == [digest_text("m2")]


def test_record_writes_entries_and_content_in_one_transaction(ledger: Any) -> None:
    entries = run(ledger.record([_event(1), _event(2)], {digest_text("m1"): "m1"}))
    assert [e.seq for e in entries] == [1, 2]
    assert entries[1].prev_hash == entries[0].hash
    assert run(ledger.content(digest_text("m1"))) == "m1"
    assert [e.kind for e in run(ledger.entries(turn_id="T2"))] == ["turn.started"]


def test_a_body_is_keyed_by_the_entry_naming_it(ledger: Any, raw: Raw) -> None:
    run(ledger.record([RuntimeStarted(overt_version="0", pid=1, host="h", model="m")]))
    named, unnamed = digest_text("m2"), digest_text("a note no entry names")
    entries = run(ledger.record([_event(1), _event(2)], {
        unnamed: "a note no entry names", named: "m2", digest_text("m1"): "m1"}))
    keys = dict((d, s) for s, d in raw.query("SELECT seq, digest FROM content_blobs"))
    assert keys == {named: entries[1].seq, digest_text("m1"): entries[0].seq,
                    unnamed: entries[0].seq}
    # a reader holding the entry finds the body by its exact key, or searching back
    assert run(ledger.content(named, seq=entries[1].seq)) == "m2"
    assert run(ledger.content(unnamed, seq=entries[1].seq)) == "a note no entry names"
    assert run(ledger.content(named, seq=entries[0].seq)) is None


def test_event_data_that_is_not_json_is_refused_and_nothing_is_written(ledger: Any) -> None:
    bad = RuntimeStarted(overt_version="1", pid=1, host="h", model=float("nan"))  # type: ignore[arg-type]
    with pytest.raises(LedgerError):
        run(ledger.record([_event(1), bad]))
    assert run(ledger.entries()) == []


def test_content_with_nul_bytes_and_lone_surrogates_is_stored_and_verifies(ledger: Any) -> None:
    from overt.ledger.chain import clean_text

    nul, surrogate = "a\x00b", clean_text("bad \ud800 text")
    run(ledger.record([_event(1)], {digest_text(nul): nul, digest_text(surrogate): surrogate}))
    assert run(ledger.content(digest_text(nul))) == nul
    assert run(ledger.content(digest_text(surrogate))) == "bad \ufffd text"
    assert run(ledger.verify(check_bodies=False)).ok


def test_a_closed_ledger_refuses_to_record(ledger: Any) -> None:
    ledger.close_sync()
    with pytest.raises(LedgerError, match="closed"):
        run(ledger.record([_event(1)]))


def test_two_ledgers_on_one_database_share_one_chain(ledger: Any, ledger_url: str) -> None:
    other: Any = open_ledger(ledger_url)
    for i in range(10):
        run((other if i % 2 else ledger).record([_event(i)]))
    report = run(ledger.verify(check_bodies=False))
    assert report.ok and report.entries == 10
    other.close_sync()


def test_queries_read_turns_usage_counts_and_errors(ledger: Any) -> None:
    _fill(ledger, 3)
    assert run(ledger.count("turn.started")) == 3
    assert run(ledger.count("turn.started", since="9999")) == 0
    assert run(ledger.last_error()) is None
    assert [t.turn_id for t in run(ledger.recent_turns(2))] == ["T2", "T1"]
    assert run(ledger.usage()) == []


def test_a_column_rewritten_as_a_blob_is_named_by_verify(ledger: Any, raw: Raw) -> None:
    _fill(ledger)
    raw.drop_guards()
    if raw.pg:
        raw.execute("UPDATE audit_log SET kind = 'x' || kind WHERE seq = 3")
    else:
        raw.execute("UPDATE audit_log SET kind = CAST(kind AS BLOB) WHERE seq = 3")
    report = run(ledger.verify())
    assert not report.ok and report.bad_seq == 3


def test_the_last_error_includes_a_plugins_failure(ledger: Any) -> None:
    from overt.events import HookError

    _fill(ledger, 1)
    run(ledger.record([HookError(turn_id="T0", session_id="S-1", plugin="p",
                                 hook="post_tool_call", error_type="KeyError",
                                 consequence="ignored")]))
    last = run(ledger.last_error())
    assert last is not None and last.kind == "hook.error"


def test_a_sessions_spend_is_read_from_its_own_entries(ledger: Any, raw: Raw) -> None:
    from overt.events import InferenceRecorded
    from overt.ledger import sql

    def inference(session: str, tokens: int) -> InferenceRecorded:
        return InferenceRecorded(
            turn_id="T", session_id=session, inference_id=f"I{session}{tokens}", iteration=0,
            model="m", route="default", input_tokens=tokens, output_tokens=1, cost_usd=0.5,
            duration_ms=1.0, tools_offered=[], tool_calls_requested=0, stop_reason="end_turn",
            response_digest=None)

    run(ledger.record([inference("a", 10), inference("b", 100), inference("a", 20)]))
    assert run(ledger.spent(since="", session_id="a")) == (32, 1.0)
    assert run(ledger.spent(since="")) == (133, 1.5)
    if not raw.pg:  # the plan: the session's index, not every inference since then
        plan = raw.query("EXPLAIN QUERY PLAN " + sql.spent(sql.SQLITE, session=True), ("", "a"))
        assert "audit_log_session" in str(plan), plan



def test_both_backends_number_and_name_their_migrations_alike() -> None:
    from overt.ledger.schema import NAMES
    from overt.ledger.schema import postgres as pg_schema
    from overt.ledger.schema import sqlite as sqlite_schema

    assert [(v, n) for v, n, _ in sqlite_schema.MIGRATIONS] == \
        [(v, n) for v, n, _ in pg_schema.MIGRATIONS] == sorted(NAMES.items())


def test_a_caller_cancelled_while_its_record_is_queued_leaves_the_writer_running(
        ledger: Any) -> None:
    async def cancel_one() -> list[Any]:
        task = asyncio.create_task(ledger.record([_started_event("T-cancelled")]))
        await asyncio.sleep(0)  # the batch is queued: the task waits on the writer
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return list(await ledger.record([_started_event("T-after")]))

    entries = run(cancel_one())
    assert entries[0].turn_id == "T-after"
    # the writer had taken the cancelled caller's batch: it is on the record all the same
    assert [e.turn_id for e in run(ledger.entries())] == ["T-cancelled", "T-after"]
    assert run(ledger.verify(check_bodies=False)).ok


def test_callers_on_several_event_loops_and_threads_each_hear_of_their_own_batch(
        ledger: Any) -> None:
    """Batches of callers on four event loops (each in its thread) and of blocking
    callers share the writer's commits; each caller gets its own entries back."""
    def on_a_loop(n: int) -> list[str | None]:
        async def many() -> list[str | None]:
            batches = await asyncio.gather(*[ledger.record([_started_event(f"L{n}-{i}")])
                                             for i in range(25)])
            return [e.turn_id for batch in batches for e in batch]
        return asyncio.run(many())

    def blocking(n: int) -> list[str | None]:
        return [e.turn_id for i in range(25)
                for e in ledger.record_sync([_started_event(f"B{n}-{i}")])]

    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        loops = [pool.submit(on_a_loop, n) for n in range(4)]
        blocked = [pool.submit(blocking, n) for n in range(2)]
        for n, future in enumerate(loops):
            assert future.result() == [f"L{n}-{i}" for i in range(25)]
        for n, future in enumerate(blocked):
            assert future.result() == [f"B{n}-{i}" for i in range(25)]
    assert run(ledger.count("turn.started")) == 150
    assert run(ledger.verify(check_bodies=False)).ok


def _started_event(turn_id: str) -> TurnStarted:
    return TurnStarted(turn_id=turn_id, session_id="s", source="cli", caller_session_id="c",
                       model="m", route="r", max_tool_calls=5, actor="operator:default",
                       message_digest="sha256:" + "0" * 64)
