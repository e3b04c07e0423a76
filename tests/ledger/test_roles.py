"""Least privilege on PostgreSQL: the writer role `overt serve` connects as can only
append to the chain (audit_log, content_blobs) and read; every other table is written
by the owner's triggers and functions (schema/derived.py), which derive or check each
row from the chain; only the owner's SECURITY DEFINER function prunes, and only through
a sealed prune record that only the owner may append. Everything overt does still works
as the writer. (SQLite has no roles: its side of the matrix is the guards a prune lifts
and restores in its own transaction, tests/ledger/test_tamper.py.)"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from overt.cli.main import main
from overt.clock import now_iso
from overt.errors import LedgerError, UsageError
from overt.events import ToolCallCompleted, TurnCompleted, TurnStarted
from overt.ids import new_ulid
from overt.ledger import open_ledger
from overt.ledger.canonical import digest_text
from overt.ledger.roles import setup_roles
from overt.ledger.schema import NAMES
from tests import backends
from tests.conftest import run

pytestmark = pytest.mark.postgres


@pytest.fixture(autouse=True)
def _server() -> None:
    backends.require_pg()


def _turn(name: str) -> tuple[list[Any], dict[str, str]]:
    body = f"body of {name}"
    return [TurnStarted(turn_id=name, session_id="S", source="cli", caller_session_id="cli:S",
                        message_digest=digest_text(body), model="m", route="default",
                        max_tool_calls=5, actor="operator:default"),
            TurnCompleted(turn_id=name, session_id="S", status="completed", reply_digest=None,
                          tools_used=[], tool_calls=0, model_calls=1, input_tokens=0,
                          output_tokens=0, cost_usd=0.0, duration_ms=1.0),
            ], {digest_text(body): body}


def _as(url: str, role: str) -> str:
    return url.replace("postgresql://", f"postgresql://{role}@", 1)


@pytest.fixture
def roles(tmp_path: Path) -> Iterator[tuple[str, str, str]]:
    """(ledger URL, owner, writer): a migrated ledger with one turn, its roles set up."""
    url = backends.new_url("postgres", tmp_path)
    suffix = new_ulid().lower()[-10:]
    owner, writer = f"overt_owner_{suffix}", f"overt_writer_{suffix}"
    ledger = open_ledger(url)
    run(ledger.record(*_turn("old")))
    ledger.close_sync()  # type: ignore[attr-defined]
    try:
        assert main(["--db", url, "ledger", "setup-roles", "--owner", owner,
                     "--writer", writer]) == 0
        yield url, owner, writer
    finally:
        backends.drop(url)
        import psycopg

        with psycopg.connect(backends.PG_BASE, autocommit=True) as conn:
            for role in (writer, owner):
                if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone():
                    conn.execute(f'DROP OWNED BY "{role}"')
                    conn.execute(f'DROP ROLE "{role}"')


def _writer_sql(url: str, writer: str, statement: str) -> None:
    import psycopg

    from overt.ledger.pg_url import parse_url

    conninfo, schema = parse_url(_as(url, writer))
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(f'SET search_path = "{schema}"')
        conn.execute(statement)


_NEXT = max(NAMES) + 1


@pytest.mark.parametrize("statement", [
    # attack 4: a version no overt has stops every open; the next one skips a migration
    "INSERT INTO overt_migrations VALUES (999, 'a later overt', '2030-01-01')",
    f"INSERT INTO overt_migrations VALUES ({_NEXT}, 'the next migration', '2030-01-01')",
    # a planted tile, trail index row, memory row, search row
    "INSERT INTO merkle_nodes VALUES (8, 0, repeat('ab', 32))",
    "INSERT INTO trail_index (session_id, seq, turn_id, kind, at) "
    "VALUES ('S', 3, 'new', 'turn.started', 'now')",
    "INSERT INTO memory_nodes VALUES ('n', 'Note', 't', 'b', 'a', 'now', NULL, 'n', 1, NULL, '')",
    "INSERT INTO memory_search VALUES ('n', 'a', 'Note', 'now', to_tsvector('forged'))",
    "INSERT INTO memory_trigrams VALUES ('n', 'a', 'Note', 'now', 'forged', 'forged')",
    # a seal of a range nobody pruned, chained correctly at the head
    "INSERT INTO audit_log SELECT seq + 1, 'x', 'ledger.pruned', at, NULL, NULL, "
    "'{\"through_seq\":2}', hash, hash FROM audit_log ORDER BY seq DESC LIMIT 1",
    "UPDATE audit_log SET data = data",
    "DELETE FROM audit_log",
    "DELETE FROM content_blobs",
    "TRUNCATE audit_log",
    "TRUNCATE content_blobs CASCADE",
    "UPDATE overt_migrations SET name = 'x'",
    "SELECT overt_prune(1000000)",
    "SELECT set_config('overt.prune_through', '1000000', false); DELETE FROM audit_log",
    "DROP TRIGGER audit_log_append_only ON audit_log",
    "ALTER TABLE audit_log DISABLE TRIGGER ALL",
])
def test_the_writer_cannot_change_delete_truncate_or_fake_a_prune(
    roles: tuple[str, str, str], statement: str
) -> None:
    import psycopg

    url, owner, writer = roles
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        _writer_sql(url, writer, statement)
    for role in (owner, writer):  # nothing planted stops an open
        opened = open_ledger(_as(url, role))
        assert run(opened.verify()).entries == 2
        opened.close_sync()  # type: ignore[attr-defined]


def test_the_writer_appends_and_reads_and_the_ledger_verifies(
    roles: tuple[str, str, str]
) -> None:
    url, _owner, writer = roles
    ledger = open_ledger(_as(url, writer))
    run(ledger.record(*_turn("new")))
    assert [e.turn_id for e in run(ledger.entries(kinds=["turn.started"]))] == ["old", "new"]
    assert run(ledger.verify()).ok
    with pytest.raises(LedgerError):
        run(ledger.prune(now_iso()))  # the writer may not execute overt_prune
    ledger.close_sync()  # type: ignore[attr-defined]


def test_the_owner_prunes_through_the_sealed_record_and_verify_passes(
    roles: tuple[str, str, str]
) -> None:
    url, owner, writer = roles
    cutoff = now_iso()
    writer_ledger = open_ledger(_as(url, writer))
    run(writer_ledger.record(*_turn("new")))
    writer_ledger.close_sync()  # type: ignore[attr-defined]
    ledger = open_ledger(_as(url, owner))
    record = run(ledger.prune(cutoff))
    assert record.removed_entries == 2 and record.through_seq == 2
    report = run(ledger.verify())
    assert report.ok and report.first_seq == 3
    ledger.close_sync()  # type: ignore[attr-defined]


def test_the_owner_cannot_prune_without_a_sealed_record_at_the_head(
    roles: tuple[str, str, str]
) -> None:
    import psycopg

    url, owner, _writer = roles
    from overt.ledger.pg_url import parse_url

    conninfo, schema = parse_url(_as(url, owner))
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(f'SET search_path = "{schema}"')
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="no sealed prune"):
            conn.execute("SELECT overt_prune(2)")
    assert run(open_ledger(url).verify()).entries == 2


def test_setup_roles_refuses_bad_names_and_sqlite(tmp_path: Path) -> None:
    with pytest.raises(UsageError):
        setup_roles(backends.PG_BASE, "a", "a")
    with pytest.raises(UsageError):
        setup_roles(backends.PG_BASE, "Robert'); DROP", "w")
    with pytest.raises(UsageError):
        setup_roles(str(tmp_path / "l.db"), "o", "w")


def _superuser(url: str) -> Any:
    import psycopg

    from overt.ledger.pg_url import parse_url

    conninfo, schema = parse_url(url)
    return psycopg.connect(conninfo, autocommit=True, options=f"-c search_path={schema}")


def _relations(url: str) -> list[tuple[str, str, str]]:
    """(name, relkind, first column) of every table, partition and view of the ledger."""
    with _superuser(url) as conn:
        return [(r[0], r[1], r[2]) for r in conn.execute(
            "SELECT c.relname, c.relkind, (SELECT a.attname FROM pg_attribute a "
            "WHERE a.attrelid = c.oid AND a.attnum = 1) FROM pg_class c "
            "WHERE c.relnamespace = current_schema()::regnamespace "
            "AND c.relkind IN ('r', 'p', 'v') ORDER BY 1").fetchall()]


def test_every_table_but_the_chain_refuses_the_writer_and_every_one_is_readable(
    roles: tuple[str, str, str]
) -> None:
    import psycopg

    from overt.ledger.pg_url import parse_url

    url, _owner, writer = roles
    relations = _relations(url)
    assert {"merkle_nodes", "overt_migrations", "trail_index", "memory_nodes",
            "memory_links", "memory_link_retractions", "memory_search", "memory_search_0",
            "memory_search_15", "audit_log", "content_blobs", "turns"} <= {
                name for name, _, _ in relations}
    conninfo, schema = parse_url(_as(url, writer))
    tried = 0
    with psycopg.connect(conninfo, autocommit=True, options=f"-c search_path={schema}") as conn:
        for name, kind, column in relations:
            conn.execute(f'SELECT * FROM "{name}" LIMIT 1')
            if kind == "v":  # (a view refuses most writes before privileges are asked)
                assert not conn.execute(
                    "SELECT has_table_privilege(%s, %s, 'INSERT, UPDATE, DELETE, TRUNCATE')",
                    (writer, f'"{schema}"."{name}"')).fetchone()[0]
                continue
            statements = {"INSERT": f'INSERT INTO "{name}" DEFAULT VALUES',
                          "UPDATE": f'UPDATE "{name}" SET "{column}" = "{column}"',
                          "DELETE": f'DELETE FROM "{name}"', "TRUNCATE": f'TRUNCATE "{name}"'}
            for operation, statement in statements.items():
                if name in ("audit_log", "content_blobs") and operation == "INSERT":
                    continue
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    conn.execute(statement)
                tried += 1
    assert tried >= 90  # every table and partition, every statement
    assert run(open_ledger(url).verify()).entries == 2


def test_the_writer_executes_no_function_that_runs_as_the_owner_but_the_writes(
    roles: tuple[str, str, str]
) -> None:
    url, _owner, writer = roles
    with _superuser(url) as conn:
        rows = conn.execute(
            "SELECT p.proname, has_function_privilege(%s, p.oid, 'EXECUTE'), "
            "pg_get_userbyid(p.proowner) FROM pg_proc p "
            "WHERE p.pronamespace = current_schema()::regnamespace AND p.prosecdef "
            "ORDER BY 1", (writer,)).fetchall()
    assert {name: may for name, may, _ in rows} == {
        "overt_memory_search": False, "overt_memory_trigrams": False, "overt_prune": False,
        "overt_trail_index": False,
        "overt_write_memory_link_retractions": True, "overt_write_memory_links": True,
        "overt_write_memory_nodes": True, "overt_write_merkle_nodes": True}
    assert {owner for _, _, owner in rows} == {_owner}
    with _superuser(url) as conn:  # each reads the ledger's tables, never a caller's temp one
        paths = conn.execute(
            "SELECT p.proname, p.proconfig FROM pg_proc p "
            "WHERE p.pronamespace = current_schema()::regnamespace AND p.prosecdef").fetchall()
    assert {name: config for name, config in paths} == {
        name: [f"search_path={_schema(url)}, pg_temp"] for name, _ in paths}


def _write_call(url: str, writer: str, statement: str, params: tuple[Any, ...]) -> None:
    import psycopg

    from overt.ledger.pg_url import parse_url

    conninfo, schema = parse_url(_as(url, writer))
    with psycopg.connect(conninfo, autocommit=True, options=f"-c search_path={schema}") as conn:
        conn.execute(statement, params)


def test_the_writers_functions_write_only_what_the_chain_records(
    roles: tuple[str, str, str]
) -> None:
    """A memory row goes in only as its entry says it (digests computed by the owner's
    function); a tile only as recomputed from the entries."""
    import psycopg

    from overt.events import NodeCreated
    from overt.ledger import sql, tree
    from overt.memory.search_sql import tags

    url, _owner, writer = roles
    node = {"id": "N1", "kind": "Note", "title": "t", "body": "the body", "actor": "agent:a",
            "created_at": now_iso(), "supersedes": None, "root_id": "N1", "revision": 1,
            "turn_id": None, "search_tags": tags("Note", "agent:a"), "session_id": None,
            "tool_call_id": None, "origin": None}
    statement = sql.insert_row(sql.POSTGRES, "memory_nodes", list(node))
    with pytest.raises(psycopg.errors.CheckViolation, match="no entry of the chain records"):
        _write_call(url, writer, statement, tuple(node.values()))
    ledger = open_ledger(_as(url, writer))
    run(ledger.record([NodeCreated(node_id="N1", node_kind="Note", actor="agent:a",
                                   title_digest=digest_text("t"),
                                   body_digest=digest_text("the body"))]))
    for changed in ({"body": "another body"}, {"actor": "agent:b"}, {"revision": 2},
                    {"search_tags": "zknote"}, {"kind": "Decision"}, {"turn_id": "T"},
                    {"session_id": "S"}, {"tool_call_id": "call-1"}, {"origin": "cli"}):
        with pytest.raises(psycopg.errors.CheckViolation, match="does not match entry 3"):
            _write_call(url, writer, statement, tuple({**node, **changed}.values()))
    _write_call(url, writer, statement, tuple(node.values()))
    found = run(ledger.select("SELECT title, body FROM memory_nodes WHERE id = %s", ("N1",)))
    assert [tuple(r) for r in found] == [("t", "the body")]
    # a subtree (a tile is 2**8): as the entries hash, not as planted
    t = run(tree.open_tree(ledger.select, sql.POSTGRES, leaves=[0, 1]))
    tile = sql.insert_row(sql.POSTGRES, "merkle_nodes", ["level", "first_leaf", "hash"])
    for level, first in ((0, 0), (1, 0), (0, 2)):
        digest = t.perfect(first, 1 << level).hex()
        with pytest.raises(psycopg.errors.CheckViolation, match="is not the hash"):
            _write_call(url, writer, tile, (level, first, digest[::-1]))
        _write_call(url, writer, tile, (level, first, digest))
    for level, first in ((9, 0), (1, 1), (1, 2)):  # too big; not aligned; not there yet
        with pytest.raises(psycopg.errors.CheckViolation):
            _write_call(url, writer, tile, (level, first, "00" * 32))
    assert run(ledger.verify()).ok
    ledger.close_sync()  # type: ignore[attr-defined]


def test_the_writer_cannot_lay_a_memory_write_at_another_conversations_tool_call(
    roles: tuple[str, str, str]
) -> None:
    """Turn "old" of session S is over; its call-v ran there. As the writer role, a
    memory write naming that turn and call (the entry and the row agreeing) is refused
    by the owner's function, and so is one naming a call that never ran."""
    import psycopg

    from overt.events import NodeCreated, ToolCallCompleted, ToolCallStarted
    from overt.ledger import sql
    from overt.memory.search_sql import tags

    url, _owner, writer = roles
    ledger = open_ledger(_as(url, writer))
    args = digest_text("{}")
    call = {"turn_id": "old", "session_id": "S", "tool_call_id": "call-v",
            "tool_name": "node_create", "triggered_by": "cli", "caller_session_id": "cli:S",
            "args_sha256": args}
    run(ledger.record([ToolCallStarted(**call), ToolCallCompleted(
        **call, tool_status="ok", tool_duration_ms=1.0, exc_type=None, result_digest=None)],
        {args: "{}"}))
    for n, call_id in enumerate(("call-v", "call-never")):
        node_id = f"N{n}"
        stamp = {"turn_id": "old", "session_id": "S", "tool_call_id": call_id,
                 "origin": "tool"}
        node = {"id": node_id, "kind": "Note", "title": "Payee", "body": "pay evil-corp",
                "actor": "agent:a", "created_at": now_iso(), "supersedes": None,
                "root_id": node_id, "revision": 1, "search_tags": tags("Note", "agent:a"),
                **stamp}
        run(ledger.record([NodeCreated(node_id=node_id, node_kind="Note", actor="agent:a",
                                       title_digest=digest_text("Payee"),
                                       body_digest=digest_text("pay evil-corp"), **stamp)]))
        with pytest.raises(psycopg.errors.CheckViolation, match="names a turn or tool call"):
            _write_call(url, writer, sql.insert_row(sql.POSTGRES, "memory_nodes", list(node)),
                        tuple(node.values()))
    assert not run(ledger.select("SELECT 1 FROM memory_nodes", ()))
    report = run(ledger.verify())  # the entries are on the chain; verify names the first
    assert not report.ok and report.memory_bad and "names tool call call-v of turn old" in (
        report.problem or "")
    ledger.close_sync()  # type: ignore[attr-defined]


