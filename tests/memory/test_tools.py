"""Each memory tool: its happy path and each error envelope, on both backends."""

from __future__ import annotations

from typing import Any

from overt.memory.tools import MAX_LIMIT, TITLE_MAX
from tests.conftest import run
from tests.memory.helpers import call, code, context, create

OTHERS = {"agent:*": ["memory.read", "memory.write", "memory.read_cross_actor"]}


def checks(ledger: Any) -> list[tuple[str, bool]]:
    return [(e.data["capability"], e.data["granted"])
            for e in run(ledger.entries(kinds=["capability.checked"]))]


def test_node_create_stores_a_typed_node_and_records_it(ledger: Any) -> None:
    answer = call(context(ledger), "node_create", kind="Decision", title=" Use WAL ",
                  body="SQLite in WAL mode.")
    assert answer["ok"] is True
    node = answer["node"]
    assert (node["kind"], node["title"], node["actor"], node["revision"]) == (
        "Decision", "Use WAL", "agent:default", 1)
    assert node["supersedes"] is None and node["root_id"] == node["id"]
    [event] = run(ledger.entries(kinds=["node.created"]))
    assert event.data["node_id"] == node["id"] and event.data["tool_call_id"] == "call-1"


def test_node_create_answers_invalid_input_with_envelopes(ledger: Any) -> None:
    ctx = context(ledger)
    unknown = call(ctx, "node_create", kind="Memo", title="t", body="b")
    assert code(unknown) == "unknown_kind" and "Note" in unknown["error"]["known"]
    missing = call(ctx, "node_create", kind="Note", body="b")
    assert code(missing) == "missing_field" and missing["error"]["fields"] == ["title"]
    assert code(call(ctx, "node_create", kind="Note", title="  ", body="")) == "missing_field"
    assert code(call(ctx, "node_create", kind="Note", title="x" * (TITLE_MAX + 1),
                     body="b")) == "too_long"
    assert run(ledger.entries(kinds=["node.created"])) == []


def test_node_read_returns_the_current_revision_and_says_when_the_id_was_superseded(
    ledger: Any
) -> None:
    ctx = context(ledger)
    first = create(ctx, "Concept", "Ledger", "v1")
    assert call(ctx, "node_read", id=first["id"]) == {
        "ok": True, "node": first, "requested_id": first["id"], "current_id": first["id"],
        "superseded": False}
    second = call(ctx, "node_supersede", id=first["id"], body="v2")["node"]
    read = call(ctx, "node_read", id=first["id"])
    assert read["superseded"] is True and read["current_id"] == second["id"]
    assert read["node"]["body"] == "v2" and read["requested_id"] == first["id"]
    assert code(call(ctx, "node_read", id="01NOPE")) == "not_found"
    assert code(call(ctx, "node_read")) == "missing_field"


def test_node_search_ranks_filters_and_caps_the_limit(ledger: Any) -> None:
    ctx = context(ledger)
    create(ctx, "Decision", "Cache eviction policy", "LRU cache eviction.")
    create(ctx, "Note", "Cache warmup", "Warm it before deploys.")
    create(ctx, "Note", "Lunch", "Pizza.")
    found = call(ctx, "node_search", query="cache eviction")
    assert [r["title"] for r in found["results"]] == ["Cache eviction policy", "Cache warmup"]
    assert found["count"] == 2 and found["scope"] == "own"
    assert found["results"][0]["score"] > found["results"][1]["score"]
    notes = call(ctx, "node_search", query="cache", kind="Note")
    assert [r["title"] for r in notes["results"]] == ["Cache warmup"]
    capped = call(ctx, "node_search", query="cache", limit=500)
    assert capped["limit_capped"] is True and capped["limit"] == MAX_LIMIT
    assert code(call(ctx, "node_search", limit=0)) == "invalid_argument"
    assert code(call(ctx, "node_search", kind="Memo")) == "unknown_kind"
    assert code(call(ctx, "node_search", scope="everyone")) == "invalid_argument"


