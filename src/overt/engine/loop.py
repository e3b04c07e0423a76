"""The loop of one turn: model -> tool calls -> tool results -> ... -> final text.

Recording rule: every effect (a model call, a tool execution) happens only
after the records of the steps before it are committed. Records are batched
up to the next effect, so a turn with two model calls and two tool calls run
one after the other commits five times (four when the two calls are read-only
and asked in one response: they run together, :mod:`overt.engine.together`),
and a process killed anywhere leaves a ledger that verifies, with every
executed tool preceded by its ``tool_call.started``.

Limits: at most ``max_tool_calls`` tool calls per model response (calls past it
get ``tool_call_limit_exceeded`` and are recorded ``not_allowed``; the model reads
that and goes on), and at most ``max_tool_calls_per_turn`` in the whole turn
(calls past it are refused alike, and the model then gets one last call without
tools to answer); after ``max_consecutive_tool_errors``
failed calls in a row the calls left in the response are refused and the model
gets one last call without tools, to tell the operator what failed (the turn is
recorded ``tool_error_streak``; if that call fails too, a plain answer says so).
Arguments over the depth or size limit of :mod:`overt.engine.limits` make a
call malformed.

Hooks (see :mod:`overt.hooks.specs`) are asked only when a plugin implements
them: a runtime without plugins runs exactly the loop above. Per tool call the
order is ``pre_tool_call -> tool_call.started committed ->
pre_tool_call_can_provide_result -> (dispatch) -> post_tool_call ->
transform_tool_result`` (:meth:`Turn._hooked_call`; each hook is called, and what it
did recorded, by :class:`overt.engine.hooked.TurnHooks`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from overt.clock import ms_since
from overt.engine import together
from overt.engine.answer_stream import AnswerSink, AnswerStream
from overt.engine.budget import BudgetGuard
from overt.engine.checkpoint import Checkpoint, resume_model
from overt.engine.decide import decide
from overt.engine.dispatch import Executor, ToolOutcome, execute, refuse, unknown_tool
from overt.engine.hooked import TurnHooks
from overt.engine.limits import bounded, bounded_result
from overt.engine.record import (
    CallSite,
    PartStore,
    Recorder,
    audit_name,
    canonical_or_repr,
    overt_call_id,
    response_body,
    resumption,
)
from overt.engine.request_body import Chains, ToolParts, request_body
from overt.engine.shape import well_formed
from overt.engine.values import Allowed, EngineSettings, Held, TurnOutcome
from overt.errors import LedgerError, LedgerUnavailable, OvertError
from overt.events import (
    ApprovalDecision,
    Event,
    InferenceRecorded,
    TurnCompleted,
    TurnPaused,
    TurnStarted,
    TurnStatus,
)
from overt.hooks.calls import NO_HOOKS, HookSet
from overt.ids import new_ulid
from overt.ledger.base import Ledger
from overt.ledger.canonical import canonical_json
from overt.models.base import ADAPTER_DECISIONS, Model, complete_streaming
from overt.models.pricing import PriceTable
from overt.policy.actors import Actor
from overt.policy.gate import Gate
from overt.reasoning.steps import TurnSteps
from overt.sessions.window import HistoryTurn, TurnWindow
from overt.tools.base import Tool, ToolContext
from overt.tools.registry import ToolRegistry
from overt.types import (
    IncomingMessage,
    Message,
    ModelRequest,
    ModelResponse,
    ResponseResult,
    ToolCall,
    ToolSpec,
    TurnError,
    Usage,
)

audit_log = logging.getLogger("overt.audit")
log = logging.getLogger("overt.engine")


class Engine:
    """Runs turns. Holds no per-turn state: one engine serves concurrent turns."""

    def __init__(self, model: Model, tools: ToolRegistry, ledger: Ledger, *,
                 system_prompt: str = "", settings: EngineSettings | None = None,
                 runtime_started_at: str = "",
                 observers: Sequence[Callable[[Event], None]] = (),
                 hooks: HookSet | None = None,
                 models: Callable[[str], Model] | None = None,
                 system_prompt_for: Callable[[tuple[ToolSpec, ...], str], str] | None = None,
                 prices: PriceTable | None = None, budget: BudgetGuard | None = None,
                 gate: Gate | None = None) -> None:
        """``system_prompt``: the system prompt of a turn from the CLI offering every
        tool (of every turn, when there is no ``system_prompt_for``).
        ``system_prompt_for(tools, source)`` renders the prompt of a turn from
        ``source`` offering ``tools``: for the other sources (once each, see
        :meth:`prompt_for`), and again when a plugin changed the tools offered.
        ``hooks``: the plugins' implementations (none by default). ``models``
        resolves a model a ``Reissue`` names."""
        self.model = model
        self.tools = tools
        self.ledger = ledger
        self.system_prompt = system_prompt
        self.settings = settings or EngineSettings()
        self.runtime_started_at = runtime_started_at
        self.observers = list(observers)
        self.hooks = hooks or NO_HOOKS
        self.models = models
        self.system_prompt_for = system_prompt_for
        self.source_prompts: dict[str, str] = {}
        """The prompts :meth:`prompt_for` rendered, by source (cleared when the tools
        change)."""
        self.prices = prices or PriceTable()
        self.budget = budget
        self.gate = gate or Gate()
        self.parts = PartStore()  # request parts this engine committed (stored once)
        self.chains = Chains()  # each session's last committed chain (request_body)
        self.tool_parts = ToolParts()  # the tool lists' parts, made once (request_body)
        self.execute: Executor = execute
        """Runs an allowed call's tool; replay puts the recorded results in its place."""
        self.record_requests = True
        """Whether each inference's request is recorded (replay, which compares each
        with the recorded one itself, records nothing it keeps)."""

    def prompt_for(self, source: str) -> str:
        """The system prompt of a turn from ``source`` offering every tool: what the
        gate does on that source is what the prompt promises (an approval wait on the
        CLI, a refusal on a Slack DM). Rendered once per source; ``system_prompt`` for
        the CLI, and for every source when there is no ``system_prompt_for``."""
        if source == "cli" or self.system_prompt_for is None:
            return self.system_prompt
        prompt = self.source_prompts.get(source)
        if prompt is None:
            prompt = self.source_prompts[source] = self.system_prompt_for(
                self.tools.specs(), source)
        return prompt

    async def run_turn(self, message: IncomingMessage, *, actor: Actor,
                       session_id: str | None = None, history: Sequence[Message] = (),
                       earlier: Sequence[HistoryTurn] = (),
                       on_answer: AnswerSink | None = None) -> TurnOutcome:
        """Answer ``message`` from ``actor``; never raises for a model, tool or ledger
        failure.

        ``actor``: who sent the message (recorded on ``turn.started``: the first
        turn's actor owns the session; :meth:`overt.Runtime.respond` names the
        runtime's operator when its caller names nobody). ``history``: messages always
        sent before the new one. ``earlier``: the session's answered turns
        (:func:`overt.sessions.session_history`), of which the newest that fit the
        model's window are sent, whole; those left out are recorded on each
        inference. ``on_answer``: gets the answer as it is generated
        (:mod:`overt.engine.answer_stream`).

        A model failure ends the turn with ``error`` set and ``tools_used`` None;
        so does a ledger failure (overt does not act off the record).
        """
        turn = Turn(self, message.source, message.caller_session_id,
                     session_id or message.caller_session_id)
        if on_answer is not None:  # a plugin that rewrites the answer: sent whole, at the end
            turn.stream = AnswerStream(on_answer,
                                       live=not self.hooks.transform_llm_output)
        try:
            return await turn.run(message.text, history, earlier, actor=actor)
        except LedgerError as exc:
            return turn.ledger_failed(exc)

    async def resume(self, checkpoint: Checkpoint, request_id: str,
                     decision: ApprovalDecision, *, resumed_by: str,
                     reason: str | None = None) -> TurnOutcome:
        """Take up a turn paused on ``request_id`` once it is decided, in any process.

        First claims the resumption (``turn.resumed``, once per request): a
        second resumer, here or in another process, gets :class:`LedgerConflict`
        and nothing runs twice. Approved: the held call goes through the gate
        again (policy re-checked on the exact call) and runs. Denied or
        expired: the model reads why and answers without it. Then the calls
        left in the same response, then the loop, as if it had never paused.

        Raises:
            LedgerConflict: the turn was already resumed for this request.
            LedgerError: the claim could not be recorded (nothing ran).
            ModelUnavailable: the turn ran on a model this engine cannot build;
                nothing was recorded, so a process that can build it takes it up.
        """
        # before the claim: a turn this engine cannot run is left for one that can
        model = resume_model(checkpoint, self.model, self.settings.model_spec, self.models)
        turn = Turn.restore(self, checkpoint, model)
        turn.recorder.add(resumption(turn.turn_id, turn.session_id, request_id, decision,
                                     resumed_by))
        await turn.recorder.flush()  # the claim: only one resumer gets past this
        try:
            return await turn.resume(checkpoint, request_id, decision, reason)
        except LedgerError as exc:
            return turn.ledger_failed(exc)


