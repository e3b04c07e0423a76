"""Shared fixtures: a real ledger file, a runtime factory driven by fake models."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from overt.channels.transcript import Transcript
from overt.engine.loop import EngineSettings
from overt.ledger.sqlite import SqliteLedger
from overt.models.base import Model
from overt.runtime import Runtime
from overt.tools.base import Tool
from overt.types import IncomingMessage


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "ledger.db"


@pytest.fixture
def ledger(db_path: Path) -> Iterator[SqliteLedger]:
    opened = SqliteLedger.open(db_path)
    yield opened
    opened.close_sync()


RuntimeFactory = Callable[..., Runtime]


@pytest.fixture
def make_runtime(ledger: SqliteLedger, tmp_path: Path) -> RuntimeFactory:
    def make(model: Model, tools: Iterable[Tool] | None = None, **settings: Any) -> Runtime:
        return Runtime(model=model, ledger=ledger, tools=tools,
                       settings=EngineSettings(**settings),
                       transcript=Transcript(tmp_path / "transcript.jsonl"))
    return make


def cli_message(text: str = "hello", session: str = "s1") -> IncomingMessage:
    return IncomingMessage("cli", text, {"session_id": session})


def run(coro: Any) -> Any:
    return asyncio.run(coro)