def test_a_snake_case_query_that_finds_nothing_is_searched_as_its_words(ledger: Any) -> None:
    ctx = context(ledger)
    create(ctx, "Ticket", "PICK-12 invoice rounding bug", "Totals round twice.")
    create(ctx, "Note", "node_search tips", "Give it key words.")
    found = call(ctx, "node_search", query="invoice_rounding_ticket")
    assert [r["title"] for r in found["results"]] == ["PICK-12 invoice rounding bug"]
    assert found["searched"] == "invoice rounding ticket"
    key = call(ctx, "node_search", query="node_search")  # found as written: no fallback
    assert [r["title"] for r in key["results"]] == ["node_search tips"]
    assert "searched" not in key


def test_node_search_body_is_shortened_in_results(ledger: Any) -> None:
    ctx = context(ledger)
    create(ctx, "Note", "Long one", "word " * 200)
    [result] = call(ctx, "node_search", query="long")["results"]
    assert result["body_truncated"] is True and len(result["body"]) < 400


def test_searching_across_actors_needs_the_capability_and_the_check_is_recorded(
    ledger: Any
) -> None:
    create(context(ledger, "agent:other"), "Note", "Cache notes", "from another agent")
    mine = context(ledger)
    assert call(mine, "node_search", query="cache")["results"] == []
    denied = call(mine, "node_search", query="cache", scope="all")
    assert code(denied) == "capability_missing"
    assert denied["error"]["capability"] == "memory.read_cross_actor"
    allowed = call(context(ledger, grants=OTHERS), "node_search", query="cache", scope="all")
    assert [r["actor"] for r in allowed["results"]] == ["agent:other"]
    assert checks(ledger) == [("memory.read_cross_actor", False),
                              ("memory.read_cross_actor", True)]


def test_reading_another_actors_node_needs_the_capability(ledger: Any) -> None:
    theirs = create(context(ledger, "agent:other"))
    assert code(call(context(ledger), "node_read", id=theirs["id"])) == "capability_missing"
    assert code(call(context(ledger), "node_history", id=theirs["id"])) == "capability_missing"
    assert call(context(ledger, grants=OTHERS), "node_read", id=theirs["id"])["ok"] is True
    assert checks(ledger)[-1] == ("memory.read_cross_actor", True)


def test_writing_without_memory_write_is_refused_and_recorded(ledger: Any) -> None:
    reader = context(ledger, grants={"agent:*": ["memory.read"]})
    denied = call(reader, "node_create", kind="Note", title="t", body="b")
    assert code(denied) == "capability_missing" and denied["error"]["capability"] == "memory.write"
    [entry] = run(ledger.entries(kinds=["capability.checked"]))
    assert entry.data["granted"] is False and entry.data["actor"] == "agent:default"
    assert entry.data["reason_code"] == "capability_missing"
    assert run(ledger.entries(kinds=["node.created"])) == []
    node = create(context(ledger))
    assert code(call(reader, "node_supersede", id=node["id"], body="x")) == "capability_missing"


def test_node_supersede_inherits_the_kind_and_records_the_revision(ledger: Any) -> None:
    ctx = context(ledger)
    first = create(ctx, "Gotcha", "Timeouts", "v1")
    answer = call(ctx, "node_supersede", id=first["id"], title="Timeouts (30 s)")
    node = answer["node"]
    assert answer["superseded_id"] == first["id"]
    assert (node["kind"], node["title"], node["body"], node["revision"], node["supersedes"]) == (
        "Gotcha", "Timeouts (30 s)", "v1", 2, first["id"])
    [event] = run(ledger.entries(kinds=["node.superseded"]))
    assert event.data["node_id"] == node["id"] and event.data["supersedes"] == first["id"]


