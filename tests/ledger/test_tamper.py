"""The tamper matrix: what someone with database access may try, on both backends,
and how each attempt is prevented (the database refuses it) or detected
(``overt ledger verify`` exits 3). The tamper matrix of docs/security.md is this file.

Cases the chain cannot catch on its own (a truncated tail, a re-hashed chain, a
forged prune) are detected against signed checkpoints kept outside the database
(``overt ledger verify --checkpoints DIR --key PUB`` exits 3).
"""

from __future__ import annotations

import contextlib
import io
import json
import sqlite3
from collections.abc import Iterator
from typing import Any

import pytest

from overt.cli.main import main
from overt.errors import LedgerError
from overt.events import PolicyDecided, ToolCallCompleted
from overt.ledger.canonical import chain_hash, entry_payload
from overt.ledger.export import export_jsonl
from overt.models.fake import ScriptedModel
from overt.tools.base import tool
from tests.backends import Raw
from tests.conftest import RuntimeFactory, cli_message, run

EXIT_VERIFY = 3


@tool(read_only=True)
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def one_turn(make_runtime: RuntimeFactory) -> None:
    """One turn with a tool call, stored in the database before anyone tampers with it."""
    model = ScriptedModel([{"tool_calls": [{"name": "lookup", "arguments": {"key": "k"}}]},
                           "the value"])
    runtime = make_runtime(model, tools=[lookup])
    result = run(runtime.respond(cli_message("what is k?")))
    assert result.error is None
    run(runtime.ledger.verify())


def verify_exit(ledger_url: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["--db", ledger_url, "ledger", "verify"])
    return code, capsys.readouterr().out


def seq_of(raw: Raw, kind: str) -> int:
    return int(raw.query(f"SELECT seq FROM audit_log WHERE kind = '{kind}'")[0][0])