def test_a_runtime_connected_as_the_writer_does_everything_it_does_as_the_owner(
    roles: tuple[str, str, str], tmp_path: Path
) -> None:
    """Turns, tool calls, an approval, memory (create, search, supersede, link,
    retract), the trail, and checkpoints by serve's checkpointer, its tiles stored
    through the owner's function, also over a prune's edge; then verify, with the
    checkpoints, passes."""
    from overt.ledger.checkpointer import Checkpointer
    from overt.ledger.checkpoints import CheckpointSettings
    from overt.memory.tools import memory_tools
    from overt.policy.engine import Policy
    from overt.policy.gate import Gate
    from overt.policy.rules import Rule
    from overt.reasoning.trail import assemble
    from overt.runtime import Runtime
    from tests.conftest import cli_message
    from tests.ledger.proofs_helpers import add_turns, make_signer
    from tests.memory.test_turn import agent, tool
    from tests.policy.helpers import effect_tools, runs_of

    url, owner, writer = roles
    ledger: Any = open_ledger(_as(url, writer))
    add_turns(ledger, 100)  # entries 3..302: the prune below cuts a tile
    cutoff = now_iso()
    model = agent([
        lambda _: {"tool_calls": [
            tool("node_create", kind="Decision", title="Queue", body="We use RabbitMQ."),
            tool("node_create", kind="Component", title="Ledger", body="The audit store.")]},
        lambda r: {"tool_calls": [
            tool("link_create", kind="applies_to", from_id=r[0]["node"]["id"],
                 to_id=r[1]["node"]["id"]),
            tool("node_supersede", id=r[0]["node"]["id"], title="Queue",
                 body="We use Kafka now.")]},
        lambda r: {"tool_calls": [tool("link_retract", id=r[2]["link"]["id"]),
                                  tool("node_search", query="kafka")]},
        lambda r: {"tool_calls": [tool("send_payment", amount=500, to="bob")]},
        lambda r: "found " + next(x for x in r if "results" in x)["results"][0]["title"],
    ])
    allow = Rule("memory.writes", "allow", "memory_writes", "the agent keeps its memory",
                 tools=("node_*", "link_*"))
    log = tmp_path / "payments.log"
    runtime = Runtime(model=model, ledger=ledger, tools=[*effect_tools(log), *memory_tools()],
                      gate=Gate(Policy([allow])))
    paused = run(runtime.respond(cli_message("remember and pay", session="w1")))
    assert paused.error is None and paused.awaiting_approval, paused
    resumed = run(runtime.approve(paused.awaiting_approval))
    assert resumed.result is not None and "found Queue" in resumed.result.text
    assert runs_of(log) == ["500 bob"]
    statuses = [e.event(ToolCallCompleted).tool_status for e in run(ledger.entries(
        kinds=["tool_call.completed"], session_id="cli:w1"))]
    assert statuses == ["ok"] * 7
    trail = assemble(run(ledger.trail_rows(session_id="cli:w1")), session_id="cli:w1")
    assert [t.message for t in trail] == ["remember and pay"]
    assert len(trail[0].tool_calls) == 7 and trail[0].steps
    assert [a.decision for a in trail[0].approvals] == ["approved"]
    assert [r[0] for r in run(ledger.select(
        "SELECT count(*) FROM memory_search", ()))] == [2]  # the two current revisions
    signer = make_signer(tmp_path)
    settings = CheckpointSettings(signer.settings.private_key, signer.settings.witness_dir,
                                  every_entries=1)
    assert run(Checkpointer(ledger, signer.key, settings).tick()) is not None
    assert run(ledger.select("SELECT count(*) FROM merkle_nodes WHERE level = 8", ()))[0][0] == 1
    # the owner prunes through entry 302 and signs it, as `overt ledger prune` does
    as_owner: Any = open_ledger(_as(url, owner))
    record = run(as_owner.prune(cutoff))
    assert record.through_seq == 302
    signer.checkpoint(as_owner, prune=record)
    as_owner.close_sync()
    add_turns(ledger, 100, prefix="after")
    assert run(Checkpointer(ledger, signer.key, settings).tick()) is not None
    tiles = run(ledger.select("SELECT first_leaf FROM merkle_nodes WHERE level = 8 "
                              "ORDER BY 1", ()))
    # 256..511 recomputed by the owner's function from its leaves 302.. and, for the
    # leaves the prune removed, from the subtrees the prune stored for them
    assert [r[0] for r in tiles] == [0, 256]
    stand_ins = run(ledger.select("SELECT level, first_leaf FROM merkle_nodes "
                                  "WHERE first_leaf >= 256 AND level < 8 ORDER BY 2", ()))
    assert [tuple(r) for r in stand_ins] == [(5, 256), (3, 288), (2, 296), (1, 300)]
    ledger.close_sync()
    assert main(["--db", _as(url, owner), "ledger", "verify", "--checkpoints",
                 str(signer.witness), "--key", str(signer.public_path)]) == 0