def test_node_supersede_answers_invalid_input_with_envelopes(ledger: Any) -> None:
    ctx = context(ledger)
    first = create(ctx)
    second = call(ctx, "node_supersede", id=first["id"], body="v2")["node"]
    stale = call(ctx, "node_supersede", id=first["id"], body="v3")
    assert code(stale) == "superseded" and stale["error"]["current_id"] == second["id"]
    assert code(call(ctx, "node_supersede", id=second["id"])) == "missing_field"
    assert code(call(ctx, "node_supersede", id="01NOPE", body="x")) == "not_found"


def test_a_supersede_chain_of_three_reads_back_in_order_through_node_history(
    ledger: Any
) -> None:
    ctx = context(ledger)
    first = create(ctx, "Decision", "DB", "SQLite")
    second = call(ctx, "node_supersede", id=first["id"], body="PostgreSQL")["node"]
    third = call(ctx, "node_supersede", id=second["id"], body="Both")["node"]
    history = call(ctx, "node_history", id=second["id"])
    assert [r["id"] for r in history["revisions"]] == [first["id"], second["id"], third["id"]]
    assert [r["body"] for r in history["revisions"]] == ["SQLite", "PostgreSQL", "Both"]
    assert history["current_id"] == third["id"] and history["root_id"] == first["id"]
    assert code(call(ctx, "node_history", id="01NOPE")) == "not_found"


def test_link_create_joins_nodes_the_rules_allow(ledger: Any) -> None:
    ctx = context(ledger)
    decision = create(ctx, "Decision", "Use WAL", "b")
    component = create(ctx, "Component", "Ledger", "b")
    answer = call(ctx, "link_create", kind="applies_to", from_id=decision["id"],
                  to_id=component["id"])
    assert answer["ok"] is True and answer["existing"] is False
    assert (answer["link"]["from_id"], answer["link"]["to_id"]) == (decision["id"],
                                                                   component["id"])
    again = call(ctx, "link_create", kind="applies_to", from_id=decision["id"],
                 to_id=component["id"])
    assert again["existing"] is True and again["link"]["id"] == answer["link"]["id"]
    assert len(run(ledger.entries(kinds=["link.created"]))) == 1


def test_link_create_answers_invalid_input_with_envelopes(ledger: Any) -> None:
    ctx = context(ledger)
    test = create(ctx, "AcceptanceTest", "t", "b")
    note = create(ctx, "Note", "n", "b")
    unknown = call(ctx, "link_create", kind="loves", from_id=test["id"], to_id=note["id"])
    assert code(unknown) == "unknown_link_kind" and "verifies" in unknown["error"]["known"]
    refused = call(ctx, "link_create", kind="verifies", from_id=test["id"], to_id=note["id"])
    assert code(refused) == "link_not_allowed"
    assert "Ticket" in refused["error"]["allowed_targets"]
    dangling = call(ctx, "link_create", kind="relates_to", from_id=test["id"], to_id="01NOPE")
    assert code(dangling) == "not_found" and dangling["error"]["id"] == "01NOPE"
    assert code(call(ctx, "link_create", kind="relates_to", from_id=test["id"])) == (
        "missing_field")
    assert code(call(ctx, "link_create", kind="relates_to", from_id=test["id"],
                     to_id=test["id"])) == "invalid_argument"
    assert run(ledger.entries(kinds=["link.created"])) == []


