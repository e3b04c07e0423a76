"""What an id is (:func:`overt.ids.id_problem`), and the Python API refusing one that
is not with :class:`UsageError`, before anything is recorded."""

from __future__ import annotations

import pytest

from overt.errors import UsageError
from overt.ids import MAX_ID_CHARS, checked_id, id_problem, new_ulid
from overt.models.fake import ScriptedModel
from overt.policy.actors import Actor
from tests.conftest import RuntimeFactory, cli_message, run

LONE = "s\udcff"


@pytest.mark.parametrize("good", ["cli:01K0000000000000000000000A", "C123:1700000000.000100",
                                  "email:<a.b@example.org>", "http:é-ü", "x" * MAX_ID_CHARS])
def test_ids_channels_make_are_ids(good: str) -> None:
    assert id_problem(good) is None


@pytest.mark.parametrize(("bad", "says"), [
    ("", "cannot be empty"), (LONE, "valid UTF-8"), ("a\x00", "no NUL"),
    ("a\tb", "no control characters"), ("x" * (MAX_ID_CHARS + 1), "at most 1024"),
    (42, "is text")])
def test_what_is_not_an_id_is_said(bad: object, says: str) -> None:
    problem = id_problem(bad)
    assert problem is not None and says in problem


def test_overts_own_ids_are_letters_digits_underscore_and_dash() -> None:
    assert id_problem(new_ulid(), token=True) is None
    assert id_problem("t5", token=True) is None
    assert "letters, digits" in (id_problem("../etc", token=True) or "")


def test_a_channel_id_is_held_only_to_what_storing_it_needs() -> None:
    assert id_problem("a\tb" + "x" * 5000, typed=False) is None
    assert id_problem(LONE, typed=False) is not None
    with pytest.raises(UsageError, match=r"bad session id 's\\udcff'"):
        checked_id(LONE, "session", typed=False)


def test_an_actor_named_with_a_lone_surrogate_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="valid UTF-8"):
        Actor("operator", "al\udcffce")


def test_respond_refuses_a_session_id_that_cannot_be_stored_and_records_nothing(
        make_runtime: RuntimeFactory) -> None:
    runtime = make_runtime(ScriptedModel(["never sent"]))
    for session in (LONE, "s\x00"):
        with pytest.raises(UsageError, match="bad session id"):
            run(runtime.respond(cli_message(), session_id=session))
    with pytest.raises(UsageError, match="bad session id"):
        run(runtime.respond(cli_message(session=LONE)))  # the caller's session, derived
    assert run(runtime.ledger.entries(kinds=["turn.started"])) == []


def test_approve_deny_and_call_tool_refuse_ids_that_cannot_be_stored(
        make_runtime: RuntimeFactory) -> None:
    runtime = make_runtime(ScriptedModel([]))
    with pytest.raises(UsageError, match="bad approval request id"):
        run(runtime.approve(LONE))
    with pytest.raises(UsageError, match="bad approval request id"):
        run(runtime.deny("r\x00", reason="no"))
    with pytest.raises(UsageError, match="bad caller session id"):
        run(runtime.call_tool("get_usage", {}, caller_session_id=LONE))