def test_overt_serve_as_the_writer_answers_and_signs_checkpoints(
    roles: tuple[str, str, str], tmp_path: Path
) -> None:
    import signal
    import subprocess
    import sys
    import time

    import httpx2 as httpx

    from tests.channels.helpers import free_port
    from tests.web.conftest import cli_env

    url, owner, writer = roles
    (tmp_path / "replies.jsonl").write_text('{"text": "signed as the writer"}\n')
    (tmp_path / "overt.toml").write_text(
        f'[checkpoints]\nprivate_key = "{tmp_path / "keys" / "ledger.key"}"\n'
        f'witness_dir = "{tmp_path / "witness"}"\nevery_entries = 1\nevery_seconds = 0.2\n')
    env = {**cli_env(tmp_path / "unused.db"), "OVERT_DB": _as(url, writer)}
    cli = [sys.executable, "-m", "overt.cli"]
    subprocess.run([*cli, "ledger", "keygen"], env=env, cwd=tmp_path, check=True,
                   capture_output=True)
    token = subprocess.run([*cli, "serve", "--add-token", "operator:ops"], env=env,
                           cwd=tmp_path, capture_output=True, text=True,
                           check=True).stdout.strip()
    port = free_port()
    server = subprocess.Popen([*cli, "serve", "--port", str(port), "--no-mcp", "--model",
                               f"scripted:{tmp_path / 'replies.jsonl'}"], env=env, cwd=tmp_path)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):  # the server is up when /healthz answers
            try:
                httpx.get(f"{base}/healthz", timeout=1)
                break
            except httpx.HTTPError:
                time.sleep(0.05)
        answer = httpx.post(f"{base}/v1/messages", json={"text": "sign me"},
                            headers={"Authorization": f"Bearer {token}"}, timeout=30).json()
        deadline = time.monotonic() + 60
        while not list((tmp_path / "witness").glob("*.checkpoint")) \
                and time.monotonic() < deadline:
            time.sleep(0.2)  # the server signs on its own task
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=30)
        finally:
            if server.poll() is None:
                server.kill()
    assert answer["text"] == "signed as the writer"
    assert list((tmp_path / "witness").glob("*.checkpoint"))
    assert main(["--db", _as(url, owner), "ledger", "verify", "--checkpoints",
                 str(tmp_path / "witness"), "--key",
                 str(tmp_path / "keys" / "ledger.key.pub")]) == 0


