"""Shared fixtures: real ledgers on both backends, a runtime factory driven by fake models.

Every test that takes ``ledger`` (or ``make_runtime``, ``raw``) runs once on a
SQLite file and once on a fresh PostgreSQL schema (dropped afterwards). Outside
CI, the PostgreSQL half is skipped when no server answers; in CI it fails.

What a test needs beyond Python is a marker, set here from the fixtures it takes
(or by its module): ``postgres`` (a PostgreSQL server: the ``backend`` fixture's
PostgreSQL half, ``pg_url``, a private cluster), ``browser`` (Debian's chromium:
``chromium``), ``email`` (a Dovecot IMAP server: ``dovecot``) and ``real_model``
(the embedded model's weights). A test that takes more than about a second
(processes, servers, big ledgers) is marked ``slow`` where it is defined.
``make check`` runs the tests that need none of these and are not slow; ``make test``
runs them all. A missing need skips outside CI and fails in CI: tests/needs.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from overt.channels.transcript import Transcript
from overt.engine.values import EngineSettings
from overt.ledger import open_ledger
from overt.ledger.base import Ledger
from overt.models.base import Model
from overt.policy.engine import Policy
from overt.policy.gate import Gate
from overt.policy.rules import Rule
from overt.runtime import Runtime
from overt.tools.base import Tool
from overt.types import IncomingMessage
from tests import backends, pg_cluster
from tests.pg_cluster import Cluster

_NEEDS = {"pg_url": "postgres", "private_pg": "postgres", "chromium": "browser",
          "dovecot": "email"}
"""The fixtures that need a service, and the marker each gives a test that takes it."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec is not None and callspec.params.get("backend") == "postgres":
            item.add_marker(pytest.mark.postgres)
        for fixture in getattr(item, "fixturenames", ()):
            if fixture in _NEEDS:
                item.add_marker(_NEEDS[fixture])


@pytest.fixture(params=backends.BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    if name == "postgres":
        backends.require_pg()
    return name


@pytest.fixture
def pg_url(tmp_path: Path) -> Iterator[str]:
    """A fresh PostgreSQL schema's ledger URL (dropped afterwards), for a test of
    PostgreSQL alone."""
    backends.require_pg()
    url = backends.new_url("postgres", tmp_path)
    yield url
    backends.drop(url)


@pytest.fixture
def private_pg() -> Iterator[Cluster]:
    """A PostgreSQL cluster of the test's own, to stop and start (skipped, saying why,
    where one cannot be made; failed in CI)."""
    with pg_cluster.private_cluster_or_skip() as made:
        yield made


@pytest.fixture
def ledger_url(backend: str, tmp_path: Path) -> Iterator[str]:
    url = backends.new_url(backend, tmp_path)
    yield url
    if backend == "postgres":
        backends.drop(url)


@pytest.fixture
def ledger(ledger_url: str) -> Iterator[Any]:
    opened = open_ledger(ledger_url)
    yield opened
    opened.close_sync()  # type: ignore[attr-defined]


@pytest.fixture
def raw(ledger: Ledger, ledger_url: str) -> Iterator[backends.Raw]:
    conn = backends.Raw(ledger_url, ledger)
    yield conn
    conn.close()


RuntimeFactory = Callable[..., Runtime]


@pytest.fixture
def make_runtime(ledger: Ledger, tmp_path: Path) -> RuntimeFactory:
    """``make(model, tools, gate=None, allowed_tools=None, **settings)``: a runtime on the
    test's ledger (``allowed_tools``: offer only these, as a route's ``tools`` does).

    Without ``gate`` the policy lets every tool run (:data:`ALLOW_ALL`): tests of the
    loop, hooks and ledger are not about approvals. tests/policy use real gates.
    """
    def make(model: Model, tools: Iterable[Tool] | None = None, *, gate: Gate | None = None,
             allowed_tools: Collection[str] | None = None, **settings: Any) -> Runtime:
        return Runtime(model=model, ledger=ledger, tools=tools,
                       settings=EngineSettings(**settings),
                       transcript=Transcript(tmp_path / "transcript.jsonl"),
                       gate=gate or ALLOW_ALL, allowed_tools=allowed_tools)
    return make


def latest(url: str) -> list[int]:
    """Every migration version of the backend ``url`` names, in order."""
    from overt.ledger.schema import postgres as pg_schema
    from overt.ledger.schema import sqlite as sqlite_schema

    migrations = pg_schema.MIGRATIONS if url.startswith("postgresql") else sqlite_schema.MIGRATIONS
    return [version for version, *_ in migrations]

BUILTIN_TOOLS = ["get_operational_state", "get_usage", "node_create", "node_read", "node_search",
                 "node_supersede", "link_create", "link_retract", "node_neighbors",
                 "node_history"]
"""The tools overt's built-in plugin registers, in order."""

ALLOW_ALL = Gate(Policy([Rule("tests.allow_all", "allow", "tests_allow_all",
                             "tests that are not about policy let every tool run")]))
"""A gate whose policy allows every call (capabilities are still checked)."""


def cli_message(text: str = "hello", session: str = "s1") -> IncomingMessage:
    return IncomingMessage("cli", text, {"session_id": session})


def run(coro: Any) -> Any:
    return asyncio.run(coro)
