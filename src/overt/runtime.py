"""The composition root: wires a model, tools, the ledger and a transcript into a runtime.

Only this module (and the entry points) choose concrete pieces; the engine
speaks to protocols.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Coroutine, Iterable, Sequence
from typing import Any, TypeVar

from overt import __version__
from overt.channels.transcript import Transcript, transcript_line
from overt.clock import now_iso
from overt.config import Config
from overt.engine.loop import Engine, EngineSettings
from overt.events import RuntimeStarted
from overt.ledger import open_ledger
from overt.ledger.base import Ledger
from overt.models.base import Model
from overt.models.resolve import Progress, resolve_model
from overt.prompts import load_template, render
from overt.tools.base import Tool
from overt.tools.builtin import builtin_tools
from overt.tools.registry import ToolRegistry
from overt.types import IncomingMessage, Message, ResponseResult

log = logging.getLogger("overt.runtime")
T = TypeVar("T")


class Runtime:
    """An agent runtime: answers messages with a model and tools, on the record."""

    def __init__(self, *, model: Model, ledger: Ledger, tools: Iterable[Tool] | None = None,
                 settings: EngineSettings | None = None, transcript: Transcript | None = None,
                 system_prompt_template: str | None = None) -> None:
        self.model = model
        self.ledger = ledger
        self.tools = ToolRegistry(builtin_tools() if tools is None else tools)
        self.settings = settings or EngineSettings()
        self.transcript = transcript
        self.started_at = now_iso()
        template = system_prompt_template if system_prompt_template is not None \
            else load_template(None)
        self.engine = Engine(
            model, self.tools, ledger,
            system_prompt=render(template, self.tools.specs(), self.settings.max_tool_calls),
            settings=self.settings, runtime_started_at=self.started_at)
        self._started = False

    @classmethod
    def from_config(cls, config: Config, *, model: Model | None = None,
                    tools: Iterable[Tool] | None = None,
                    progress: Progress | None = None) -> Runtime:
        """Compose a runtime from ``config``.

        Raises:
            UsageError, LedgerError, ModelError: a piece cannot be built.
        """
        chosen = model or resolve_model(config.model, cache_dir=config.cache_dir,
                                        progress=progress)
        ledger = open_ledger(config.db)
        path = config.transcript_path
        return cls(
            model=chosen, ledger=ledger, tools=tools,
            settings=EngineSettings(
                max_tool_calls=config.max_tool_calls,
                max_consecutive_tool_errors=config.max_consecutive_tool_errors,
                tool_timeout_s=config.tool_timeout_s, route=config.route),
            transcript=Transcript(path) if path else None,
            system_prompt_template=load_template(config.system_prompt))

    async def start(self) -> None:
        """Record that this runtime started (once)."""
        if self._started:
            return
        self._started = True
        await self.ledger.record([RuntimeStarted(
            overt_version=__version__, pid=os.getpid(), host=socket.gethostname(),
            model=self.model.name)])

    async def respond(self, message: IncomingMessage, *, session_id: str | None = None,
                      history: Sequence[Message] = ()) -> ResponseResult:
        """Answer ``message``; the turn is recorded and the reply goes to the transcript."""
        await self.start()
        outcome = await self.engine.run_turn(message, session_id=session_id, history=history)
        result = outcome.result
        if self.transcript is not None:
            try:
                self.transcript.append(transcript_line(
                    result, source=message.source,
                    caller_session_id=message.caller_session_id, model=self.model.name))
            except OSError as exc:  # the ledger has the turn; a lost transcript line is logged
                log.error("transcript line for turn %s not written: %s", result.turn_id, exc)
        return result

    async def close(self) -> None:
        await self.ledger.close()
        if self.transcript is not None:
            self.transcript.close()
        closer = getattr(self.model, "close", None)
        if closer is not None:
            closer()


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine from synchronous code (scripts, the CLI)."""
    return asyncio.run(coro)
