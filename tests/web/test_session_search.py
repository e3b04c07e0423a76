"""The Sessions page searches the text of every message and answer a viewer may
read, on both backends, and no text at all for a viewer that may not read bodies."""

from __future__ import annotations

import re

import pytest

from overt.ledger.base import Ledger
from overt.web.pages import sessions as sessions_page
from tests.conftest import run
from tests.web.conftest import AUDITOR, CLIENT, OPERATOR
from tests.web.test_auth import log_in
from tests.web.test_pages import ask, setup


def listed(html: str) -> list[str]:
    return re.findall(r'<a href="/sessions/([^"]+)">', html)


def test_a_word_from_a_later_message_or_an_answer_finds_the_session(ledger: Ledger) -> None:
    async def main() -> tuple[str, str]:
        rt, c = setup(ledger)
        async with c:
            await ask(rt, "a plain opening", "http:found", "operator:alice")
            await ask(rt, "then the pelican question", "http:found", "operator:alice")
            await ask(rt, "unrelated", "http:other", "operator:alice")
            await log_in(c, OPERATOR)
            by_message = (await c.get("/sessions?q=PELICAN")).text
            by_answer = (await c.get("/sessions?q=re:+then+the")).text
            return by_message, by_answer
    by_message, by_answer = run(main())
    assert listed(by_message) == ["http%3Afound"] and "a plain opening" in by_message
    assert listed(by_answer) == ["http%3Afound"]


def test_a_viewer_may_not_search_the_text_of_sessions_it_cannot_reach(ledger: Ledger) -> None:
    async def main() -> str:
        rt, c = setup(ledger)
        async with c:
            await ask(rt, "alice's heron plan", "http:alices", "operator:alice")
            await ask(rt, "my heron notes", "http:clients", "mcp_client:claude-code")
            await log_in(c, CLIENT)  # trail.read, but only its own sessions
            return (await c.get("/sessions?q=heron")).text
    assert listed(run(main())) == ["http%3Aclients"]


def test_a_viewer_without_content_rights_gets_no_text_search_and_is_told(
        ledger: Ledger) -> None:
    async def main() -> tuple[str, str]:
        rt, c = setup(ledger)
        async with c:
            await ask(rt, "the osprey secret", "http:secret", "operator:alice")
            await ask(rt, "nothing here", "http:plain", "operator:alice")
            await log_in(c, AUDITOR)
            return (await c.get("/sessions?q=osprey")).text, \
                (await c.get("/sessions?q=absent-word")).text
    matching, absent = run(main())
    assert listed(matching) == listed(absent) == ["http%3Aplain", "http%3Asecret"]
    assert "osprey" not in matching and 'name="q"' not in matching
    assert "needs <code>trail.read</code>" in matching and "was not searched" in matching


def test_a_search_that_matches_more_than_the_page_lists_says_so(
        ledger: Ledger, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sessions_page, "LISTED", 2)

    async def main() -> tuple[str, str]:
        rt, c = setup(ledger)
        async with c:
            for n in range(3):
                await ask(rt, f"kestrel {n}", f"http:k{n}", "operator:alice")
            await log_in(c, OPERATOR)
            return (await c.get("/sessions?q=kestrel")).text, \
                (await c.get("/sessions?q=kestrel+2")).text
    cut, whole = run(main())
    assert listed(cut) == ["http%3Ak2", "http%3Ak1"] and "more match" in cut
    assert listed(whole) == ["http%3Ak2"] and "more match" not in whole