class Turn:
    """One turn's state and its loop (:meth:`run`, or :meth:`resume` after a pause).

    Private to the engine: :class:`Engine` makes one per turn. With plugins, its
    model and tool calls (:meth:`infer`, :meth:`dispatch`) are wrapped in their hooks
    (:class:`overt.engine.hooked.TurnHooks`).
    """

    def __init__(self, engine: Engine, source: str, caller_session_id: str, session_id: str,
                 turn_id: str | None = None) -> None:
        self.engine = engine
        self.source = source
        self.session_id = session_id
        self.caller_session_id = caller_session_id
        self.turn_id = turn_id or new_ulid()
        self.model = engine.model
        self.model_spec = engine.settings.model_spec or engine.model.name
        self.route = engine.settings.route
        self.actor = Actor.agent(engine.settings.agent)
        self.started = time.perf_counter()
        self.earlier_ms = 0.0  # time spent before a pause, for a resumed turn
        self.usage = Usage()
        self.recorder = Recorder(engine.ledger, engine.observers, engine.hooks.on_event,
                                 engine.parts)
        self.chain = engine.chains.start(session_id)  # the request's chain (request_body)
        self.hooks = TurnHooks(engine.hooks, self.recorder, self.turn_id, session_id,
                               self.route) if engine.hooks.per_turn else None
        self.can_provide = bool(engine.hooks.pre_tool_call_can_provide_result)
        self.steps = TurnSteps(self.recorder, self.turn_id, session_id)
        self.site = CallSite(self.turn_id, session_id, source, caller_session_id)
        self.tools_used: list[str] = []
        self.tool_calls = 0
        self.response_calls = 0  # calls answered of the model's latest response
        self.model_calls = 0
        self.error: TurnError | None = None
        # The loop's state: what a checkpoint saves when the turn pauses.
        self.messages: list[Message] = []
        self.specs: tuple[ToolSpec, ...] = ()
        self.offered: frozenset[str] = frozenset()
        self.error_streak = 0
        self.last_error = ""
        self.tools_allowed = True
        self.iteration = 0
        self.stopped: str | None = None  # why tools were taken away (failures in a row)
        self.window = TurnWindow(self.model, engine.settings.max_output_tokens)
        self.stream: AnswerStream | None = None

    @classmethod
    def restore(cls, engine: Engine, cp: Checkpoint, model: Model) -> Turn:
        """A turn as it was when it paused (see :mod:`overt.engine.checkpoint`), to go
        on with ``model`` (the one it ran on)."""
        turn = cls(engine, cp.source, cp.caller_session_id, cp.session_id, cp.turn_id)
        turn.model = model
        turn.window = TurnWindow(model, engine.settings.max_output_tokens)
        turn.model_spec = cp.model or turn.model_spec
        turn.route, turn.actor = cp.route, Actor.parse(cp.actor)
        turn.earlier_ms = cp.duration_ms
        turn.usage, turn.tools_used = cp.usage, list(cp.tools_used)
        turn.tool_calls, turn.model_calls = cp.tool_calls, cp.model_calls
        turn.response_calls = cp.response_calls
        turn.messages = list(cp.messages)
        wanted = set(cp.offered)
        turn.specs = tuple(s for s in engine.tools.specs() if s.name in wanted)
        turn.offered = frozenset(s.name for s in turn.specs)
        turn.error_streak, turn.last_error = cp.error_streak, cp.last_error
        turn.tools_allowed, turn.iteration = cp.tools_allowed, cp.iteration
        turn.steps.next_number = cp.next_step
        return turn

    def result(self, text: str, tools_used: list[str] | None, error: TurnError | None,
               awaiting_approval: str | None = None) -> ResponseResult:
        return ResponseResult(text, tools_used, self.usage, error, self.session_id,
                              self.turn_id, awaiting_approval)

    def ledger_failed(self, exc: LedgerError) -> TurnOutcome:
        # the server out of reach: the ledger logs the outage in proportion; each turn
        # it stops is at INFO (overt -v), the turn's caller is answered with the error
        log.log(logging.INFO if isinstance(exc, LedgerUnavailable) else logging.ERROR,
                "turn %s stopped: the ledger failed: %s", self.turn_id, exc)
        text = "I could not record this turn, so I stopped before acting."
        if self.stream is not None:
            self.stream.settle(text)
        return TurnOutcome(self.result(
            text, None, TurnError("ledger_error", str(exc), type(exc).__name__)))

    async def run(self, text: str, history: Sequence[Message],
                  earlier: Sequence[HistoryTurn] = (), *, actor: Actor) -> TurnOutcome:
        engine, settings = self.engine, self.engine.settings
        rec, hooks = self.recorder, self.hooks
        rec.add(TurnStarted(
            turn_id=self.turn_id, session_id=self.session_id, source=self.source,
            caller_session_id=self.caller_session_id,
            message_digest=rec.content(text), model=self.model.name,
            route=self.route, max_tool_calls=settings.max_tool_calls, actor=str(actor)))
        specs = engine.tools.specs()
        system_prompt = engine.prompt_for(self.source)
        if hooks is not None and hooks.has.pre_tool_list_finalized:
            chosen = await hooks.tools(specs)
            if chosen != specs and engine.system_prompt_for is not None:
                system_prompt = engine.system_prompt_for(chosen, self.source)
            specs = chosen
        if engine.budget is not None:
            note = await engine.budget.describe(self.session_id)
            system_prompt = f"{system_prompt}\n\n{note}" if system_prompt else note
        if system_prompt:
            self.messages.append(Message("system", system_prompt))
        self.messages.extend(history)
        user = Message("user", text)
        if earlier:
            self.window.place(self.messages, earlier, user, specs)
        self.messages.append(user)
        self.specs = specs
        self.offered = frozenset(s.name for s in specs)
        return await self._drive(())

    async def resume(self, cp: Checkpoint, request_id: str, decision: ApprovalDecision,
                     reason: str | None) -> TurnOutcome:
        """After the claim: the held call decided, then the rest of the turn."""
        held = cp.held
        if decision == "approved":
            answer = await self._tool_call(held, self.offered, approved=request_id)
        else:
            why = f" ({reason})" if reason else ""
            code = "approval_denied" if decision == "denied" else "approval_expired"
            text = ("the operator denied this call" + why if decision == "denied" else
                    "nobody approved this call in time; it was not run")
            args_digest = self.recorder.content(canonical_or_repr(held.arguments))
            answer = self.complete(held, refuse(code, f"{text}; answer without it"),
                                    args_digest, None, None)
        if isinstance(answer, Held):  # only if a plugin or policy asks again
            return await self._pause(answer, cp.remaining)
        stop = self._after_call(held, answer)
        if stop is not None:
            self._stop_tools(stop, cp.remaining)
            return await self._drive(())
        return await self._drive(cp.remaining)

    async def _drive(self, pending: Sequence[ToolCall]) -> TurnOutcome:
        """Run ``pending`` calls (those left in a resumed response), then the loop."""
        engine, settings = self.engine, self.engine.settings
        rec, hooks = self.recorder, self.hooks
        if pending:
            stopped = await self._calls(pending)
            if stopped is not None:
                return stopped
        while True:
            too_long = self.window.trim(self.messages,
                                        self.specs if self.tools_allowed else ())
            if too_long is not None:
                self.error = TurnError("model_error", too_long, "ContextWindowExceeded")
                self.steps.failed(str(self.error))
                return await self._finish("model_error", "I cannot answer this: " + too_long)
            request = ModelRequest(tuple(self.messages),
                                   self.specs if self.tools_allowed else (),
                                   settings.max_output_tokens)
            if engine.budget is not None:
                await rec.flush()  # what was spent so far is on the record first
                refusal = await engine.budget.check(self.session_id, request, self.model.name)
                if refusal is not None:
                    self.error = TurnError("budget_exceeded", refusal.text, refusal.limit)
                    return await self._finish("budget_exceeded", refusal.text)
            if hooks is None:
                response = await self.infer(request, self.model)
            else:
                response = await self._ask(hooks, request)
            self.iteration += 1
            if response is None:
                if self.stopped is not None:  # the last call failed too: say what stopped
                    self.error = None
                    return await self._finish("tool_error_streak", self.stopped)
                return await self._finish("model_error")
            # overt's own ids stand in for the model's (kept in the content tier only)
            calls = tuple(replace(c, id=overt_call_id()) for c in response.tool_calls
                          ) if self.tools_allowed else ()
            if calls and self.stream is not None:  # a preamble to calls is not the answer
                self.stream.withdraw("tool_call")
            if not calls:
                text = response.text
                if hooks is not None and hooks.has.transform_llm_output:
                    text = await hooks.output(text, response.model or self.model.name)
                return await self._finish(
                    "completed" if self.stopped is None else "tool_error_streak", text)
            self.messages.append(Message("assistant", response.text, tool_calls=calls))
            self.response_calls = 0
            stopped = await self._calls(calls)
            if stopped is not None:
                return stopped

    async def _calls(self, calls: Sequence[ToolCall]) -> TurnOutcome | None:
        """The tool calls of one response, in order, consecutive read-only ones together
        (:mod:`overt.engine.together`); a turn outcome if the turn stops (paused for
        approval, or too many failures in a row)."""
        index = 0
        while index < len(calls):
            size = together.size(self, calls[index:])
            answers = (await together.run(self, calls[index:index + size]) if size else
                       [await self._tool_call(calls[index], self.offered)])
            stop = None
            for call, answer in zip(calls[index:], answers, strict=False):
                index += 1
                if isinstance(answer, Held):
                    return await self._pause(answer, calls[index:])
                stop = self._after_call(call, answer)  # a group's last call tells
            if stop is not None:
                self._stop_tools(stop, calls[index:])
                return None
        if self.tool_calls >= self.engine.settings.max_tool_calls_per_turn:
            self.tools_allowed = False  # the cap is reached: one last call, without tools
        return None

    def _stop_tools(self, why: str, left: Sequence[ToolCall]) -> None:
        """Too many failures in a row: the calls ``left`` in the response are refused
        (recorded, not run), and the model gets one last call, without tools, to tell
        the operator what failed (:attr:`stopped` says why, if it cannot)."""
        self.stopped = why
        self.steps.failed(why)
        for call in left:
            outcome = refuse("tool_error_streak", f"not run: {why}")
            args_digest = self.recorder.content(canonical_or_repr(call.arguments))
            self.complete(call, outcome, args_digest, None, None)
            self.messages.append(Message("tool", outcome.content, tool_call_id=call.id,
                                         name=call.name, is_error=True))
        self.tools_allowed = False

    def _after_call(self, call: ToolCall, outcome: ToolOutcome) -> str | None:
        """The model reads the outcome; the text to stop with after too many failures."""
        self.messages.append(Message("tool", outcome.content, tool_call_id=call.id,
                                     name=call.name, is_error=outcome.is_error))
        if not outcome.is_error:
            self.error_streak = 0
            return None
        self.error_streak += 1
        self.last_error = f"{call.name}: {outcome.code}"
        if self.error_streak < self.engine.settings.max_consecutive_tool_errors:
            return None
        return (f"I stopped: {self.error_streak} tool calls in a row failed "
                f"(last: {self.last_error}). Nothing more was run for this request.")

    async def _pause(self, held: Held, remaining: Sequence[ToolCall]) -> TurnOutcome:
        """Record everything needed to resume, then answer that the turn waits."""
        rec = self.recorder
        checkpoint = Checkpoint(
            turn_id=self.turn_id, session_id=self.session_id, source=self.source,
            caller_session_id=self.caller_session_id, route=self.route, actor=str(self.actor),
            messages=list(self.messages), offered=sorted(self.offered), held=held.call,
            remaining=list(remaining), tools_allowed=self.tools_allowed,
            error_streak=self.error_streak, last_error=self.last_error,
            iteration=self.iteration, tool_calls=self.tool_calls,
            response_calls=self.response_calls,
            model_calls=self.model_calls, usage=self.usage, tools_used=list(self.tools_used),
            next_step=self.steps.next_number, duration_ms=self.earlier_ms + ms_since(self.started),
            model=self.model_spec)
        rec.add(TurnPaused(
            turn_id=self.turn_id, session_id=self.session_id, request_id=held.request_id,
            tool_call_id=held.call.id, tool_name=audit_name(held.call.name),
            checkpoint_digest=rec.content(checkpoint.to_json())))
        await rec.flush()
        text = (f"This needs an operator's approval before I run {held.call.name}: "
                f"{held.message}. Approval request {held.request_id} (expires "
                f"{held.expires_at}). Approve with `overt approvals approve "
                f"{held.request_id}` or deny with `overt approvals deny {held.request_id} "
                "--reason TEXT`; the answer follows once it is decided.")
        if self.stream is not None:
            self.stream.settle(text)
        return TurnOutcome(self.result(text, list(self.tools_used), None, held.request_id),
                           self.messages)

    async def infer(self, request: ModelRequest, model: Model, *, escalated: bool = False,
                     escalation_reason: str | None = None) -> ModelResponse | None:
        """One model call, recorded; ``None`` if the model failed (recorded too)."""
        engine, rec = self.engine, self.recorder
        await rec.flush()
        inference_id = new_ulid()
        started = time.perf_counter()
        offered = [t.name for t in request.tools]
        self.model_calls += 1
        try:
            response = well_formed(await complete_streaming(
                model, request, self.stream.text if self.stream is not None else None))
        except Exception as exc:  # noqa: BLE001  any adapter failure ends the turn, recorded
            self.error = TurnError("model_error", str(exc), type(exc).__name__)
            self.steps.failed(str(self.error))
            rec.add(InferenceRecorded(
                turn_id=self.turn_id, session_id=self.session_id, inference_id=inference_id,
                iteration=self.model_calls - 1, model=model.name,
                route=self.route, input_tokens=0, output_tokens=0, cost_usd=0.0,
                duration_ms=ms_since(started), tools_offered=offered,
                tool_calls_requested=0, stop_reason="error", response_digest=None,
                escalated=escalated, escalation_reason=escalation_reason,
                error_type=type(exc).__name__, history_omitted_through=self.window.omitted_through,
                history_omitted_tokens=self.window.omitted_tokens,
                request_digest=self._request_digest(request, None)))
            return None
        response = bounded(response)  # over-deep or oversized arguments: malformed calls
        usage = response.usage
        if not usage.cost_usd and (usage.input_tokens or usage.output_tokens):
            cost = engine.prices.cost(response.model or model.name, usage)
            usage = Usage(usage.input_tokens, usage.output_tokens, cost)
        self.usage = self.usage + usage
        body = response_body(response)
        rec.add(InferenceRecorded(
            turn_id=self.turn_id, session_id=self.session_id, inference_id=inference_id,
            iteration=self.model_calls - 1, model=response.model or model.name,
            route=self.route, input_tokens=response.usage.input_tokens,
            output_tokens=usage.output_tokens, cost_usd=usage.cost_usd,
            duration_ms=ms_since(started), tools_offered=offered,
            tool_calls_requested=len(response.tool_calls), stop_reason=response.stop_reason,
            response_digest=rec.content(body), escalated=escalated,
            escalation_reason=escalation_reason, info=dict(response.info),
            history_omitted_through=self.window.omitted_through,
            history_omitted_tokens=self.window.omitted_tokens,
            request_digest=self._request_digest(request, response.sent),
            adapter_decisions=[d if d in ADAPTER_DECISIONS else "unknown_decision"
                               for d in response.decisions]))
        self.steps.model_reasoning(response.text, response.reasoning,
                                   final=not response.tool_calls)
        return response

    async def _ask(self, hooks: TurnHooks, request: ModelRequest) -> ModelResponse | None:
        """One model call with its hooks: rewrite, at most one reissue, observe.

        ``None`` when the model failed (recorded by :meth:`infer`). A reissue naming a
        model this runtime cannot build, or one that fails, leaves the first answer
        standing.
        """
        model, iteration = self.model, self.iteration
        if hooks.has.pre_api_request:
            request = await hooks.request(request, model.name, iteration)
        response = await self.infer(request, model)
        if response is None:
            return None
        reissued = False
        if hooks.has.post_llm_call_can_reissue:
            answer = await hooks.reissue(request, response, iteration, model.name)
            if answer is not None:
                directive, plugin = answer
                target = model
                try:
                    if directive.model is not None:
                        if self.engine.models is None:
                            raise OvertError("this runtime resolves no other models")
                        target = self.engine.models(directive.model)
                except Exception as exc:  # noqa: BLE001  an unknown model: the first answer stands
                    hooks.reissue_failed(plugin, exc)
                else:
                    again = hooks.reissued(directive, plugin, request, iteration, model.name,
                                           target.name)
                    if self.stream is not None:
                        self.stream.withdraw("reissue")
                    if hooks.has.pre_api_request:
                        again = await hooks.request(again, target.name, iteration)
                    second = await self.infer(again, target, escalated=True,
                                              escalation_reason=directive.reason_code)
                    if second is not None:
                        request, response, model, reissued = again, second, target, True
                    else:
                        self.error = None  # the reissue failed, recorded; the first answer stands
        if hooks.has.post_api_request:
            await hooks.responded(request, response, response.model or model.name, iteration,
                                  reissued)
        return response

    def _request_digest(self, request: ModelRequest, sent: object) -> str | None:
        """The request as sent, its parts and its body added to the next commit."""
        rec = self.recorder
        if not self.engine.record_requests:
            return None
        return rec.content(request_body(request, sent if isinstance(sent, Mapping) else None,
                                        rec.part, self.chain, self.engine.tool_parts))

    async def _tool_call(self, call: ToolCall, offered: frozenset[str], *,
                         approved: str | None = None) -> ToolOutcome | Held:
        """One call: :meth:`decide`, then (allowed) hooks and dispatch.

        ``approved`` is the approval request a resumed call was approved under.
        """
        decided = decide(self, call, offered, approved=approved)
        if not isinstance(decided, Allowed):
            return decided
        rec, hooks = self.recorder, self.hooks
        provided_by = model_reads = None
        if hooks is None:  # no plugin: the plain path
            assert decided.tool is not None  # (None only when a plugin can provide results)
            rec.add(self.site.intent(call, decided.args_digest))
            await rec.flush()  # the decision and the intent are on the record before the effect
            outcome = await self.dispatch(decided.tool, call)
        else:
            outcome, provided_by, model_reads = await self._hooked_call(
                hooks, decided.tool, call, decided.args_digest)
        return self.complete(call, outcome, decided.args_digest, provided_by, model_reads)

    async def _hooked_call(self, hooks: TurnHooks, tool: Tool | None, call: ToolCall,
                           args_digest: str) -> tuple[ToolOutcome, str | None, str | None]:
        """A tool call the gate allowed, with its hooks: (outcome, provided by, text the
        model reads instead).

        ``pre_tool_call`` -> intent committed -> ``pre_tool_call_can_provide_result``
        -> dispatch -> ``post_tool_call`` -> ``transform_tool_result``.
        """
        args = dict(call.arguments)  # hooks get a copy: what they do to it changes nothing
        if hooks.has.pre_tool_call:
            blocked = await hooks.check(call, args)
            if blocked is not None:
                return blocked, None, None
        self.recorder.add(self.site.intent(call, args_digest))
        await self.recorder.flush()  # the intent is on the record before the effect
        provided = None
        if hooks.has.pre_tool_call_can_provide_result:
            provided = await hooks.provide(call, args, self.engine.settings.tool_timeout_s)
        if provided is not None:
            outcome, provided_by = provided
        elif tool is None:  # offered by a plugin, and no plugin answered it
            outcome = unknown_tool(call, frozenset(self.engine.tools.names), registered=True)
            provided_by = None
        else:
            outcome, provided_by = await self.dispatch(tool, call), None
        model_reads = None
        if hooks.has.post_tool_call or hooks.has.transform_tool_result:
            model_reads = await hooks.after(call, args, outcome, provided_by)
        return outcome, provided_by, model_reads

    def complete(self, call: ToolCall, outcome: ToolOutcome, args_digest: str,
                  provided_by: str | None, model_reads: str | None, *,
                  step: bool = True) -> ToolOutcome:
        """Record how the call ended (with its ``execute`` or ``error`` step unless the
        gate's ``waiting_approval`` step already tells it); the outcome the model reads."""
        rec = self.recorder
        self.tool_calls += 1
        self.response_calls += 1
        if outcome.executed:  # run, or its result provided by a plugin
            self.tools_used.append(call.name)
        event = self.site.completion(call, outcome, args_digest, rec.content(outcome.content),
                                     provided_by,
                                     known=call.name in self.offered
                                     or self.engine.tools.get(call.name) is not None)
        rec.add(event)
        if step:
            self.steps.executed(event.tool_call_id, event.tool_name, outcome.status,
                                outcome.content)
        if audit_log.isEnabledFor(logging.INFO):
            audit_log.info("overt.tool_called %s", canonical_json({
                "turn_id": self.turn_id, "session_id": self.session_id, **event.data()}))
        reads = model_reads if model_reads is not None else outcome.content
        model_reads = bounded_result(reads, self.engine.settings.max_tool_result_chars)
        if model_reads != outcome.content:
            return replace(outcome, content=model_reads)
        return outcome

    async def dispatch(self, tool: Tool, call: ToolCall) -> ToolOutcome:
        """Run an allowed call's tool (the intent is already committed)."""
        engine = self.engine
        context = ToolContext(engine.ledger, self.turn_id, self.session_id, self.source,
                              self.caller_session_id, call.id, engine.runtime_started_at,
                              self.actor, engine.gate.capabilities)
        return await engine.execute(tool, call, context, engine.settings.tool_timeout_s)

    async def _finish(self, status: TurnStatus, text: str = "") -> TurnOutcome:
        failed = status in ("model_error", "budget_exceeded")
        tools_used = None if failed else list(self.tools_used)
        error = self.error if failed else None
        if status == "budget_exceeded":
            self.steps.failed(text)
        if status == "model_error" and not text:
            text = "The model could not answer this time; the error is on the record."
        elif not text.strip():
            text = self.stopped or "(the model gave an empty answer)"
        self.recorder.add(TurnCompleted(
            turn_id=self.turn_id, session_id=self.session_id, status=status,
            reply_digest=self.recorder.content(text), tools_used=tools_used,
            tool_calls=self.tool_calls, model_calls=self.model_calls,
            input_tokens=self.usage.input_tokens, output_tokens=self.usage.output_tokens,
            cost_usd=self.usage.cost_usd,
            duration_ms=round(self.earlier_ms + ms_since(self.started), 3),
            error_type=error.type if error else None,
            error_kind=error.kind if error else None,
            error_digest=self.recorder.content(error.message) if error else None))
        await self.recorder.flush()
        if self.recorder.events:  # on_event failures on the last batch, recorded too
            await self.recorder.flush()
        self.engine.chains.keep(self.session_id, self.chain)  # its parts are committed
        if not failed:
            self.messages.append(Message("assistant", text))
        if self.stream is not None:
            self.stream.settle(text)
        return TurnOutcome(self.result(text, tools_used, error), self.messages)

