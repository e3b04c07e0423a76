"""The parts a request names are evidence: a prune keeps them, verify checks them.

A request body names parts stored once, with the commit that first needed them (the
system prompt, the tool schemas, the messages of earlier turns), so a request of a
kept turn can name a part stored in a range a prune removes. The forgeries come first:
deleting such a part, and pruning without carrying it, must each fail ``verify``.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest

from overt.clock import now_iso
from overt.engine.request_body import expand
from overt.events import InferenceRecorded
from overt.ledger import request_parts, retention
from overt.ledger.request_parts import BODY, CHAIN, LEAF, PACKED_CHAIN, TOOLS, Walk, links
from overt.models.fake import FunctionModel
from overt.tools.base import tool
from overt.types import ModelRequest
from tests.backends import Raw
from tests.conftest import RuntimeFactory, cli_message, run
from tests.ledger.test_roles import roles  # noqa: F401 (a fixture)


@tool(read_only=True)
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def answers(request: ModelRequest) -> str:
    return "an answer long enough to be kept by digest rather than inline, " * 2


def inferences(ledger: Any) -> list[tuple[InferenceRecorded, int]]:
    return [(e.event(InferenceRecorded), e.seq)
            for e in run(ledger.entries(kinds=["inference"]))]


def read_back(ledger: Any, event: InferenceRecorded, seq: int) -> dict[str, Any]:
    assert event.request_digest is not None
    body = run(ledger.content(event.request_digest, seq=seq))
    assert body is not None

    async def go() -> dict[str, Any]:
        return await expand(body, ledger.content)
    return run(go())


def session_across_a_cutoff(make_runtime: RuntimeFactory, later: str = "s"
                            ) -> tuple[Any, FunctionModel, str]:
    """Two turns in one process, a cutoff between them, the first of session ``s``, the
    second of session ``later``: the second turn's request names the system prompt and
    the tool schemas (and, in the same session, the first turn's messages), all stored
    with the first turn."""
    model = FunctionModel(answers)
    runtime = make_runtime(model, tools=[lookup])
    first = "the first question, long enough to be stored apart from its chain part " * 2
    assert run(runtime.respond(cli_message(first, session="s"))).error is None
    time.sleep(0.01)
    cutoff = now_iso()
    time.sleep(0.01)
    assert run(runtime.respond(cli_message("the second question", session=later))).error is None
    return runtime, model, cutoff


def body_of(raw: Raw, digest: str) -> str:
    (body,), *_ = raw.query(f"SELECT body FROM content_blobs WHERE digest = '{digest}'")
    return bytes(body).decode() if not isinstance(body, str) else str(body)


def shared_part(raw: Raw, model: FunctionModel, which: str) -> str:
    """The digest of one part the second request names that the first turn stored."""
    for (digest,) in raw.query("SELECT digest FROM content_blobs ORDER BY seq"):
        body = body_of(raw, str(digest))
        if ((which == "system" and body == model.requests[0].messages[0].content)
                or (which == "tools" and body.startswith('["sha256:'))
                or (which == "schema" and body.startswith('{"description":"Look'))
                or (which == "chain" and body.startswith('{"m":{"content":"sha256:')
                    and '"role":"user"' in body)):
            return str(digest)
    raise AssertionError(f"no {which} part")


@pytest.mark.parametrize("which", ["system", "tools", "schema", "chain"])
def test_deleting_a_part_a_kept_request_names_fails_verify(
    make_runtime: RuntimeFactory, ledger: Any, raw: Raw, which: str
) -> None:
    """A part the second request names, stored with the first turn, deleted alone (the
    entries untouched): the request can no longer be read back as sent, and verify
    says so at the first inference whose request names it."""
    _, model, _ = session_across_a_cutoff(make_runtime)
    assert run(ledger.verify()).ok
    digest = shared_part(raw, model, which)
    raw.drop_guards().execute(f"DELETE FROM content_blobs WHERE digest = '{digest}'")
    report = run(ledger.verify())
    assert not report.ok
    assert digest in (report.problem or "") and "request" in (report.problem or "")
    assert report.bad_seq == inferences(ledger)[0][1]


def test_a_prune_keeps_every_part_a_kept_request_names(
    make_runtime: RuntimeFactory, ledger: Any, raw: Raw
) -> None:
    """The first turn pruned, the second turn's request still reads back exactly as it
    was sent, and the ledger verifies; a second prune carries the parts again."""
    _, model, cutoff = session_across_a_cutoff(make_runtime)
    sent = model.requests[-1]
    record = run(ledger.prune(cutoff))
    assert record.removed_entries
    report = run(ledger.verify())
    assert report.ok, report.problem
    (event, seq), = inferences(ledger)
    request = read_back(ledger, event, seq)
    assert request["system"] == sent.messages[0].content
    assert [m["content"] for m in request["messages"]] == [m.content for m in sent.messages]
    assert [t["name"] for t in request["tools"]] == ["lookup"]
    carried = {str(r[0]) for r in raw.query(
        f"SELECT digest FROM content_blobs WHERE seq = {record.through_seq + 1}")}
    assert len(carried) >= 4  # the system prompt, the tool list and schema, the chain...

    time.sleep(0.01)
    again = now_iso()
    time.sleep(0.01)
    run(make_runtime(model, tools=[lookup]).respond(cli_message("a third", session="s")))
    assert run(ledger.prune(again)).removed_entries
    report = run(ledger.verify())
    assert report.ok, report.problem
    event, seq = inferences(ledger)[-1]
    assert len(read_back(ledger, event, seq)["messages"]) == len(model.requests[-1].messages)


def test_a_prune_that_does_not_carry_the_parts_fails_verify(
    make_runtime: RuntimeFactory, ledger: Any, raw: Raw, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The forgery's shape: a prune that deletes the parts kept requests name (what a
    prune did before it carried them) leaves a ledger that fails verify, at the kept
    inference."""
    _, _, cutoff = session_across_a_cutoff(make_runtime)
    monkeypatch.setattr(request_parts, "carry_parts", lambda *args: 0)
    assert run(ledger.prune(cutoff)).removed_entries
    report = run(ledger.verify())
    (_, seq), = inferences(ledger)
    assert not report.ok and report.bad_seq == seq
    assert "request" in (report.problem or "")


def test_a_request_committed_while_the_prune_searched_has_its_parts_carried(
    make_runtime: RuntimeFactory, ledger: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A prune looks for the parts to carry in a snapshot, before it holds the write
    lock, so appends go on meanwhile. A turn committed then, continuing a session
    whose turns all lie before the cutoff, names parts no kept request named when
    the snapshot was taken (that session's chain): the prune carries them too, and
    the request reads back whole."""
    runtime, model, cutoff = session_across_a_cutoff(make_runtime, later="new")
    searched = retention.search_carry

    async def prune() -> Any:
        loop = asyncio.get_running_loop()

        def search_then_a_turn(*args: Any) -> Any:
            found = searched(*args)
            asyncio.run_coroutine_threadsafe(runtime.respond(cli_message(
                "the old session goes on", session="s")), loop).result(timeout=60)
            return found

        monkeypatch.setattr(retention, "search_carry", search_then_a_turn)
        return await ledger.prune(cutoff)

    assert run(prune()).removed_entries
    report = run(ledger.verify())
    assert report.ok, report.problem
    event, seq = inferences(ledger)[-1]
    assert len(read_back(ledger, event, seq)["messages"]) == len(model.requests[-1].messages)


def test_links_follow_each_kind_of_part_and_ignore_what_is_not_one() -> None:
    body = json.dumps({"v": 1, "messages": "sha256:m", "tools": "sha256:t",
                       "sent": {"system": {"$part": "sha256:s"},
                                "messages": {"$part": "sha256:c", "chain": 2},
                                "tools": [{"$json": "sha256:j"}], "n": 3}})
    assert sorted(links(BODY, body)) == sorted([
        (CHAIN, "sha256:m"), (TOOLS, "sha256:t"), (LEAF, "sha256:s"),
        (PACKED_CHAIN, "sha256:c"), (LEAF, "sha256:j")])
    assert links(CHAIN, json.dumps({"m": {"role": "user", "content": "sha256:x"},
                                    "p": "sha256:y"})) == [(CHAIN, "sha256:y"),
                                                           (LEAF, "sha256:x")]
    assert links(CHAIN, json.dumps({"m": {"role": "user", "text": "hi"}})) == []
    assert links(PACKED_CHAIN, json.dumps({"m": {"content": {"$part": "sha256:z"}},
                                           "p": "sha256:w"})) == [(PACKED_CHAIN, "sha256:w"),
                                                                  (LEAF, "sha256:z")]
    assert links(TOOLS, json.dumps(["sha256:a", 3, None])) == [(LEAF, "sha256:a")]
    for kind in (BODY, CHAIN, PACKED_CHAIN, TOOLS):
        for text in ("not json", "[1, 2", "null", "7", '"a string"', "{}", "[]"):
            assert isinstance(links(kind, text), list)
    assert links(LEAF, body) == []


def test_a_part_passed_before_it_was_wanted_is_read_by_digest() -> None:
    """A part stored twice, its newer copy before what names it in the pass: the walk
    reads it by digest at the end and follows it, so what it names is checked too."""
    chain_b = json.dumps({"m": {"role": "user", "content": "sha256:leaf"}})
    body = json.dumps({"v": 1, "messages": "sha256:b"})
    rows = [(9, "sha256:b", chain_b), (5, "sha256:req", body), (5, "sha256:b", chain_b)]
    walk = Walk([(7, "sha256:req")])
    for group in request_parts.by_commit(rows[:2]):
        walk.commit(group)
    assert "sha256:b" in walk.wanted and "sha256:leaf" not in walk.wanted
    present = {"sha256:b", "sha256:req"}
    walk.finish(present, lambda digests: {d: chain_b for d in digests if d == "sha256:b"})
    assert walk.missing(present) == [(7, "sha256:leaf")]


def _forged_turn(name: str, request: str) -> tuple[list[Any], dict[str, str]]:
    """A turn whose one inference names ``request`` (stored with it) as sent."""
    from overt.events import TurnCompleted, TurnStarted
    from overt.ledger.canonical import digest_text

    message, reply = f"message of {name}", f"reply of {name}"
    events = [
        TurnStarted(turn_id=name, session_id="S", source="cli", caller_session_id="cli:S",
                    message_digest=digest_text(message), model="m", route="default",
                    max_tool_calls=5, actor="operator:default"),
        InferenceRecorded(turn_id=name, session_id="S", inference_id=f"{name}-1", iteration=0,
                          model="m", route="default", input_tokens=1, output_tokens=1,
                          cost_usd=0.0, duration_ms=1.0, tools_offered=[],
                          tool_calls_requested=0, stop_reason="end_turn",
                          response_digest=digest_text(reply),
                          request_digest=digest_text(request)),
        TurnCompleted(turn_id=name, session_id="S", status="completed",
                      reply_digest=digest_text(reply), tools_used=[], tool_calls=0,
                      model_calls=1, input_tokens=1, output_tokens=1, cost_usd=0.0,
                      duration_ms=1.0)]
    return events, {digest_text(body): body for body in (message, reply, request)}


@pytest.mark.postgres
@pytest.mark.parametrize("names", ["chain", "tools", "packed"])
def test_a_request_naming_a_part_never_stored_appended_as_the_writer_role_fails_verify(
    roles: tuple[str, str, str], names: str  # noqa: F811 (the fixture imported above)
) -> None:
    """The application's own role (INSERT on the chain, nothing else) appends a turn
    whose request, stored beside it, names a part nobody stored: a request that can
    never be read back as sent (what the model was shown is unknowable). Verify, run
    by the owner, fails at that inference and names the part."""
    from overt.ledger import open_ledger
    from overt.ledger.canonical import canonical_json, digest_text
    from tests.ledger.test_roles import _as

    url, _owner, writer = roles
    missing = digest_text(f"a {names} part nobody stored")
    request: dict[str, Any] = {"v": 1, "messages": None}
    if names == "chain":
        request["messages"] = missing
    elif names == "tools":
        request["tools"] = missing
    else:
        request["sent"] = {"messages": {"$part": missing, "chain": 1}}
    as_writer = open_ledger(_as(url, writer))
    try:
        run(as_writer.record(*_forged_turn("forged", canonical_json(request))))
    finally:
        as_writer.close_sync()
    owner = open_ledger(url)
    try:
        report = run(owner.verify())
        (_, seq), = inferences(owner)
    finally:
        owner.close_sync()
    assert not report.ok and report.bad_seq == seq, report
    assert missing in (report.problem or "")