def test_node_neighbors_lists_links_in_and_out_to_depth_two(ledger: Any) -> None:
    ctx = context(ledger)
    project = create(ctx, "Project", "overt", "b")
    component = create(ctx, "Component", "ledger", "b")
    decision = create(ctx, "Decision", "WAL", "b")
    call(ctx, "link_create", kind="part_of", from_id=component["id"], to_id=project["id"])
    call(ctx, "link_create", kind="applies_to", from_id=decision["id"], to_id=component["id"])
    near = call(ctx, "node_neighbors", id=component["id"])
    assert sorted((li["kind"], li["direction"]) for li in near["links"]) == [
        ("applies_to", "in"), ("part_of", "out")]
    assert {n["title"] for n in near["nodes"]} == {"overt", "WAL"}
    far = call(ctx, "node_neighbors", id=project["id"], depth=2)
    assert [(n["title"], n["hops"]) for n in far["nodes"]] == [("ledger", 1), ("WAL", 2)]
    assert code(call(ctx, "node_neighbors", id=project["id"], depth=3)) == "invalid_argument"
    assert code(call(ctx, "node_neighbors", id="01NOPE")) == "not_found"


def test_node_neighbors_shows_the_current_revision_and_leaves_out_retracted_links(
    ledger: Any
) -> None:
    ctx = context(ledger)
    a = create(ctx, "Ticket", "a", "b")
    b = create(ctx, "Ticket", "b", "v1")
    link = call(ctx, "link_create", kind="blocks", from_id=a["id"], to_id=b["id"])["link"]
    call(ctx, "node_supersede", id=b["id"], body="v2")
    [node] = call(ctx, "node_neighbors", id=a["id"])["nodes"]
    assert node["body"] == "v2" and node["revision"] == 2
    assert call(ctx, "link_retract", id=link["id"])["ok"] is True
    assert call(ctx, "node_neighbors", id=a["id"])["links"] == []
    assert code(call(ctx, "link_retract", id=link["id"])) == "already_retracted"
    assert code(call(ctx, "link_retract", id="01NOPE")) == "not_found"
    assert [e.kind for e in run(ledger.entries(kinds=["link.retracted"]))] == ["link.retracted"]


def test_node_neighbors_hides_other_actors_nodes_without_the_capability(ledger: Any) -> None:
    mine, theirs = context(ledger), context(ledger, "agent:other", grants=OTHERS)
    ticket = create(mine, "Ticket", "mine", "b")
    other = create(theirs, "Ticket", "theirs", "b")
    call(theirs, "link_create", kind="blocks", from_id=other["id"], to_id=ticket["id"])
    near = call(mine, "node_neighbors", id=ticket["id"])
    assert near["nodes"] == [] and near["links"] == [] and near["hidden"] == 1
    shown = call(context(ledger, grants=OTHERS), "node_neighbors", id=ticket["id"])
    assert [n["title"] for n in shown["nodes"]] == ["theirs"] and shown["hidden"] == 0


def test_text_no_backend_can_store_is_an_envelope_on_both_backends(ledger: Any) -> None:
    """NUL (PostgreSQL refuses it: the lookup or write failed as a LedgerError, while
    SQLite stored it) or an unpaired surrogate (no UTF-8 holds it): the same
    invalid_argument envelope on both backends, nothing written."""
    ctx = context(ledger)
    node = create(ctx, "Note", "kept", "a body")
    answers = {
        "create title": call(ctx, "node_create", kind="Note", title="t\x00", body="b"),
        "create body": call(ctx, "node_create", kind="Note", title="t", body="b\ud800"),
        "supersede": call(ctx, "node_supersede", id=node["id"], body="new\x00"),
        "read": call(ctx, "node_read", id="a\x00b"),
        "history": call(ctx, "node_history", id="\x00"),
        "neighbors": call(ctx, "node_neighbors", id="\x00"),
        "link": call(ctx, "link_create", kind="relates_to", from_id=node["id"], to_id="\x00"),
        "retract": call(ctx, "link_retract", id="\x00"),
    }
    assert {name: code(a) for name, a in answers.items()} == dict.fromkeys(
        answers, "invalid_argument")
    assert answers["create title"]["error"]["fields"] == ["title"]
    assert len(run(ledger.entries(kinds=["node.created"]))) == 1
    assert run(ledger.entries(kinds=["node.superseded", "link.created"])) == []
    assert run(ledger.verify()).ok