def _privileges(url: str) -> list[tuple[Any, ...]]:
    """Who owns what in the ledger's schema and who may do what to it."""
    with _superuser(url) as conn:
        return [tuple(r) for r in conn.execute(
            "SELECT 'schema', nspname, nspowner::regrole::text, nspacl::text FROM pg_namespace "
            "WHERE oid = current_schema()::regnamespace "
            "UNION ALL SELECT 'relation', relname, relowner::regrole::text, relacl::text "
            "FROM pg_class WHERE relnamespace = current_schema()::regnamespace "
            "UNION ALL SELECT 'function', proname, proowner::regrole::text, proacl::text "
            "FROM pg_proc WHERE pronamespace = current_schema()::regnamespace "
            "UNION ALL SELECT 'default', defaclobjtype::text, defaclrole::regrole::text, "
            "defaclacl::text FROM pg_default_acl "
            "WHERE defaclnamespace = current_schema()::regnamespace ORDER BY 1, 2").fetchall()]


def test_setup_roles_run_twice_changes_nothing(roles: tuple[str, str, str]) -> None:
    url, owner, writer = roles
    before = _privileges(url)
    again = setup_roles(url, owner, writer)
    assert not any(s.startswith("CREATE ROLE") for s in again)
    assert _privileges(url) == before
    assert setup_roles(url, owner, writer) == again


