"""``overt trail`` and ``overt export --as ACTOR``: an actor reads only its own sessions,
and another's is refused exactly as a missing one, on the record (both backends)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from overt.cli.main import main
from overt.ledger.base import Ledger
from overt.policy.actors import Actor
from overt.types import IncomingMessage
from tests.channels.helpers import echo_model, make_runtime
from tests.conftest import run

CLAUDE = Actor("mcp_client", "claude-code")


def sessions(ledger: Ledger, tmp_path: Path) -> dict[str, tuple[str, str]]:
    """(session id, turn id) of one session of mcp_client:claude-code and one of the
    operator's."""
    rt = make_runtime(ledger, tmp_path, echo_model())

    async def ask(who: Actor, text: str) -> tuple[str, str]:
        result = await rt.respond(IncomingMessage("mcp", text, {}), actor=who,
                                  session_id=f"mcp:{who.name}")
        return result.session_id, result.turn_id
    return {"claude": run(ask(CLAUDE, "mine")),
            "operator": run(ask(Actor.operator(), "the operator's"))}


def overt(url: str, *argv: str) -> int:
    return main(["--db", url, *argv])


def test_another_actors_session_or_turn_is_refused_as_a_missing_one_and_recorded(
        ledger: Ledger, ledger_url: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    made = sessions(ledger, tmp_path)
    session, turn = made["operator"]
    answers = []
    for argv in (("trail", session), ("trail", "no-such-session"),
                 ("export", session), ("export", turn), ("export", "no-such-id")):
        code = overt(ledger_url, *argv, "--as", str(CLAUDE))
        answers.append((argv[0], code, capsys.readouterr()))
    assert [(cmd, code, out.out, out.err) for cmd, code, out in answers] == [
        ("trail", 4, "", "overt: no such session\n"),
        ("trail", 4, "", "overt: no such session\n"),
        ("export", 4, "", "overt: no such turn or session\n"),
        ("export", 4, "", "overt: no such turn or session\n"),
        ("export", 4, "", "overt: no such turn or session\n")]
    refused = [e.data for e in run(ledger.entries(kinds=["capability.checked"]))]
    assert [(r["actor"], r["granted"], r["reason_code"]) for r in refused] == [
        (str(CLAUDE), False, why) for why in
        ("not_owner", "not_found", "not_owner", "not_owner", "not_found")]
    assert all(session not in r["subject"] and r["subject"].startswith("cli:")
               for r in refused)


def test_an_actor_reads_its_own_and_the_operator_reads_every_session(
        ledger: Ledger, ledger_url: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    made = sessions(ledger, tmp_path)
    assert overt(ledger_url, "trail", made["claude"][0], "--as", str(CLAUDE)) == 0
    assert "asked: mine" in capsys.readouterr().out
    assert overt(ledger_url, "export", made["claude"][1], "--as", str(CLAUDE)) == 0
    capsys.readouterr()
    assert overt(ledger_url, "trail", "--since", "2000-01-01", "--json",
                 "--as", str(CLAUDE)) == 0
    window = json.loads(capsys.readouterr().out)
    assert [t["session_id"] for t in window["turns"]] == [made["claude"][0]]
    assert overt(ledger_url, "trail", "--since", "2000-01-01", "--json") == 0  # the operator
    everyone = json.loads(capsys.readouterr().out)
    assert {t["session_id"] for t in everyone["turns"]} == {made["claude"][0],
                                                            made["operator"][0]}
    assert overt(ledger_url, "export", made["claude"][0]) == 0


def test_an_actor_that_is_not_kind_name_is_a_usage_error(
        ledger: Ledger, ledger_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:  # refused as the command line is read
        overt(ledger_url, "trail", "s", "--as", "robot:x")
    assert exited.value.code == 2
    assert "unknown actor kind" in capsys.readouterr().err
