"""``Runtime.preload``: the default model's weights load (and its prompt's prefix warms)
on a worker thread, at once."""

from __future__ import annotations

import asyncio
import logging
import threading
from pathlib import Path

import pytest

from overt.ledger import open_ledger
from overt.models.fake import ScriptedModel
from overt.runtime import Runtime
from overt.tools.base import tool
from overt.types import ModelRequest, ModelResponse, Usage


class Weighty:
    """A model with weights: ``warm`` waits until the test lets it finish."""

    name = "weighty"

    def __init__(self, fail: bool = False) -> None:
        self.release = threading.Event()
        self.loaded_on: str | None = None
        self.fail = fail

    def warm(self, request: ModelRequest) -> None:
        self.release.wait(5)
        self.loaded_on = threading.current_thread().name
        if self.fail:
            raise RuntimeError("the weights are damaged")

    async def complete(self, request: ModelRequest) -> ModelResponse:
        return ModelResponse("hi", (), Usage(1, 1), self.name)


def test_preload_returns_at_once_and_loads_on_a_worker_thread(tmp_path: Path) -> None:
    model = Weighty()
    runtime = Runtime(model=model, ledger=open_ledger(str(tmp_path / "l.db")))

    async def go() -> None:
        future = runtime.preload()
        assert future is not None and not future.done()  # returned before the load ended
        model.release.set()
        await future
        await runtime.close()
    asyncio.run(go())
    assert model.loaded_on is not None and model.loaded_on != threading.main_thread().name


def test_a_model_without_weights_has_nothing_to_preload(tmp_path: Path) -> None:
    runtime = Runtime(model=ScriptedModel([]), ledger=open_ledger(str(tmp_path / "l.db")))

    async def go() -> None:
        assert runtime.preload() is None
        await runtime.close()
    asyncio.run(go())


def test_a_failed_preload_is_logged_not_raised(tmp_path: Path,
                                              caplog: pytest.LogCaptureFixture) -> None:
    model = Weighty(fail=True)
    model.release.set()
    runtime = Runtime(model=model, ledger=open_ledger(str(tmp_path / "l.db")))

    async def go() -> None:
        future = runtime.preload()
        assert future is not None
        await asyncio.wait([future])
        await asyncio.sleep(0)  # the done callback runs
        await runtime.close()
    with caplog.at_level(logging.WARNING, logger="overt.runtime"):
        asyncio.run(go())
    assert "preloading weighty failed: the weights are damaged" in caplog.text


class Warming(Weighty):
    """A model that warms what every request begins with."""

    def __init__(self) -> None:
        super().__init__()
        self.release.set()
        self.warmed: list[ModelRequest] = []

    def warm(self, request: ModelRequest) -> None:
        super().warm(request)
        self.warmed.append(request)


def test_preload_warms_a_model_with_the_system_prompt_and_tools_every_request_begins_with(
        tmp_path: Path) -> None:
    model = Warming()

    @tool(read_only=True)
    async def lookup(key: str) -> str:
        """Look a key up."""
        return key

    runtime = Runtime(model=model, ledger=open_ledger(str(tmp_path / "l.db")), tools=[lookup])

    async def go() -> None:
        future = runtime.preload()
        assert future is not None
        await future
        await runtime.close()
    asyncio.run(go())
    [request] = model.warmed
    assert [m.role for m in request.messages] == ["system"]
    assert request.messages[0].content == runtime.engine.system_prompt
    assert [t.name for t in request.tools] == ["lookup"]
