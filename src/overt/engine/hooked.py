"""The hooks of one turn: each called by overt's rules, and what it did put on the record.

The contract of every hook is in :mod:`overt.hooks.specs`; this module keeps it.
The loop asks only for hooks that have implementations (``HookSet`` tuples are
empty otherwise), so none of this runs for a runtime without plugins.

The loop (:mod:`overt.engine.loop`) wraps its effects in them, and only when a
plugin is present: a model call in ``pre_api_request``, at most one reissue and
``post_api_request``; an allowed tool call in ``pre_tool_call`` through
``transform_tool_result``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, TypeVar

from overt.clock import ms_since
from overt.engine.dispatch import ToolOutcome, render_result
from overt.engine.record import Recorder, audit_name
from overt.errors import HookTimeout, UsageError
from overt.events import (
    HookBlocked,
    HookDeclined,
    HookError,
    HookErrorConsequence,
    HookProvided,
    HookReissued,
    HookRequestRewritten,
    HookToolsNarrowed,
    HookTransformed,
)
from overt.hooks.answers import Block, Reissue, error_envelope
from overt.hooks.calls import HookSet, Impl, call_async_timed
from overt.tools import shapes
from overt.types import Message, ModelRequest, ModelResponse, ToolCall, ToolSpec

T = TypeVar("T")

log = logging.getLogger("overt.hooks")


class TurnHooks:
    """Calls the hooks of one turn and records what they did (never bodies in the audit tier)."""

    def __init__(self, hooks: HookSet, rec: Recorder, turn_id: str, session_id: str,
                 route: str) -> None:
        self.has = hooks
        self.rec = rec
        self.turn_id = turn_id
        self.session_id = session_id
        self.route = route
        self.ids = {"task_id": turn_id, "session_id": session_id}

    def _failed(self, plugin: str, hook: str, exc: BaseException,
                consequence: HookErrorConsequence, tool_call_id: str | None = None,
                level: int = logging.WARNING) -> None:
        """Record and log a failed implementation; the log line never holds the message."""
        name = type(exc).__name__
        log.log(level, "plugin %s: %s raised %s (%s)", plugin, hook, name, consequence)
        self.rec.add(HookError(
            turn_id=self.turn_id, session_id=self.session_id, plugin=plugin, hook=hook,
            error_type=name, consequence=consequence,
            tool_call_id=None if tool_call_id is None else audit_name(tool_call_id),
            error_digest=self.rec.content(f"{name}: {exc}")))

    # -- per turn ------------------------------------------------------------

    async def tools(self, specs: tuple[ToolSpec, ...]) -> tuple[ToolSpec, ...]:
        """``pre_tool_list_finalized``: the tools to offer this turn."""
        kwargs = {"tools": list(specs), "route": self.route, **self.ids}
        found = await self._first("pre_tool_list_finalized", self.has.pre_tool_list_finalized,
                                  kwargs, _tool_list)
        if found is None:
            return specs
        chosen, plugin = found
        if chosen != specs:
            self.rec.add(HookToolsNarrowed(
                turn_id=self.turn_id, session_id=self.session_id, plugin=plugin,
                hook="pre_tool_list_finalized", tools_before=[s.name for s in specs],
                tools_after=[s.name for s in chosen]))
        return chosen

    async def request(self, request: ModelRequest, model: str, iteration: int) -> ModelRequest:
        """``pre_api_request``: the request to send."""
        kwargs = {"request": request, "route": self.route, "model": model,
                  "iteration": iteration, **self.ids}
        found = await self._first("pre_api_request", self.has.pre_api_request, kwargs,
                                  _of_type(ModelRequest))
        if found is None:
            return request
        answer, plugin = found
        if answer != request:
            self.rec.add(HookRequestRewritten(
                turn_id=self.turn_id, session_id=self.session_id, plugin=plugin,
                hook="pre_api_request", iteration=iteration,
                messages_before=len(request.messages), messages_after=len(answer.messages),
                tools_before=[t.name for t in request.tools],
                tools_after=[t.name for t in answer.tools]))
        return answer

    async def reissue(self, request: ModelRequest, response: ModelResponse, iteration: int,
                      model: str) -> tuple[Reissue, str] | None:
        """``post_llm_call_can_reissue``: the first directive and its plugin, or None."""
        kwargs = {"request": request, "response": response, "iteration": iteration,
                  "model": model, "route": self.route, **self.ids}
        return await self._first("post_llm_call_can_reissue",
                                 self.has.post_llm_call_can_reissue, kwargs, _of_type(Reissue))

    def reissued(self, directive: Reissue, plugin: str, request: ModelRequest, iteration: int,
                 from_model: str, to_model: str) -> ModelRequest:
        """Record a reissue; the request to send for it."""
        context_digest = None
        messages = request.messages
        if directive.context:
            context_digest = self.rec.content(directive.context)
            messages = (*messages, Message("user", directive.context))
        self.rec.add(HookReissued(
            turn_id=self.turn_id, session_id=self.session_id, plugin=plugin,
            hook="post_llm_call_can_reissue", iteration=iteration, from_model=from_model,
            to_model=to_model, reason_code=directive.reason_code, context_digest=context_digest))
        return replace(request, messages=messages)

    def reissue_failed(self, plugin: str, exc: BaseException) -> None:
        """The directive named a model that cannot be had: the first answer stands."""
        self._failed(plugin, "post_llm_call_can_reissue", exc, "ignored")

    async def responded(self, request: ModelRequest, response: ModelResponse, model: str,
                        iteration: int, reissued: bool) -> None:
        """``post_api_request``: every observer sees the final response."""
        kwargs = {"request": request, "response": response, "model": model,
                  "iteration": iteration, "reissued": reissued, "route": self.route,
                  **self.ids}
        await self._notify("post_api_request", self.has.post_api_request, kwargs)

    async def output(self, text: str, model: str) -> str:
        """``transform_llm_output``: the final answer's text."""
        kwargs = {"text": text, "model": model, **self.ids}
        new = await self._transform("transform_llm_output", self.has.transform_llm_output,
                                    kwargs, text, None)
        return text if new is None else new

    # -- per tool call ---------------------------------------------------------

    async def check(self, call_: ToolCall, args: dict[str, Any]) -> ToolOutcome | None:
        """``pre_tool_call``: None to go on, or the outcome of a blocked call (fails closed)."""
        kwargs = {"tool_name": call_.name, "args": args, "tool_call_id": call_.id, **self.ids}
        timeout = self.has.timeouts.get("pre_tool_call")
        for impl in self.has.pre_tool_call:
            started = time.perf_counter()
            try:
                answer = await _call_timed(impl, kwargs, timeout)
                if answer is None:
                    continue
                block = Block("blocked", answer) if isinstance(answer, str) else answer
                if not isinstance(block, Block):
                    raise UsageError(f"expected None or a Block, got {type(answer).__name__}")
            except Exception as exc:  # noqa: BLE001  fail-closed: the call is blocked, recorded
                self._failed(impl.plugin, "pre_tool_call", exc, "blocked", call_.id)
                code = "hook_timeout" if isinstance(exc, HookTimeout) else "hook_error"
                return ToolOutcome(
                    "not_allowed", f"{code}: the check of plugin {impl.plugin} did not answer, "
                    "so the call was not run", True, ms_since(started), reason_code=code)
            self.rec.add(HookBlocked(
                turn_id=self.turn_id, session_id=self.session_id, plugin=impl.plugin,
                hook="pre_tool_call", tool_call_id=audit_name(call_.id),
                tool_name=audit_name(call_.name),
                reason_code=block.reason_code))
            message = block.message or block.reason_code
            return ToolOutcome("not_allowed", f"{block.reason_code}: blocked by plugin "
                               f"{impl.plugin}: {message}", True, ms_since(started),
                               reason_code=block.reason_code)
        return None

    async def provide(self, call_: ToolCall, args: dict[str, Any],
                      timeout: float | None) -> tuple[ToolOutcome, str] | None:
        """``pre_tool_call_can_provide_result``: a provided outcome and its plugin, or None."""
        kwargs = {"tool_name": call_.name, "args": args, "tool_call_id": call_.id, **self.ids}
        timeout = self.has.timeouts.get("pre_tool_call_can_provide_result", timeout)
        # (the tool timeout applies unless the runtime set one for this hook)
        for impl in self.has.pre_tool_call_can_provide_result:
            started = time.perf_counter()
            try:
                answer = await _call_timed(impl, kwargs, timeout)
                if answer is not None and not isinstance(answer, Mapping):
                    raise UsageError(f'expected {{"result": ...}} or None, got '
                                     f"{type(answer).__name__}")
            except Exception as exc:  # noqa: BLE001  fail-safe: logged at DEBUG, recorded
                self._failed(impl.plugin, "pre_tool_call_can_provide_result", exc, "fell_through",
                             call_.id, logging.DEBUG)
                continue
            if answer is None or "result" not in answer:  # no answer from this plugin
                self.rec.add(HookDeclined(
                    turn_id=self.turn_id, session_id=self.session_id, plugin=impl.plugin,
                    hook="pre_tool_call_can_provide_result", tool_call_id=audit_name(call_.id),
                    tool_name=audit_name(call_.name)))
                continue
            self.rec.add(HookProvided(
                turn_id=self.turn_id, session_id=self.session_id, plugin=impl.plugin,
                hook="pre_tool_call_can_provide_result", tool_call_id=audit_name(call_.id),
                tool_name=audit_name(call_.name)))
            content = render_result(answer["result"])
            is_error = answer.get("is_error") is True
            failure = None if is_error else error_envelope(answer["result"])
            if failure is not None:  # a bridge's {"error": "..."}: a failure, said as one
                is_error, content = True, f"tool_execution_error: {failure}"
            outcome = ToolOutcome("execution_error" if is_error else "ok", content, is_error,
                                  ms_since(started), executed=True)
            return outcome, impl.plugin
        return None

    async def after(self, call_: ToolCall, args: dict[str, Any], outcome: ToolOutcome,
                    provided_by: str | None) -> str:
        """``post_tool_call`` then ``transform_tool_result``: the result text the model reads."""
        kwargs = {"tool_name": call_.name, "args": args, "result": outcome.content,
                  "status": outcome.status, "is_error": outcome.is_error,
                  "duration_ms": outcome.duration_ms, "provided_by": provided_by,
                  "tool_call_id": call_.id, **self.ids}
        await self._notify("post_tool_call", self.has.post_tool_call, kwargs, call_.id)
        new = await self._transform("transform_tool_result", self.has.transform_tool_result,
                                    kwargs, outcome.content, call_.id)
        return outcome.content if new is None else new

    async def _transform(self, hook: str, impls: tuple[Impl, ...], kwargs: dict[str, Any],
                         before: str, tool_call_id: str | None) -> str | None:
        found = await self._first(hook, impls, kwargs, _of_type(str), tool_call_id)
        if found is None:
            return None
        answer, plugin = found
        if answer != before:
            self.rec.add(HookTransformed(
                turn_id=self.turn_id, session_id=self.session_id, plugin=plugin, hook=hook,
                tool_call_id=None if tool_call_id is None else audit_name(tool_call_id),
                before_digest=self.rec.content(before), after_digest=self.rec.content(answer)))
        return answer

    async def _first(self, hook: str, impls: tuple[Impl, ...], kwargs: dict[str, Any],
                     accept: Callable[[Any], T],
                     tool_call_id: str | None = None) -> tuple[T, str] | None:
        """The first answer ``accept`` takes, with its plugin (first non-None wins).

        An implementation that raises, or answers something ``accept`` refuses
        (it raises), is recorded as a hook error and the next one is asked.
        """
        for impl in impls:
            try:
                answer = impl.function(*impl.pick(kwargs))
                if impl.is_async:
                    answer = await answer
                if answer is None:
                    continue
                value = accept(answer)
            except Exception as exc:  # noqa: BLE001  fail-safe: recorded, next plugin asked
                self._failed(impl.plugin, hook, exc, "fell_through", tool_call_id)
                continue
            return value, impl.plugin
        return None

    async def _notify(self, hook: str, impls: tuple[Impl, ...], kwargs: dict[str, Any],
                      tool_call_id: str | None = None) -> None:
        """Call every observer; one that raises is recorded and the others still run."""
        for impl in impls:
            try:
                if impl.is_async:
                    await impl.function(*impl.pick(kwargs))
                else:
                    impl.function(*impl.pick(kwargs))
            except Exception as exc:  # noqa: BLE001  an observer's failure is recorded
                self._failed(impl.plugin, hook, exc, "ignored", tool_call_id)


