"""The composition root: wires a model, tools, plugins, the ledger and a transcript.

Only this module (and the entry points) choose concrete pieces; the engine
speaks to protocols.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import weakref
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Collection,
    Coroutine,
    Iterable,
    Mapping,
    Sequence,
)
from typing import TYPE_CHECKING, Any, TypeVar

from overt.channels.transcript import Transcript, transcript_line
from overt.clock import iso_after, now_iso
from overt.config import Config, routing
from overt.engine.answer_stream import AnswerSink
from overt.engine.budget import Budget, BudgetGuard
from overt.engine.direct import DirectResult, run_direct
from overt.engine.liveness import gone
from overt.engine.loop import Engine
from overt.engine.resume import Resumed, load_checkpoint, resume_request, take_up_interrupted
from overt.engine.values import EngineSettings
from overt.errors import ApprovalError, LedgerConflict, ModelUnavailable, UsageError
from overt.events import ApprovalDecision, Event, HookError, RuntimeStarted
from overt.hooks.manager import PluginHost
from overt.ids import checked_id
from overt.ledger import open_ledger
from overt.ledger.base import Ledger
from overt.ledger.canonical import digest_text
from overt.models.base import Model, Warms
from overt.models.options import ModelOptions, Progress
from overt.models.pricing import PriceTable
from overt.models.resolve import ModelCatalog
from overt.policy.actors import Actor
from overt.policy.approvals import EXPIRY_ACTOR, ApprovalBook, ApprovalRequest
from overt.policy.capabilities import Capabilities
from overt.policy.engine import Policy
from overt.policy.gate import Gate
from overt.policy.lint import dead_rules
from overt.prompts import load_template, permissions, render
from overt.sessions.book import HistoryReader
from overt.sessions.window import counter_for, window_of
from overt.tools.base import Tool
from overt.tools.mcp_toolset import McpServerSpec, McpSessions, load_toolset
from overt.tools.registry import ToolRegistry

if TYPE_CHECKING:
    from overt.replay import TurnReplay
from overt.types import IncomingMessage, Message, ModelRequest, ResponseResult, ToolSpec
from overt.version import __version__

log = logging.getLogger("overt.runtime")
T = TypeVar("T")


class Runtime:
    """An agent runtime: answers messages with a model and tools, on the record."""

    def __init__(self, *, model: Model, ledger: Ledger, tools: Iterable[Tool] | None = None,
                 settings: EngineSettings | None = None, transcript: Transcript | None = None,
                 system_prompt_template: str | None = None,
                 plugins: PluginHost | None = None, models: ModelCatalog | None = None,
                 prices: PriceTable | None = None, budget: Budget | None = None,
                 allowed_tools: Collection[str] | None = None, gate: Gate | None = None,
                 operator: Actor | None = None,
                 mcp_servers: Sequence[McpServerSpec] = ()) -> None:
        """``tools``: the tools to offer besides the plugins' (``None``: overt's built-in
        tools, through its built-in plugin). ``plugins``: the registered plugins
        (``None``: the built-in plugin alone when ``tools`` is None, else none).
        ``models``: where a ``Reissue`` finds the model it names (``None``: the
        plugins' models and providers). The plugins' tools and hooks are taken
        here, once: a plugin registered on the host later is not seen.
        ``allowed_tools``: offer only these (a route's ``tools``; None: all).
        ``gate``: capabilities and policy (None: the defaults, which ask before any
        mutating tool). ``operator``: who decides approvals from this runtime.
        ``mcp_servers``: MCP servers whose tools join the registry when the runtime
        starts (:mod:`overt.tools.mcp_toolset`).

        Raises:
            UsageError: two tools share a name, or ``allowed_tools`` names a tool
                that is not registered.
        """
        self.model = model
        self.ledger = ledger
        self.plugins = plugins if plugins is not None else (
            PluginHost.builtin_only() if tools is None else PluginHost())
        self.tools = ToolRegistry(tools or ())
        self.plugins.add_tools(self.tools)
        if allowed_tools is not None:
            self.tools = _only(self.tools, allowed_tools)
        self.models = models if models is not None else ModelCatalog(self.plugins.models())
        self.settings = settings or EngineSettings()
        self.transcript = transcript
        self.started_at = now_iso()
        template = system_prompt_template if system_prompt_template is not None \
            else load_template(None)
        max_calls = self.settings.max_tool_calls
        self._mcp_servers = list(mcp_servers)
        self.mcp = McpSessions(self.ledger.record)
        """One client session per MCP server, for this runtime's lifetime."""
        self.prices = prices or PriceTable()
        self.gate = gate or Gate()
        self.operator = operator or Actor.operator()

        def system_prompt_for(specs: tuple[ToolSpec, ...], source: str = "cli") -> str:
            # what the prompt says the agent may do is the gate's word on each tool,
            # for a message from this source
            allowed = permissions(self.gate, self.tools,
                                  actor=Actor.agent(self.settings.agent),
                                  route=self.settings.route, source=source)
            return render(template, specs, max_calls, allowed)

        self._system_prompt_for = system_prompt_for
        self.approvals = ApprovalBook(ledger, self.gate.capabilities)
        self._listeners: list[Callable[[Resumed], Awaitable[object]]] = []
        self._turn_locks: weakref.WeakValueDictionary[str, asyncio.Lock] = (
            weakref.WeakValueDictionary())
        self._taking_up: set[asyncio.Task[Resumed | None]] = set()
        self.engine = Engine(
            model, self.tools, ledger, system_prompt=system_prompt_for(self.tools.specs()),
            settings=self.settings, runtime_started_at=self.started_at,
            hooks=self.plugins.hooks, models=self._model, system_prompt_for=system_prompt_for,
            prices=self.prices,
            budget=None if budget is None or budget.empty else BudgetGuard(budget, ledger,
                                                                           self.prices),
            gate=self.gate)
        self._started = False
        self._history_reader: HistoryReader | None = None

    def _histories(self) -> HistoryReader:
        """Session histories, read back from the ledger (what is new only, once read)."""
        if self._history_reader is None:
            self._history_reader = HistoryReader(self.ledger)
        return self._history_reader

    def _model(self, spec: str) -> Model:
        return self.model if spec == self.model.name else self.models.get(spec)

    @classmethod
    def from_config(cls, config: Config, *, model: Model | None = None,
                    tools: Iterable[Tool] | None = None,
                    progress: Progress | None = None) -> Runtime:
        """Compose a runtime from ``config``: its plugins, then its model, ledger and tools.

        Raises:
            UsageError, LedgerError, ModelError: a piece cannot be built.
            PluginError: an enabled plugin is not installed or cannot be loaded.
        """
        plugins = PluginHost.load(
            config.plugins_enabled, config.plugins_disabled, config.plugin_files,
            timeouts={"pre_tool_call": config.pre_tool_call_timeout_s}, memory=config.memory)
        catalog = ModelCatalog(plugins.models(), options=ModelOptions(
            cache_dir=config.cache_dir, progress=progress, provider_settings=config.providers))
        routing.add_aliases(config, catalog)
        chosen = model or routing.route_model(config, catalog)
        routing.add_router(config, plugins, chosen)
        route = config.active_route
        ledger = open_ledger(config.db, read_only=config.read_only,
                             create=config.create_ledger)
        path = config.transcript_path
        return cls(
            model=chosen, ledger=ledger, tools=tools if tools is not None else (),
            settings=EngineSettings(
                max_tool_calls=config.max_tool_calls,
                max_tool_calls_per_turn=config.max_tool_calls_per_turn,
                max_consecutive_tool_errors=config.max_consecutive_tool_errors,
                tool_timeout_s=config.tool_timeout_s, route=config.route,
                max_tool_result_chars=config.max_tool_result_chars,
                agent=config.agent, model_spec=None if model is not None else config.model),
            transcript=Transcript(path) if path else None,
            system_prompt_template=load_template(config.system_prompt), plugins=plugins,
            models=catalog, prices=PriceTable(config.prices), budget=config.effective_budget,
            allowed_tools=route.tools if route is not None else None,
            gate=Gate(Policy(config.policy.rules, defaults=config.policy.defaults),
                      Capabilities(config.capabilities),
                      approval_ttl_s=config.policy.approval_ttl_s),
            operator=Actor.operator(config.operator), mcp_servers=config.mcp_servers)

    async def start(self) -> None:
        """Record that this runtime started (once), with any plugin that failed to register."""
        if self._started:
            return
        self._started = True
        events: list[Event] = [RuntimeStarted(
            overt_version=__version__, pid=os.getpid(), host=socket.gethostname(),
            model=self.model.name)]
        events.extend(self.plugins.problems)
        contents = dict(self.plugins.problem_contents)
        for spec in self._mcp_servers:
            await self._add_mcp_tools(spec, events, contents)
        for line in dead_rules(self.gate.policy.rules, self.tools.specs()):
            log.warning("%s", line)
        await self.ledger.record(events, contents)

    def preload(self) -> asyncio.Future[None] | None:
        """Start loading the default model's weights on a worker thread, when it has
        any (the embedded model), and preparing what every request begins with
        (its system turn's KV state: a read from disk, or after a change of prompt or
        tools a prefill), so that the first answer of ``overt chat`` or
        ``overt serve`` does not wait for them; None when there is nothing to load.
        Returns at once. A failure is logged here, and the first request meets the
        same error from the model."""
        model = self.model
        if not isinstance(model, Warms):
            return None
        request = ModelRequest((Message("system", self.engine.system_prompt),),
                               self.tools.specs())
        future = asyncio.get_running_loop().run_in_executor(None, model.warm, request)

        def report(done: asyncio.Future[None]) -> None:
            if not done.cancelled() and (exc := done.exception()) is not None:
                log.warning("preloading %s failed: %s", model.name, exc)
        future.add_done_callback(report)
        return future

    async def _add_mcp_tools(self, spec: McpServerSpec, events: list[Event],
                             contents: dict[str, str]) -> None:
        """Register a server's tools; a server that cannot be reached is recorded
        (``hook.error``, consequence ``no_tools``) and the runtime goes on without it."""
        try:
            tools = await load_toolset(spec, self.mcp.connection(spec))
            taken = [t.name for t in tools if t.name in self.tools]
            if taken:  # checked first: the record says none of its tools, and none is
                raise UsageError(f"tool names already registered: {', '.join(taken)}")
            for tool in tools:
                self.tools.register(tool)
        except Exception as exc:  # noqa: BLE001  any failure of a server: recorded, skipped
            log.error("MCP server %s: no tools: %s: %s", spec.name, type(exc).__name__, exc)
            message = f"{type(exc).__name__}: {exc}"
            digest = digest_text(message)
            contents[digest] = message
            events.append(HookError(plugin=f"mcp:{spec.name}", hook="register_tools",
                                    error_type=type(exc).__name__, consequence="no_tools",
                                    error_digest=digest))
            return
        self.engine.system_prompt = self._system_prompt_for(self.tools.specs())
        self.engine.source_prompts.clear()

    async def respond(self, message: IncomingMessage, *, session_id: str | None = None,
                      history: Sequence[Message] | None = None, actor: Actor | None = None,
                      channel_ids: Mapping[str, Any] | None = None,
                      on_answer: AnswerSink | None = None) -> ResponseResult:
        """Answer ``message`` in session ``session_id`` (default: the message's
        ``caller_session_id``); the turn is recorded and the reply goes to the
        transcript (with ``channel_ids``, the channel's own ids: Slack channel and
        thread, email Message-ID).

        The session's earlier turns are read back from the ledger and sent before the
        message, the newest that fit the model's window (``history`` given instead:
        exactly those messages, nothing read: ``()`` for a session just made).
        ``actor`` sent the message (default: this runtime's operator); a session is
        owned by its first turn's actor. A session's turns run one at a time in this
        process: a call for a session whose turn is under way waits for that turn to
        end, then reads it back with the rest of the history.
        Whether ``actor`` may continue the session is the channel's to check first
        (:mod:`overt.sessions.access`).

        ``on_answer`` gets the answer as it is generated, as
        :class:`~overt.engine.answer_stream.AnswerDelta` and ``AnswerReset`` events:
        once the turn is over, the deltas since the last reset are the returned
        ``text`` (see :mod:`overt.engine.answer_stream`). The record is the same
        with or without it.

        Raises:
            UsageError: the session id is not one (:func:`overt.ids.id_problem`).
            LedgerError: the session's history could not be read (nothing was run).
        """
        session = checked_id(session_id or message.caller_session_id, "session",
                             typed=False)
        await self.start()
        sender = actor or self.operator
        async with self._session_turn(session):
            model = self.engine.model  # the newest turns its window can hold
            earlier = [] if history is not None else await self._histories().history(
                session, tokens=window_of(model), count=counter_for(model))
            outcome = await self.engine.run_turn(message, session_id=session,
                                                 history=history or (), earlier=earlier,
                                                 actor=sender, on_answer=on_answer)
        result = outcome.result
        if self.transcript is not None:
            self._transcribe(result, message.source, message.caller_session_id, channel_ids)
        return result

    def _session_turn(self, session_id: str) -> asyncio.Lock:
        """The lock a turn of ``session_id`` holds from reading its history to its end,
        so that a message sent while the session's last one is answered waits for it and
        reads its exchange (in this process; each session's lock lives while a turn
        holds or awaits it)."""
        lock = self._turn_locks.get(session_id)
        if lock is None:
            lock = self._turn_locks[session_id] = asyncio.Lock()
        return lock

    def _transcribe(self, result: ResponseResult, source: str, caller_session_id: str,
                    channel_ids: Mapping[str, Any] | None = None) -> None:
        assert self.transcript is not None
        try:
            self.transcript.append(transcript_line(
                result, source=source, caller_session_id=caller_session_id,
                model=self.model.name, channel_ids=channel_ids))
        except OSError as exc:  # the ledger has the turn; a lost transcript line is logged
            log.error("transcript line for turn %s not written: %s", result.turn_id, exc)

    # -- approvals ----------------------------------------------------------

    async def approve(self, request_id: str, *, by: Actor | None = None,
                      reason: str | None = None) -> Resumed:
        """Approve a pending request and take up what it held: the paused turn
        continues (the held call runs once) and its answer is returned; a held
        call outside a turn runs once and its result is returned.

        A request past its expiry is recorded ``expired`` instead, and the turn
        answers without the call: check ``.request.status``.

        Raises:
            UsageError: ``request_id`` is not an id (:func:`overt.ids.id_problem`).
            NotFoundError: no such request.
            ApprovalError: already decided, or ``by`` may not decide approvals.
        """
        return await self._decide(request_id, "approved", by, reason)

    async def deny(self, request_id: str, *, by: Actor | None = None,
                   reason: str | None = None) -> Resumed:
        """Deny a pending request; the paused turn answers without the call.

        Raises:
            UsageError: ``request_id`` is not an id (:func:`overt.ids.id_problem`).
            NotFoundError: no such request.
            ApprovalError: already decided, or ``by`` may not decide approvals.
        """
        return await self._decide(request_id, "denied", by, reason)

    async def _decide(self, request_id: str, decision: ApprovalDecision, by: Actor | None,
                      reason: str | None) -> Resumed:
        checked_id(request_id, "approval request", typed=False)
        await self.start()
        actor = by or self.operator
        request = await self.approvals.decide(request_id, decision, by=actor, reason=reason)
        return await self._take_up(request, actor, reason) or Resumed(request)

    async def decide_soon(self, request_id: str, decision: ApprovalDecision, *,
                          by: Actor | None = None, reason: str | None = None,
                          ) -> tuple[ApprovalRequest, asyncio.Task[Resumed | None]]:
        """Record the decision (``approved`` or ``denied``) and return it at once,
        with the task taking up what the request held: the paused turn answers in
        the background and is announced as :meth:`approve` announces it (the web
        cockpit's Approve, which must not wait for a slow model). Should this
        process stop first, the decision stands and :meth:`resume_decided` takes
        the turn up. :meth:`close` waits for the tasks still running.

        Raises:
            UsageError: ``decision`` is neither, or ``request_id`` is not an id.
            NotFoundError: no such request.
            ApprovalError: already decided, or ``by`` may not decide approvals.
            LedgerIntegrityError: the paused turn's checkpoint is missing, or holds
                another call than the request (refused on the record; not decided).
        """
        if decision not in ("approved", "denied"):
            raise UsageError(f"decide approved or denied, not {decision!r}")
        checked_id(request_id, "approval request", typed=False)
        await self.start()
        actor = by or self.operator
        pending = await self.approvals.get(request_id)
        if (pending.status == "pending" and pending.turn_id is not None
                and self.gate.capabilities.check(actor, "approvals.decide").granted):
            # what approve would find broken only after deciding is refused before:
            # nobody waits on the take-up to hear it, and the request stays pending
            await load_checkpoint(self.engine, pending)
        request = await self.approvals.decide(request_id, decision, by=actor, reason=reason)

        async def take_up() -> Resumed | None:
            try:
                return await self._take_up(request, actor, reason) or Resumed(request)
            except Exception as exc:  # noqa: BLE001  nobody awaits it: logged, and the
                # decision stands for resume_decided to take up again
                log.error("taking up request %s after its decision failed: %s: %s",
                          request_id, type(exc).__name__, exc)
                return None

        task = asyncio.get_running_loop().create_task(take_up(),
                                                      name=f"overt-take-up-{request_id}")
        self._taking_up.add(task)
        task.add_done_callback(self._taking_up.discard)
        return request, task

    async def expire_due(self, *, answer: bool = True) -> list[Resumed]:
        """Record every pending request past its expiry as ``expired``, and (unless
        ``answer`` is false) let each paused turn answer without its call; turns not
        answered here are taken up by :meth:`resume_pending`."""
        await self.start()
        done = []
        for request in await self.approvals.list(["pending"]):
            if request.overdue():
                try:
                    decided = await self.approvals.decide(request.request_id, "expired",
                                                          by=EXPIRY_ACTOR)
                except ApprovalError as exc:  # decided meanwhile by someone else: theirs stands
                    log.info("not expiring %s: %s", request.request_id, exc)
                    continue
                resumed = await self._take_up(decided, EXPIRY_ACTOR, None) if answer else None
                done.append(resumed or Resumed(decided))
        return done

    async def resume_pending(self, *, interrupted: bool = True) -> list[Resumed]:
        """Take up every decided request nobody took up (its process died between
        the decision and the resumption), and every approved call whose tool started
        and recorded no result (see :func:`take_up_interrupted`: an idempotent tool
        runs again, any other is held for the operator). Safe to run in every
        process at once.

        A call whose process died looks the same on the record as one another
        process is running now. With ``interrupted`` false (``overt serve`` as it
        starts, beside other workers) only calls whose process is known to be gone
        are taken up: it ran on this host and has ended
        (:func:`overt.engine.liveness.gone`); the others are the operator's
        (``overt approvals resume``)."""
        await self.start()
        done = []
        for request in await self.approvals.list(["approved", "denied", "expired"]):
            if request.interrupted:  # its tool started and never recorded a result
                if not interrupted and (request.taken_up_by is None
                                        or not gone(*request.taken_up_by)):
                    log.info("interrupted call of request %s left to the operator: its "
                             "process may still be running it", request.request_id)
                    continue
                try:
                    done.append(await take_up_interrupted(self.engine, request,
                                                          by=self.operator))
                except LedgerConflict:
                    log.info("interrupted call of request %s taken up elsewhere",
                             request.request_id)
                continue
            if not request.resumed:
                reason = await self.approvals.reason(request)
                resumed = await self._take_up(request, self.operator, reason)
                if resumed is not None:
                    done.append(resumed)
        return done

    async def resume_decided(self, *, settled_s: float = 30.0) -> list[Resumed]:
        """Take up every request decided more than ``settled_s`` ago that nobody took
        up: the process that decided it stopped (or lost its ledger) before its
        resumption was committed. ``overt serve`` runs this about once a minute
        (:data:`overt.channels.http.TAKE_UP_EVERY_S`); ``settled_s`` leaves a decision
        just made to the process making it (were both to try, the resumption is a
        claim: one of them runs it). Reads the approval kinds alone."""
        await self.start()
        done = []
        for request in await self.approvals.untaken(decided_before=iso_after(-settled_s)):
            reason = await self.approvals.reason(request)
            resumed = await self._take_up(request, self.operator, reason)
            if resumed is not None:
                done.append(resumed)
        return done

    async def _take_up(self, request: ApprovalRequest, actor: Actor,
                       reason: str | None) -> Resumed | None:
        """Resume what ``request`` held here, transcribed and announced; ``None`` when
        another process took it up first (its answer is on the record)."""
        try:
            async with self._session_turn(request.session_id or request.request_id):
                resumed = await resume_request(self.engine, request, by=actor, reason=reason)
        except ModelUnavailable as exc:  # recorded as decided; the right process answers
            log.warning("request %s: %s", request.request_id, exc)
            return Resumed(request, handed_back=str(exc))
        except LedgerConflict:
            return None
        if resumed.result is not None and self.transcript is not None:
            self._transcribe(resumed.result, request.source, request.session_id or "")
        await self._announce(resumed)
        return resumed

    def on_resumed(self, listener: Callable[[Resumed], Awaitable[object]]) -> None:
        """Call ``listener`` with each turn this runtime takes up after a decision
        (a channel delivers the answer where the message came from). A listener
        that raises is logged; the turn is on the record either way."""
        self._listeners.append(listener)

    async def _announce(self, resumed: Resumed) -> None:
        for listener in self._listeners:
            try:
                await listener(resumed)
            except Exception as exc:  # noqa: BLE001  a channel's failure is its own to record
                log.error("delivering the answer of request %s failed: %s: %s",
                          resumed.request.request_id, type(exc).__name__, exc)

    async def call_tool(self, name: str, arguments: Mapping[str, Any], *,
                        actor: Actor | None = None, source: str = "cli",
                        caller_session_id: str | None = None) -> DirectResult:
        """Run one tool outside a turn (a batch or scheduled job, an MCP client's
        call), through the same gate: a call policy holds comes back ``held`` with
        its approval request. ``caller_session_id`` defaults to ``direct:ACTOR``.

        Raises:
            UsageError: ``caller_session_id`` is not an id (:func:`overt.ids.id_problem`).
        """
        if caller_session_id is not None:
            checked_id(caller_session_id, "caller session", typed=False)
        await self.start()
        return await run_direct(self.engine, name, arguments, actor=actor or self.operator,
                                source=source, caller_session_id=caller_session_id)

    async def replay(self, *, turn_id: str | None = None, session_id: str | None = None,
                     since: str | None = None, ask: Model | None = None
                     ) -> AsyncIterator[TurnReplay]:
        """Replay recorded turns of this runtime's ledger (one turn, a session's, or
        those started since ``since``, an ISO time) through this runtime's engine,
        gate, hooks and history window, answered from the record: no model is asked,
        no tool runs, nothing is written to the ledger. Yields each turn's
        :class:`~overt.replay.TurnReplay` (its divergences, in order). ``ask``: a real
        model also asked each recorded request, each answer that differs from the
        recorded one by a byte a divergence (``answer``); the turn goes on with the
        recorded answer.

        Raises:
            ReplayRefused: the ledger does not verify; nothing was replayed.
        """
        from overt.replay import Replayer, select_turns, verified

        await verified(self.ledger)
        turns = await select_turns(self.ledger, turn_id=turn_id, session_id=session_id,
                                   since=since)
        async for result in Replayer(self.engine, self.ledger, ask=ask).run(turns):
            yield result

    async def close(self) -> None:
        if self._taking_up:  # turns resumed by decide_soon end on the record first
            await asyncio.gather(*self._taking_up, return_exceptions=True)
        await self.mcp.close()
        await self.ledger.close()
        if self.transcript is not None:
            self.transcript.close()
        for model in {id(m): m for m in (self.model, *self.models.built())}.values():
            aclose = getattr(model, "aclose", None)
            if aclose is not None:
                await aclose()
            elif (close := getattr(model, "close", None)) is not None:
                close()


def _only(registry: ToolRegistry, names: Collection[str]) -> ToolRegistry:
    """``registry`` with only the tools ``names`` lists.

    Raises:
        UsageError: a name is not registered.
    """
    unknown = sorted(set(names) - set(registry.names))
    if unknown:
        raise UsageError(f"the route's tools name {', '.join(unknown)}, which is not "
                         f"registered (tools: {', '.join(registry.names) or 'none'})")
    kept = ToolRegistry()
    for spec in registry.specs():
        if spec.name in names:
            tool = registry.get(spec.name)
            if tool is not None:
                kept.register(tool)
            else:
                kept.register_spec(spec)
    return kept


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine from synchronous code (scripts, the CLI)."""
    return asyncio.run(coro)