def test_an_untouched_ledger_verifies_with_exit_0(
    make_runtime: RuntimeFactory, ledger_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    one_turn(make_runtime)
    assert verify_exit(ledger_url, capsys)[0] == 0


def test_change_an_entry_is_refused_by_the_database_and_detected_without_the_guard(
    make_runtime: RuntimeFactory, raw: Raw, ledger_url: str,
    capsys: pytest.CaptureFixture[str]
) -> None:
    one_turn(make_runtime)
    statement = ("UPDATE audit_log SET data = replace(data, 'lookup', 'lookuq') "
                 "WHERE kind = 'tool_call.completed'")
    with pytest.raises(raw.append_only_error):
        raw.execute(statement)
    raw.drop_guards().execute(statement)
    code, out = verify_exit(ledger_url, capsys)
    assert code == EXIT_VERIFY and "hash does not match" in out


def test_delete_an_entry_is_refused_by_the_database_and_detected_without_the_guard(
    make_runtime: RuntimeFactory, raw: Raw, ledger_url: str,
    capsys: pytest.CaptureFixture[str]
) -> None:
    one_turn(make_runtime)
    seq = seq_of(raw, "tool_call.started")
    with pytest.raises(raw.append_only_error):
        raw.execute(f"DELETE FROM audit_log WHERE seq = {seq}")
    raw.drop_guards().execute(f"DELETE FROM audit_log WHERE seq = {seq}")
    code, out = verify_exit(ledger_url, capsys)
    assert code == EXIT_VERIFY and "missing entry before it" in out


def test_insert_an_entry_at_the_tail_is_detected(
    make_runtime: RuntimeFactory, raw: Raw, ledger_url: str,
    capsys: pytest.CaptureFixture[str]
) -> None:
    one_turn(make_runtime)
    (head,) = raw.query("SELECT max(seq) FROM audit_log")[0]
    # INSERT is what every writer may do: a forged entry that claims to follow the head
    raw.execute("INSERT INTO audit_log (seq, id, kind, at, turn_id, session_id, data, "
                f"prev_hash, hash) SELECT {head} + 1, id || 'x', kind, at, turn_id, "
                f"session_id, data, hash, hash FROM audit_log WHERE seq = {head}")
    code, out = verify_exit(ledger_url, capsys)
    assert code == EXIT_VERIFY and f"FAILED at entry seq {head + 1}" in out


def test_reorder_two_entries_is_detected(
    make_runtime: RuntimeFactory, raw: Raw, ledger_url: str, backend: str,
    capsys: pytest.CaptureFixture[str]
) -> None:
    one_turn(make_runtime)
    started, inference = seq_of(raw, "turn.started"), seq_of(raw, "inference")
    raw.drop_guards()
    raw.execute(f"UPDATE audit_log SET seq = -1 WHERE seq = {started}")
    raw.execute(f"UPDATE audit_log SET seq = {started} WHERE seq = {inference}")
    raw.execute(f"UPDATE audit_log SET seq = {inference} WHERE seq = -1")
    code = main(["--db", ledger_url, "ledger", "verify"])
    out, _err = capsys.readouterr()
    assert code == EXIT_VERIFY and "FAILED at entry seq 2: prev_hash" in out


def test_delete_a_content_body_is_refused_by_the_database_and_detected_without_the_guard(
    make_runtime: RuntimeFactory, ledger: Any, raw: Raw, ledger_url: str,
    capsys: pytest.CaptureFixture[str]
) -> None:
    one_turn(make_runtime)
    (result,) = [e.event(ToolCallCompleted).result_digest
                 for e in run(ledger.entries(kinds=["tool_call.completed"]))]
    statement = f"DELETE FROM content_blobs WHERE digest = '{result}'"
    with pytest.raises(raw.append_only_error):
        raw.execute(statement)
    raw.drop_guards().execute(statement)
    report = run(ledger.verify())
    assert not report.ok and result in (report.problem or "")
    assert report.bad_seq == seq_of(raw, "tool_call.completed")
    code, out = verify_exit(ledger_url, capsys)
    assert code == EXIT_VERIFY and "is missing" in out


def test_a_body_gone_with_a_recorded_prune_is_not_a_failure(
    make_runtime: RuntimeFactory, ledger: Any
) -> None:
    from overt.clock import now_iso

    one_turn(make_runtime)
    run(ledger.prune(now_iso()))
    one_turn(make_runtime)
    assert run(ledger.verify()).ok


def test_after_a_prune_a_deleted_body_of_a_later_turn_is_still_detected(
    make_runtime: RuntimeFactory, ledger: Any, raw: Raw, ledger_url: str,
    capsys: pytest.CaptureFixture[str]
) -> None:
    from overt.clock import now_iso

    one_turn(make_runtime)
    run(ledger.prune(now_iso()))
    one_turn(make_runtime)
    (result,) = [e.event(ToolCallCompleted).result_digest
                 for e in run(ledger.entries(kinds=["tool_call.completed"]))]
    raw.drop_guards().execute(f"DELETE FROM content_blobs WHERE digest = '{result}'")
    code, out = verify_exit(ledger_url, capsys)
    assert code == EXIT_VERIFY and "is missing" in out


def test_a_body_of_a_turn_a_prune_cut_in_two_may_have_gone_with_it(ledger: Any) -> None:
    from overt.clock import now_iso
    from overt.events import ToolCallCompleted, ToolCallStarted, TurnStarted
    from overt.ledger.canonical import digest_text

    message, args, result = "hello", "{}", "the result"
    common = {"turn_id": "t1", "session_id": "s1", "caller_session_id": "s1"}
    run(ledger.record([TurnStarted(source="cli", message_digest=digest_text(message),
                                   model="m", route="r", max_tool_calls=5,
                                   actor="operator:default", **common),
                       ToolCallStarted(tool_call_id="c1", tool_name="lookup", triggered_by="cli",
                                       args_sha256=digest_text(args), **common)],
                      {digest_text(message): message, digest_text(args): args}))
    cutoff = now_iso()
    run(ledger.record([ToolCallCompleted(
        tool_call_id="c1", tool_name="lookup", triggered_by="cli", tool_status="ok",
        tool_duration_ms=1.0, exc_type=None, args_sha256=digest_text(args),
        result_digest=digest_text(result), **common)], {digest_text(result): result}))
    assert run(ledger.prune(cutoff)).through_seq == 2
    report = run(ledger.verify())
    assert report.ok, report.problem  # the arguments went with the turn's first half


# -- a read error while verifying or exporting: never ok on a partial ledger ----------


class _Failing:
    """A connection (or cursor, or pool) whose statements touching ``table`` fail
    as a full disk would; everything else is the real object's."""

    def __init__(self, real: Any, table: str, error: Exception) -> None:
        self._real, self._table, self._error = real, table, error

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def __enter__(self) -> _Failing:
        self._real.__enter__()
        return self

    def __exit__(self, *exc: Any) -> Any:
        return self._real.__exit__(*exc)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._real)

    def execute(self, statement: Any, *args: Any, **kwargs: Any) -> Any:
        if self._table in str(statement):
            raise self._error
        answer = self._real.execute(statement, *args, **kwargs)
        return self if answer is self._real else answer

    def cursor(self, *args: Any, **kwargs: Any) -> _Failing:
        return _Failing(self._real.cursor(*args, **kwargs), self._table, self._error)

    @contextlib.contextmanager
    def connection(self, *args: Any, **kwargs: Any) -> Iterator[_Failing]:
        with self._real.connection(*args, **kwargs) as conn:
            yield _Failing(conn, self._table, self._error)


def inject_read_error(ledger: Any, monkeypatch: pytest.MonkeyPatch, table: str) -> None:
    if ledger.backend == "sqlite":  # each reader thread's connection
        error: Exception = sqlite3.OperationalError("disk I/O error")
        reader_conn = ledger._db._reader_conn
        monkeypatch.setattr(ledger._db, "_reader_conn",
                            lambda: _Failing(reader_conn(), table, error))
        return
    import psycopg

    error = psycopg.errors.DiskFull("could not write to file: No space left on device")
    monkeypatch.setattr(ledger._db, "_pool", _Failing(ledger._db._pool, table, error))


