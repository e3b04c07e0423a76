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
from collections.abc import Callable, Mapping
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
    """Await an ``async def`` implementation, cancelled at ``timeout``
    (:func:`asyncio.timeout`). A ``def`` implementation cannot be interrupted:
    callers measure it instead, and one that returns after ``timeout`` counts as
    timed out.

    Raises:
        HookTimeout: it did not finish within ``timeout``.
        Exception: whatever the implementation raises.
    """
    coro = impl.function(*impl.pick(kwargs))
    if timeout is None:
        return await coro
    deadline = asyncio.timeout(timeout)
    try:
        async with deadline:
            return await coro
    except TimeoutError:
        if deadline.expired():
            raise HookTimeout(f"{impl.plugin} did not finish within {timeout:g}s") from None
        raise