async def _call_timed(impl: Impl, kwargs: dict[str, Any], timeout: float | None) -> Any:
    """Call ``impl`` within ``timeout``: an ``async def`` is cancelled at it; a ``def``,
    which cannot be interrupted, counts as timed out when it returns late.

    Raises:
        HookTimeout: the implementation ran past ``timeout``.
        Exception: whatever the implementation raises.
    """
    if impl.is_async:
        return await call_async_timed(impl, kwargs, timeout)
    started = time.perf_counter()
    answer = impl.function(*impl.pick(kwargs))
    if timeout is not None and time.perf_counter() - started > timeout:
        raise HookTimeout(f"{impl.plugin} returned after its {timeout:g}s limit")
    return answer


def _of_type(cls: type[T]) -> Callable[[Any], T]:
    """An ``accept`` for :meth:`TurnHooks._first` taking only instances of ``cls``."""

    def accept(answer: Any) -> T:
        if not isinstance(answer, cls):
            article = "a " + cls.__name__ if cls is not str else "a string"
            raise UsageError(f"expected {article}, got {type(answer).__name__}")
        return answer

    return accept


def _tool_list(answer: Any) -> tuple[ToolSpec, ...]:
    """An ``accept`` for ``pre_tool_list_finalized``: a list of tools in any shape."""
    if isinstance(answer, str | bytes | Mapping):
        raise UsageError(f"expected a list of tools, got {type(answer).__name__}")
    return tuple(shapes.to_spec(item) for item in answer)