@pytest.mark.parametrize("table", ["audit_log", "content_blobs"])
def test_a_read_error_makes_verify_fail_loudly(
    make_runtime: RuntimeFactory, ledger: Any, monkeypatch: pytest.MonkeyPatch, table: str
) -> None:
    one_turn(make_runtime)
    run(ledger.verify())  # anything waiting is stored before the disk fails
    inject_read_error(ledger, monkeypatch, table)
    with pytest.raises(LedgerError, match="cannot read ledger"):
        run(ledger.verify())


def test_a_read_error_makes_export_fail_loudly(
    make_runtime: RuntimeFactory, ledger: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    one_turn(make_runtime)
    run(ledger.verify())
    inject_read_error(ledger, monkeypatch, "audit_log")
    out = io.StringIO()
    with pytest.raises(LedgerError, match="cannot read ledger"):
        run(export_jsonl(ledger, out))
    assert out.getvalue() == ""


# -- the SQLite gate: no row in any table switches the append-only guards off ---------


def test_sqlite_has_no_gate_table_one_insert_could_open(tmp_path: Any) -> None:
    from overt.ledger.sqlite import SqliteLedger

    db = tmp_path / "l.db"
    ledger = SqliteLedger.open(db)
    ledger.close_sync()
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        with pytest.raises(sqlite3.OperationalError, match="no such table"):
            conn.execute("INSERT INTO overt_prune_gate VALUES (999999)")
        guards = conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger' "
                              "AND name LIKE '%_no_delete'").fetchall()
        assert {"audit_log_no_delete", "content_blobs_no_delete",
                "trail_index_no_delete"} <= {name for name, _ in guards}
        assert all(" WHEN " not in sql for _, sql in guards)  # no condition to satisfy
    finally:
        conn.close()


def test_the_guards_stand_again_after_a_prune(
    make_runtime: RuntimeFactory, ledger: Any, raw: Raw
) -> None:
    from overt.clock import now_iso

    one_turn(make_runtime)
    record = run(ledger.prune(now_iso()))
    assert record.removed_entries > 0
    one_turn(make_runtime)
    for table in ("audit_log", "content_blobs"):
        with pytest.raises(raw.append_only_error):
            raw.execute(f"DELETE FROM {table}")
    assert run(ledger.verify()).ok


# -- against signed checkpoints: what someone who can rewrite the database does -------


