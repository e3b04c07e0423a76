"""The enabled implementations of each hook, and how one of them is called.

A :class:`HookSet` is a snapshot taken when plugins change: for each hook, a
tuple of :class:`Impl` in call order. An empty tuple is how the engine knows to
skip a hook at no cost (one attribute read), so a runtime with no plugin
implementing a hook pays nothing for it.
"""

from __future__ import annotations

import asyncio
import inspect
import operator
import time
from collections.abc import Callable, Coroutine, Generator, Mapping
from dataclasses import dataclass
from typing import Any

from overt.errors import HookTimeout
from overt.hooks.specs import HOOK_NAMES


@dataclass(frozen=True, slots=True)
class Impl:
    """One plugin's implementation of one hook.

    Call it as ``impl.function(*impl.pick(kwargs))`` (it takes the arguments it
    names, in its order), then await the answer when ``is_async``.
    """

    plugin: str
    function: Callable[..., Any]
    argnames: tuple[str, ...]
    is_async: bool
    pick: Callable[[Mapping[str, Any]], tuple[Any, ...]]

    @classmethod
    def of(cls, plugin: str, function: Callable[..., Any], argnames: tuple[str, ...]) -> Impl:
        return cls(plugin, function, argnames, inspect.iscoroutinefunction(function),
                   _picker(argnames))


def _picker(names: tuple[str, ...]) -> Callable[[Mapping[str, Any]], tuple[Any, ...]]:
    if len(names) >= 2:
        return operator.itemgetter(*names)
    if names:
        name = names[0]
        return lambda kwargs: (kwargs[name],)
    return lambda kwargs: ()


DEFAULT_TIMEOUTS: Mapping[str, float | None] = {"pre_tool_call": 5.0}
"""``pre_tool_call_can_provide_result`` has the engine's tool timeout unless set here."""


class HookSet:
    """Per hook, the implementations to call, in order (an empty tuple: skip the hook).

    ``timeouts`` holds the time limit, in seconds, of hooks that have one
    (``pre_tool_call``, ``pre_tool_call_can_provide_result``).
    """

    __slots__ = (*HOOK_NAMES, "per_turn", "timeouts")

    pre_api_request: tuple[Impl, ...]
    pre_tool_list_finalized: tuple[Impl, ...]
    post_api_request: tuple[Impl, ...]
    post_llm_call_can_reissue: tuple[Impl, ...]
    transform_llm_output: tuple[Impl, ...]
    pre_tool_call: tuple[Impl, ...]
    pre_tool_call_can_provide_result: tuple[Impl, ...]
    post_tool_call: tuple[Impl, ...]
    transform_tool_result: tuple[Impl, ...]
    register_tools: tuple[Impl, ...]
    register_models: tuple[Impl, ...]
    on_event: tuple[Impl, ...]

    def __init__(self, impls: Mapping[str, tuple[Impl, ...]] | None = None,
                 timeouts: Mapping[str, float | None] | None = None) -> None:
        impls = impls or {}
        for name in HOOK_NAMES:
            setattr(self, name, tuple(impls.get(name, ())))
        self.timeouts: dict[str, float | None] = {**DEFAULT_TIMEOUTS, **(timeouts or {})}
        self.per_turn = any(getattr(self, name) for name in HOOK_NAMES
                            if name not in ("register_tools", "register_models", "on_event"))
        """Whether any hook the engine calls during a turn has an implementation."""

    def names(self) -> list[str]:
        """The hooks that have at least one implementation."""
        return [name for name in HOOK_NAMES if getattr(self, name)]


NO_HOOKS = HookSet()


async def call(impl: Impl, kwargs: Mapping[str, Any]) -> Any:
    """Call ``impl`` with the arguments it names; await the answer if it is ``async def``.

    (The engine's hot loops inline this to spare a coroutine per call.)
    """
    answer = impl.function(*impl.pick(kwargs))
    if impl.is_async:
        answer = await answer
    return answer


async def call_async_timed(impl: Impl, kwargs: Mapping[str, Any],
                           timeout: float | None) -> Any:
    """Await an ``async def`` implementation, cancelled at ``timeout``.

    Its first step runs as ``await`` would run it; only if it then waits does
    a timer start (so one that never waits costs no timer). A ``def``
    implementation cannot be interrupted: callers measure it instead, and one
    that returns after ``timeout`` counts as timed out.

    Raises:
        HookTimeout: it did not finish within ``timeout``.
        Exception: whatever the implementation raises.
    """
    coro = impl.function(*impl.pick(kwargs))
    if timeout is None:
        return await coro
    started = time.perf_counter()
    try:
        first = coro.send(None)
    except StopIteration as stop:
        if time.perf_counter() - started > timeout:
            raise HookTimeout(f"{impl.plugin} returned after its {timeout:g}s limit") from None
        return stop.value
    deadline = asyncio.timeout(max(0.0, timeout - (time.perf_counter() - started)))
    try:
        async with deadline:
            return await _Rest(coro, first)
    except TimeoutError:
        if deadline.expired():
            raise HookTimeout(f"{impl.plugin} did not finish within {timeout:g}s") from None
        raise


class _Rest:
    """The rest of a coroutine that waited on its first step, awaited as ``await`` would.

    Passes what the coroutine waits on up to the task, and what the task sends
    or throws (a cancellation at the deadline) down to the coroutine.
    """

    __slots__ = ("_coro", "_first")

    def __init__(self, coro: Coroutine[Any, Any, Any], first: Any) -> None:
        self._coro = coro
        self._first = first

    def __await__(self) -> Generator[Any, Any, Any]:
        coro, out = self._coro, self._first
        while True:
            try:
                sent = yield out
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as exc:  # noqa: BLE001  thrown in by the task: passed down
                try:
                    out = coro.throw(exc)
                except StopIteration as stop:
                    return stop.value
            else:
                try:
                    out = coro.send(sent)
                except StopIteration as stop:
                    return stop.value