def test_grants_beyond_the_writers_are_revoked_by_running_setup_roles_again(
    roles: tuple[str, str, str]
) -> None:
    """Grants made by hand beyond what setup-roles gives the writer (SELECT and INSERT
    on every table, and on every table the owner creates later; EXECUTE on the owner's
    prune and trigger functions): running it again revokes them."""
    import psycopg

    url, owner, writer = roles
    with _superuser(url) as conn:
        conn.execute(f'GRANT SELECT, INSERT ON ALL TABLES IN SCHEMA "{_schema(url)}" '
                     f'TO "{writer}"')
        conn.execute(f'GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA "{_schema(url)}" '
                     f'TO "{writer}"')
        conn.execute(f'ALTER DEFAULT PRIVILEGES FOR ROLE "{owner}" IN SCHEMA '
                     f'"{_schema(url)}" GRANT SELECT, INSERT ON TABLES TO "{writer}"')
        conn.execute('GRANT EXECUTE ON FUNCTION overt_prune(bigint), '
                     'overt_trail_index() TO PUBLIC')
    _writer_sql(url, writer, "BEGIN; INSERT INTO merkle_nodes VALUES (8, 0, 'planted'); "
                             "ROLLBACK")  # those grants let a tile be planted
    setup_roles(url, owner, writer)
    for table in ("merkle_nodes", "overt_migrations", "trail_index", "memory_nodes"):
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            _writer_sql(url, writer, f"INSERT INTO {table} DEFAULT VALUES")
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        _writer_sql(url, writer, "SELECT overt_prune(1)")
    # a table the owner creates later: the writer reads it, nothing more
    _owner_sql(url, owner, "CREATE TABLE later (x integer)")
    _writer_sql(url, writer, "SELECT * FROM later")
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        _writer_sql(url, writer, "INSERT INTO later VALUES (1)")


def _schema(url: str) -> str:
    from overt.ledger.pg_url import parse_url

    return parse_url(url)[1]


def _owner_sql(url: str, owner: str, statement: str) -> None:
    _writer_sql(url, owner, statement)


def test_ledgers_of_one_database_set_up_their_roles_at_once(tmp_path: Path) -> None:
    """Each setup grants its roles the schema pg_trgm lives in, shared by every ledger of
    the database: setups running together take turns instead of failing."""
    import threading

    backends.require_pg()
    urls = [backends.new_url("postgres", tmp_path / str(i)) for i in range(4)]
    failed: list[str] = []

    def set_up(url: str) -> None:
        suffix = new_ulid().lower()[-10:]
        try:
            setup_roles(url, f"overt_owner_{suffix}", f"overt_writer_{suffix}")
        except LedgerError as exc:
            failed.append(str(exc))

    try:
        for url in urls:
            open_ledger(url).close_sync()  # type: ignore[attr-defined]
        threads = [threading.Thread(target=set_up, args=(url,)) for url in urls]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert failed == []
    finally:
        for url in urls:
            backends.drop(url)