class Witnessed:
    """A key pair and a witness directory holding one checkpoint of the ledger, made
    through the CLI as an operator would."""

    def __init__(self, ledger_url: str, tmp_path: Any) -> None:
        self.url = ledger_url
        self.private, self.public = tmp_path / "ledger.key", tmp_path / "ledger.key.pub"
        self.dir = tmp_path / "witness"
        assert main(["--db", ledger_url, "ledger", "keygen", "--private", str(self.private),
                     "--public", str(self.public)]) == 0
        assert main(["--db", ledger_url, "ledger", "checkpoint", "--key", str(self.private),
                     "--witness-dir", str(self.dir)]) == 0

    def verify(self, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
        capsys.readouterr()
        code = main(["--db", self.url, "ledger", "verify", "--checkpoints", str(self.dir),
                     "--key", str(self.public)])
        return code, capsys.readouterr().out


def checkpointed(make_runtime: RuntimeFactory, ledger_url: str, tmp_path: Any) -> Witnessed:
    one_turn(make_runtime)
    witnessed = Witnessed(ledger_url, tmp_path)
    one_turn(make_runtime)
    return witnessed


def rechain(raw: Raw, rows: list[tuple[Any, ...]], prev: str) -> None:
    """Write ``rows`` (the nine columns) back with every hash re-computed from ``prev``."""
    for seq, entry_id, kind, at, turn_id, session_id, data, _, _ in rows:
        digest = chain_hash(prev, entry_payload(seq, entry_id, kind, at, turn_id, session_id,
                                                data))
        raw.execute("UPDATE audit_log SET id = ?, prev_hash = ?, hash = ? WHERE seq = ?",
                    (entry_id, prev, digest, seq))
        prev = digest


COLUMNS = "seq, id, kind, at, turn_id, session_id, data, prev_hash, hash"


def test_a_checkpointed_ledger_verifies_against_its_checkpoints_with_exit_0(
    make_runtime: RuntimeFactory, ledger_url: str, tmp_path: Any,
    capsys: pytest.CaptureFixture[str]
) -> None:
    witnessed = checkpointed(make_runtime, ledger_url, tmp_path)
    code, out = witnessed.verify(capsys)
    assert code == 0 and "ok: against 1 signed checkpoints" in out


def test_truncate_the_tail_is_detected_against_the_checkpoint(
    make_runtime: RuntimeFactory, ledger: Any, raw: Raw, ledger_url: str, tmp_path: Any,
    capsys: pytest.CaptureFixture[str]
) -> None:
    witnessed = checkpointed(make_runtime, ledger_url, tmp_path)
    (size,) = raw.query("SELECT min(seq) FROM audit_log WHERE kind = 'ledger.checkpoint'")[0]
    raw.drop_guards().execute(f"DELETE FROM audit_log WHERE seq >= {size - 2}")
    raw.execute(f"DELETE FROM trail_index WHERE seq >= {size - 2}")
    assert verify_exit(ledger_url, capsys)[0] == 0  # the chain alone cannot tell
    code, out = witnessed.verify(capsys)
    assert code == EXIT_VERIFY and "its tail was cut" in out


@pytest.mark.slow
def test_rehash_the_whole_chain_is_detected_against_the_checkpoint(
    make_runtime: RuntimeFactory, ledger: Any, raw: Raw, ledger_url: str, tmp_path: Any,
    capsys: pytest.CaptureFixture[str]
) -> None:
    witnessed = checkpointed(make_runtime, ledger_url, tmp_path)
    rows = raw.query(f"SELECT {COLUMNS} FROM audit_log ORDER BY seq")
    first = list(rows[0])
    first[1] = first[1][:-1] + ("A" if first[1][-1] != "A" else "B")  # a changed entry
    raw.drop_guards()
    rechain(raw, [tuple(first), *rows[1:]], "sha256:" + "0" * 64)
    assert verify_exit(ledger_url, capsys)[0] == 0  # the chain alone cannot tell
    code, out = witnessed.verify(capsys)
    assert code == EXIT_VERIFY and "re-computed" in out


@pytest.mark.slow
def test_forge_a_prune_is_detected_against_the_checkpoint(
    make_runtime: RuntimeFactory, ledger: Any, raw: Raw, ledger_url: str, tmp_path: Any,
    capsys: pytest.CaptureFixture[str]
) -> None:
    witnessed = checkpointed(make_runtime, ledger_url, tmp_path)
    cut = seq_of(raw, "tool_call.completed")
    (sealed,) = raw.query(f"SELECT hash FROM audit_log WHERE seq = {cut}")[0]
    raw.drop_guards()
    for table in ("content_blobs", "audit_log", "trail_index"):
        raw.execute(f"DELETE FROM {table} WHERE seq <= {cut}")
    head, head_hash = raw.query("SELECT seq, hash FROM audit_log ORDER BY seq DESC LIMIT 1")[0]
    data = ('{"cutoff":"2999-01-01T00:00:00.000000Z","first_removed_seq":1,'
            f'"held_back_by_turn":null,"last_removed_hash":"{sealed}","removed_content":0,'
            f'"removed_entries":{cut},"removed_from_at":null,"removed_to_at":null,'
            f'"through_seq":{cut}}}')
    raw.execute(f"INSERT INTO audit_log ({COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (head + 1, "01FORGED00000000000000000", "ledger.pruned",
                 "2999-01-01T00:00:00.000000Z", None, None, data, head_hash, "x"))
    rechain(raw, raw.query(f"SELECT {COLUMNS} FROM audit_log WHERE seq = {head + 1}"),
            head_hash)
    assert verify_exit(ledger_url, capsys)[0] == 0  # the chain alone cannot tell
    code, out = witnessed.verify(capsys)
    assert code == EXIT_VERIFY and "a forged prune" in out


def test_change_a_checkpointed_entry_is_detected_against_the_checkpoint(
    make_runtime: RuntimeFactory, ledger: Any, raw: Raw, ledger_url: str, tmp_path: Any,
    capsys: pytest.CaptureFixture[str]
) -> None:
    witnessed = checkpointed(make_runtime, ledger_url, tmp_path)
    raw.drop_guards().execute("UPDATE audit_log SET hash = 'sha256:' || upper(substr(hash, 8)) "
                              "WHERE seq = 2")
    code, out = witnessed.verify(capsys)
    assert code == EXIT_VERIFY and "the chain itself fails" in out


def test_a_real_prune_signed_by_overt_ledger_prune_verifies_against_the_checkpoints(
    make_runtime: RuntimeFactory, ledger_url: str, tmp_path: Any,
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    witnessed = checkpointed(make_runtime, ledger_url, tmp_path)
    config = tmp_path / "overt.toml"
    config.write_text(f"[checkpoints]\nprivate_key = {str(witnessed.private)!r}\n"
                      f"witness_dir = {str(witnessed.dir)!r}\n")
    code = main(["--db", ledger_url, "--config", str(config), "ledger", "prune",
                 "--older-than", "2999-01-01T00:00:00Z"])
    out = capsys.readouterr().out
    assert code == 0 and "signed checkpoint of" in out
    code, out = witnessed.verify(capsys)
    assert code == 0, out


def test_rewrite_the_stored_merkle_tree_is_refused_and_detected_against_the_checkpoint(
    make_runtime: RuntimeFactory, ledger: Any, raw: Raw, ledger_url: str, tmp_path: Any,
    capsys: pytest.CaptureFixture[str]
) -> None:
    witnessed = checkpointed(make_runtime, ledger_url, tmp_path)
    statement = "UPDATE merkle_nodes SET hash = ? WHERE level = 0"
    with pytest.raises(raw.append_only_error):
        raw.execute(statement, ("00" * 32,))
    raw.drop_guards().execute(statement, ("00" * 32,))
    code, out = witnessed.verify(capsys)
    assert code == EXIT_VERIFY and "FAILED against the signed checkpoints" in out


# -- issue 33: the proofs against the insider they exist to catch ---------------------


def signed_root(raw: Raw, size: int) -> bytes:
    """The RFC 9162 root of the ledger's first ``size`` entries, from their chain hashes."""
    from overt.ledger import merkle

    leaves = [merkle.entry_leaf(h) for (h,) in raw.query(
        f"SELECT hash FROM audit_log WHERE seq <= {size} ORDER BY seq")]
    return merkle.root(merkle.perfect_over(leaves), size)


def forged_copy(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """Entry ``row`` (the nine columns) with its tool rewritten as ``wire_money``, its
    hash re-computed on the same ``prev_hash``."""
    seq, entry_id, kind, at, turn_id, session_id, data, prev, _ = row
    data = data.replace('"lookup"', '"wire_money"')
    digest = chain_hash(prev, entry_payload(seq, entry_id, kind, at, turn_id, session_id, data))
    return (seq, entry_id, kind, at, turn_id, session_id, data, prev, digest)


def plant_forged_tile(raw: Raw, level: int, first: int) -> tuple[tuple[Any, ...], list[bytes]]:
    """As an owner (or superuser) would: store the hash of tile (``level``, ``first``) built
    from the real leaves with the ``tool_call.completed`` entry in it swapped for a
    forged copy; (that copy, the forged leaves)."""
    from overt.ledger import merkle

    rows = raw.query(f"SELECT {COLUMNS} FROM audit_log ORDER BY seq")
    assert int(rows[0][0]) == 1
    (index,) = [i for i, r in enumerate(rows) if r[2] == "tool_call.completed"
                and first <= i < first + (1 << level)]
    forged = forged_copy(rows[index])
    leaves = [merkle.entry_leaf(r[8]) for r in rows]
    leaves[index] = merkle.entry_leaf(forged[8])
    tile = merkle.perfect_over(leaves)(first, 1 << level)
    raw.execute("INSERT INTO merkle_nodes (level, first_leaf, hash) VALUES (?, ?, ?)",
                (level, first, tile.hex()))
    return forged, leaves


def hand_made_proof(forged: tuple[Any, ...], leaves: list[bytes], note: str,
                    key_id: str, size: int) -> bytes:
    """The proof of one (forged) entry an attacker writes by hand, in the first format."""
    import base64

    from overt.ledger import merkle, proofs

    seq = int(forged[0])
    path = merkle.inclusion_proof(merkle.perfect_over(leaves), seq - 1, size)
    columns = dict(zip(("seq", "id", "kind", "at", "turn_id", "session_id", "data",
                        "prev_hash", "hash"), forged, strict=True))
    proof = {"format": "overt-inclusion-proof/1", "turn_id": forged[4], "checkpoint": note,
             "key_id": key_id, "nodes": [base64.b64encode(p).decode() for p in path],
             "paths": [list(range(len(path)))], "entries": [columns]}
    return proofs.dump(proof).encode()


@pytest.mark.slow
def test_plant_a_merkle_tile_is_never_signed_and_is_detected_naming_the_tile(
    make_runtime: RuntimeFactory, ledger: Any, raw: Raw, ledger_url: str, tmp_path: Any,
    capsys: pytest.CaptureFixture[str]
) -> None:
    from overt.ledger import checkpoints, proofs, signing
    from tests.ledger.proofs_helpers import add_turns

    add_turns(ledger, 80)  # 240 entries, then the operator's first checkpoint
    witnessed = Witnessed(ledger_url, tmp_path)
    add_turns(ledger, 10)
    one_turn(make_runtime)  # its lookup lies in the tile of leaves 256..511
    add_turns(ledger, 90)
    forged, forged_leaves = plant_forged_tile(raw, 8, 256)
    capsys.readouterr()
    code = main(["--db", ledger_url, "ledger", "checkpoint", "--key", str(witnessed.private),
                 "--witness-dir", str(witnessed.dir)])
    out, err = capsys.readouterr()
    assert code == EXIT_VERIFY, out + err
    assert "level 8, first leaf 256" in out + err
    key = signing.read_public(witnessed.public)
    found = checkpoints.read_witness_dir(witnessed.dir, key)[0]
    path, newest = found[-1]
    assert newest.size > 512
    assert newest.root == signed_root(raw, newest.size)  # the entries' root, not the plant's
    code, out = witnessed.verify(capsys)
    assert code == EXIT_VERIFY and "level 8, first leaf 256" in out
    # the attacker's proof of the forged entry, against the newest checkpoint
    note = path.read_text()
    data = hand_made_proof(forged, forged_leaves[:newest.size], note, key.key_id, newest.size)
    with pytest.raises(Exception, match="not in the tree"):
        proofs.check(data, key)
    # and the real entries of that tile are still proved
    proof = run(proofs.prove(ledger, forged[4], note, newest, key))
    assert proofs.check(proofs.dump(proof).encode(), key).entries == len(proof["entries"])


def pruned_config(witnessed: Witnessed, tmp_path: Any) -> str:
    config = tmp_path / "overt.toml"
    config.write_text(f"[checkpoints]\nprivate_key = {str(witnessed.private)!r}\n"
                      f"witness_dir = {str(witnessed.dir)!r}\n")
    return str(config)


def plant_forged_seal(raw: Raw, through: int) -> int:
    """The attacker's one INSERT: a ``ledger.pruned`` entry chained at the head that seals
    entries ``1..through``, deleting nothing; its seq."""
    head, head_hash = raw.query("SELECT seq, hash FROM audit_log ORDER BY seq DESC LIMIT 1")[0]
    (sealed,) = raw.query(f"SELECT hash FROM audit_log WHERE seq = {through}")[0]
    data = ('{"cutoff":"2999-01-01T00:00:00.000000Z","first_removed_seq":1,'
            f'"held_back_by_turn":null,"last_removed_hash":"{sealed}","removed_content":0,'
            f'"removed_entries":{through},"removed_from_at":null,"removed_to_at":null,'
            f'"through_seq":{through}}}')
    seq, entry_id, at = head + 1, "01FORGEDSEAL0000000000000", "2999-01-01T00:00:00.000000Z"
    digest = chain_hash(head_hash, entry_payload(seq, entry_id, "ledger.pruned", at, None, None,
                                                 data))
    raw.execute(f"INSERT INTO audit_log ({COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (seq, entry_id, "ledger.pruned", at, None, None, data, head_hash, digest))
    return int(seq)


def delete_through(raw: Raw, through: int) -> None:
    raw.drop_guards()
    for table in ("content_blobs", "audit_log", "trail_index"):
        raw.execute(f"DELETE FROM {table} WHERE seq <= {through}")


@pytest.mark.slow
def test_a_forged_seal_is_never_signed_by_the_next_prune_and_is_detected(
    make_runtime: RuntimeFactory, ledger: Any, raw: Raw, ledger_url: str, tmp_path: Any,
    capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.ledger.proofs_helpers import add_turns

    witnessed = checkpointed(make_runtime, ledger_url, tmp_path)
    add_turns(ledger, 100)
    config = pruned_config(witnessed, tmp_path)
    seal = plant_forged_seal(raw, 256)
    assert verify_exit(ledger_url, capsys)[0] == 0  # the chain alone cannot tell
    (cutoff,) = raw.query("SELECT at FROM audit_log WHERE seq = 32")[0]
    # the operator's routine prune refuses to run on top of it
    code = main(["--db", ledger_url, "--config", config, "ledger", "prune",
                 "--older-than", cutoff])
    out, err = capsys.readouterr()
    assert code == EXIT_VERIFY, out + err
    assert f"entry {seal}" in out + err and "no prune wrote" in out + err
    assert raw.query("SELECT min(seq) FROM audit_log")[0][0] == 1  # nothing removed
    code, out = witnessed.verify(capsys)
    assert code == EXIT_VERIFY and f"entry {seal}" in out and "no prune wrote" in out
    delete_through(raw, 256)  # and the attacker deletes what it sealed anyway
    code, out = witnessed.verify(capsys)
    assert code == EXIT_VERIFY and "FAILED against the signed checkpoints" in out


@pytest.mark.slow
def test_a_prune_over_a_disowned_seal_signs_only_what_it_removed(
    make_runtime: RuntimeFactory, ledger: Any, raw: Raw, ledger_url: str, tmp_path: Any,
    capsys: pytest.CaptureFixture[str]
) -> None:
    from overt.ledger import checkpoints, signing
    from tests.ledger.proofs_helpers import add_turns

    witnessed = checkpointed(make_runtime, ledger_url, tmp_path)
    add_turns(ledger, 100)
    config = pruned_config(witnessed, tmp_path)
    seal = plant_forged_seal(raw, 256)
    capsys.readouterr()
    # the operator, having looked into it, disowns the seal with the signing key
    code = main(["--db", ledger_url, "--config", config, "ledger", "disown-seal", str(seal)])
    out, err = capsys.readouterr()
    assert code == 0, out + err
    code, out = witnessed.verify(capsys)
    assert code == 0 and f"disowned: entry {seal}" in out, out
    (cutoff,) = raw.query("SELECT at FROM audit_log WHERE seq = 32")[0]
    code = main(["--db", ledger_url, "--config", config, "ledger", "prune", "--json",
                 "--older-than", cutoff])
    out, err = capsys.readouterr()
    assert code == 0, out + err
    through = json.loads(out)["through_seq"]
    assert 0 < through < 40
    key = signing.read_public(witnessed.public)
    newest = checkpoints.read_witness_dir(witnessed.dir, key)[0][-1][1]
    assert newest.pruned == through  # exactly what this prune removed
    code, out = witnessed.verify(capsys)
    assert code == 0, out
    delete_through(raw, 256)
    code, out = witnessed.verify(capsys)
    assert code == EXIT_VERIFY and "a forged prune" in out


def test_the_checkpointer_signs_on_and_reports_a_forged_seal(
    make_runtime: RuntimeFactory, ledger: Any, raw: Raw, ledger_url: str, tmp_path: Any
) -> None:
    from overt.errors import LedgerIntegrityError
    from overt.ledger import checkpoints, signing
    from overt.ledger.checkpointer import Checkpointer
    from overt.ledger.checkpoints import CheckpointSettings
    from tests.ledger.proofs_helpers import add_turns

    witnessed = checkpointed(make_runtime, ledger_url, tmp_path)
    add_turns(ledger, 100)
    seal = plant_forged_seal(raw, 256)
    key = signing.read_private(witnessed.private)
    settings = CheckpointSettings(str(witnessed.private), str(witnessed.dir), every_entries=1)
    maker = Checkpointer(ledger, key, settings)
    for _ in range(2):  # every interval: a checkpoint of the ledger as it is, and the error
        with pytest.raises(LedgerIntegrityError, match=f"entry {seal}.*no prune wrote"):
            run(maker.tick())
        newest = checkpoints.read_witness_dir(witnessed.dir, key.public)[0][-1][1]
        assert newest.size >= seal and newest.pruned == 0
        add_turns(ledger, 1)


def drop_entry(proof: dict[str, Any], kind: str) -> dict[str, Any]:
    """``proof`` without its (first) entry of ``kind``, its path and the nodes only that
    path used: every other check still holds."""
    import copy

    proof = copy.deepcopy(proof)
    (index,) = [i for i, e in enumerate(proof["entries"]) if e["kind"] == kind][:1]
    del proof["entries"][index], proof["paths"][index]
    used = sorted({i for path in proof["paths"] for i in path})
    renumber = {old: new for new, old in enumerate(used)}
    proof["nodes"] = [proof["nodes"][i] for i in used]
    proof["paths"] = [[renumber[i] for i in path] for path in proof["paths"]]
    return proof


def test_leave_an_entry_out_of_a_turns_proof_is_detected(
    make_runtime: RuntimeFactory, ledger: Any, raw: Raw, ledger_url: str, tmp_path: Any,
    capsys: pytest.CaptureFixture[str]
) -> None:
    from overt.ledger import proofs

    one_turn(make_runtime)
    witnessed = Witnessed(ledger_url, tmp_path)
    (turn_id,) = raw.query("SELECT turn_id FROM audit_log WHERE kind = 'turn.completed'")[0]
    capsys.readouterr()
    assert main(["--db", ledger_url, "ledger", "prove", turn_id, "--checkpoints",
                 str(witnessed.dir), "--key", str(witnessed.public)]) == 0
    proof = json.loads(capsys.readouterr().out)
    whole = tmp_path / "proof.json"
    whole.write_text(proofs.dump(proof))
    assert main(["ledger", "check-proof", str(whole), "--key", str(witnessed.public)]) == 0
    out = capsys.readouterr().out
    assert f"the whole turn {turn_id}" in out
    for kind in ("turn.completed", "tool_call.started"):
        bent = tmp_path / f"without-{kind}.json"
        bent.write_text(proofs.dump(drop_entry(proof, kind)))
        code = main(["ledger", "check-proof", str(bent), "--key", str(witnessed.public)])
        out = capsys.readouterr().out
        assert code == EXIT_VERIFY and "FAILED" in out, (kind, out)


@pytest.mark.slow
def test_a_checkpoint_the_ledger_recorded_but_the_witness_lacks_fails_verify(
    make_runtime: RuntimeFactory, ledger: Any, raw: Raw, ledger_url: str, tmp_path: Any,
    capsys: pytest.CaptureFixture[str]
) -> None:
    witnessed = checkpointed(make_runtime, ledger_url, tmp_path)
    assert main(["--db", ledger_url, "ledger", "checkpoint", "--key", str(witnessed.private),
                 "--witness-dir", str(witnessed.dir)]) == 0
    newest = sorted(witnessed.dir.glob("*.checkpoint"))[-1]
    note = newest.read_text()
    newest.write_text(note.rsplit("\n\n", 1)[0] + "\n\n")  # edited to read "not signed"
    code, out = witnessed.verify(capsys)
    assert code == EXIT_VERIFY and newest.name in out, out
    code = main(["--db", ledger_url, "ledger", "verify", "--checkpoints", str(witnessed.dir),
                 "--key", str(witnessed.public), "--allow-missing"])
    out = capsys.readouterr().out
    assert code == 0 and newest.name in out, out
    newest.unlink()  # or gone
    code, out = witnessed.verify(capsys)
    assert code == EXIT_VERIFY and "the witness directory lacks" in out, out


@pytest.mark.slow
def test_an_edited_newest_checkpoint_does_not_hide_a_tail_cut_since_the_older_ones(
    make_runtime: RuntimeFactory, ledger: Any, raw: Raw, ledger_url: str, tmp_path: Any,
    capsys: pytest.CaptureFixture[str]
) -> None:
    witnessed = checkpointed(make_runtime, ledger_url, tmp_path)
    (first,) = raw.query("SELECT max(seq) FROM audit_log")[0]
    one_turn(make_runtime)
    assert main(["--db", ledger_url, "ledger", "checkpoint", "--key", str(witnessed.private),
                 "--witness-dir", str(witnessed.dir)]) == 0
    newest = sorted(witnessed.dir.glob("*.checkpoint"))[-1]
    newest.write_text(newest.read_text().rsplit("\n\n", 1)[0] + "\n\n")
    raw.drop_guards().execute(f"DELETE FROM audit_log WHERE seq > {first}")  # the record too
    raw.execute(f"DELETE FROM trail_index WHERE seq > {first}")
    code, out = witnessed.verify(capsys)
    assert code == EXIT_VERIFY and newest.name in out, out


def test_leave_a_whole_tool_call_out_and_recount_is_caught_by_the_signed_turn_completed(
    make_runtime: RuntimeFactory, ledger: Any, raw: Raw, ledger_url: str, tmp_path: Any
) -> None:
    from overt.errors import LedgerIntegrityError
    from overt.ledger import checkpoints, proofs, signing

    one_turn(make_runtime)
    witnessed = Witnessed(ledger_url, tmp_path)
    (turn_id,) = raw.query("SELECT turn_id FROM audit_log WHERE kind = 'turn.completed'")[0]
    key = signing.read_public(witnessed.public)
    path, checkpoint = checkpoints.read_witness_dir(witnessed.dir, key)[0][-1]
    proof = run(proofs.prove(ledger, turn_id, path.read_text(), checkpoint, key))
    bent = drop_entry(drop_entry(proof, "tool_call.started"), "tool_call.completed")
    bent["turn_entries"] -= 2  # the prover's own count, edited too
    with pytest.raises(LedgerIntegrityError, match="counts 1 tool calls"):
        proofs.check(proofs.dump(bent).encode(), key)
    bent = drop_entry(proof, "tool_call.started")
    bent["turn_entries"] -= 1
    with pytest.raises(LedgerIntegrityError, match=r"no tool_call\.started"):
        proofs.check(proofs.dump(bent).encode(), key)


def _policy_digest(ledger: Any) -> str:
    digests = {e.event(PolicyDecided).policy_digest
               for e in run(ledger.entries(kinds=["policy.decision"]))}
    assert len(digests) == 1, digests
    return str(digests.pop())


def test_a_deleted_policy_body_is_detected(
    make_runtime: RuntimeFactory, ledger: Any, raw: Raw, ledger_url: str,
    capsys: pytest.CaptureFixture[str]
) -> None:
    """The rules that decided a call are evidence: a decision whose policy text is gone
    fails verification like any other missing body."""
    one_turn(make_runtime)
    policy = _policy_digest(ledger)
    raw.drop_guards().execute(f"DELETE FROM content_blobs WHERE digest = '{policy}'")
    report = run(ledger.verify())
    assert not report.ok and policy in (report.problem or "")
    assert report.bad_seq == seq_of(raw, "policy.decision")
    code, out = verify_exit(ledger_url, capsys)
    assert code == EXIT_VERIFY and "is missing" in out


def test_a_prune_keeps_the_policy_body_that_later_decisions_name(
    make_runtime: RuntimeFactory, ledger: Any, raw: Raw
) -> None:
    """A process stores its policy text with its first decision and only names it after;
    a prune of that first turn carries the text forward to the first decision it keeps,
    so the ledger still verifies and the rules of every kept decision can be read."""
    import time

    from overt.clock import now_iso

    model = ScriptedModel([{"tool_calls": [{"name": "lookup", "arguments": {"key": k}}]}
                           if i % 2 == 0 else "the value" for i, k in enumerate("aabb")])
    runtime = make_runtime(model, tools=[lookup])
    assert run(runtime.respond(cli_message("what is a?"))).error is None
    time.sleep(0.01)
    cutoff = now_iso()
    time.sleep(0.01)
    assert run(runtime.respond(cli_message("what is b?"))).error is None
    policy = _policy_digest(ledger)
    stored = [int(r[0]) for r in raw.query(
        f"SELECT seq FROM content_blobs WHERE digest = '{policy}'")]
    assert len(stored) == 1  # once, with the first decision
    record = run(ledger.prune(cutoff))
    assert record.removed_entries and stored[0] <= record.through_seq
    report = run(ledger.verify())
    assert report.ok, report.problem
    (kept,) = [e for e in run(ledger.entries(kinds=["policy.decision"]))]
    assert [int(r[0]) for r in raw.query(
        f"SELECT seq FROM content_blobs WHERE digest = '{policy}'")] == [kept.seq]
    assert run(ledger.content(policy, seq=kept.seq)) == runtime.engine.gate.policy.text
