"""Every hook overt calls, in one file: when it fires, what it gets, what it may answer.

Plugins implement these with ``@overt.hooks.hookimpl`` (pluggy, project name
``overt``); an implementation may take any subset of a hook's arguments, by name.

Rules that hold for every hook:

- **Who runs.** Only plugins listed in ``plugins.enabled`` (and not in
  ``plugins.disabled``) plus overt's built-in plugin. Implementations are called
  in the order ``plugins.enabled`` lists their plugins (pluggy's ``tryfirst`` /
  ``trylast`` still apply); the built-in plugin comes last.
- **Sync or async.** An implementation may be ``def`` or ``async def``; overt
  calls it on the event loop and awaits what it returns when that is
  awaitable. A ``def`` implementation runs on the loop thread, so it must be
  quick: anything that waits (network, disk, a subprocess) belongs in an
  ``async def``, where overt can also cancel it at a timeout. ``register_tools``
  and ``register_models`` run at start-up, outside the loop, and must be ``def``.
- **One plugin at a time.** overt calls each implementation itself rather than
  through pluggy's multicall, so that one plugin's failure is attributed to it,
  recorded, and does not stop the others; and so the ledger can name the plugin
  that blocked, provided, rewrote or reissued. ``firstresult=True`` below marks
  the hooks where the first non-None answer wins and later plugins are not asked.
  Hook wrappers (``wrapper=True``, ``hookwrapper=True``) are refused at
  registration: they could change an answer without it being attributed.
- **Failure.** An implementation that raises (or, where a timeout applies, runs
  past it) is recorded as a ``hook.error`` entry (plugin, hook, exception type,
  what overt did; the message only in the content tier) and logged without its
  message. What overt then does is said per hook; everywhere but
  ``pre_tool_call`` the answer is skipped and the next plugin is asked
  (fail-safe). ``pre_tool_call`` fails closed: the call is blocked.
- **On the record.** Every hook that changes what happens says so in the ledger:
  ``hook.blocked``, ``hook.provided``, ``hook.declined``, ``hook.request_rewritten``,
  ``hook.tools_narrowed``, ``hook.reissued``, ``hook.transformed``. Those entries
  hold identifiers and digests, never message text or tool arguments.

``task_id`` is the turn's id (``turn_id`` in the ledger); ``session_id`` is the
session's. Treat what a hook receives as read-only and answer instead: requests,
responses, specs and events are frozen values, and ``args`` is a copy of the
call's arguments (changing it does not change what runs or what is recorded),
but nested dicts and JSON schemas are shared, not copied.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from overt.events import Event
    from overt.hooks.answers import Block, Reissue
    from overt.models.base import Model
    from overt.models.resolve import ModelProvider
    from overt.tools.base import Tool
    from overt.types import ModelRequest, ModelResponse, ToolSpec

PROJECT = "overt"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec(firstresult=True)
def pre_api_request(request: ModelRequest, route: str, model: str, iteration: int,
                    task_id: str, session_id: str) -> ModelRequest | None:
    """Before every request to a model (a reissued one too): may replace the request.

    Args:
        request: what the model is about to be asked (messages, tools, limits).
        route: the engine's route name. model: the name of the model asked.
        iteration: the loop iteration (0 for the turn's first model call).

    Returns a :class:`~overt.types.ModelRequest` to send instead, or None. The
    first non-None answer wins. A rewrite is recorded as
    ``hook.request_rewritten`` (message counts and tool names before and after).
    An answer that is not a ``ModelRequest``, or an implementation that raises,
    is recorded as ``hook.error`` and the next plugin is asked.
    """


@hookspec(firstresult=True)
def pre_tool_list_finalized(tools: list[ToolSpec], route: str, task_id: str,
                            session_id: str) -> Sequence[ToolSpec | Mapping[str, Any]] | None:
    """Once per turn, before the first model call: may narrow or extend the tools offered.

    Args:
        tools: the registry's tools, as specs.

    Returns the tools to offer this turn, or None. Items are
    :class:`~overt.types.ToolSpec` values or descriptors in the Anthropic or
    OpenAI shape (see :mod:`overt.tools.shapes`). A tool added here that the
    registry cannot dispatch is answered only if a plugin provides its result.
    The first non-None answer wins; a change is recorded as
    ``hook.tools_narrowed`` (names before and after), and the system prompt
    lists the tools as changed. A malformed answer, or an implementation that
    raises, is recorded as ``hook.error`` and the next plugin is asked.
    """


@hookspec
def post_api_request(request: ModelRequest, response: ModelResponse, model: str,
                     iteration: int, reissued: bool, route: str, task_id: str,
                     session_id: str) -> None:
    """After the model answered, once per loop iteration: an observer.

    Sees the final response only: when ``post_llm_call_can_reissue`` had the
    call made again, ``response`` is the reissued answer, ``request`` the
    request that produced it, ``model`` the model that gave it and ``reissued``
    is true. Not called when the model failed. Every implementation is called;
    what they return is ignored; one that raises is recorded as ``hook.error``.
    """


@hookspec(firstresult=True)
def post_llm_call_can_reissue(request: ModelRequest, response: ModelResponse,
                              iteration: int, model: str, route: str, task_id: str,
                              session_id: str) -> Reissue | None:
    """After a model answered: may have the same call made again, once.

    Returns a :class:`~overt.hooks.Reissue` (another model, extra context) or
    None. The first non-None answer wins, later plugins are not asked, and the
    reissued answer is not offered to this hook again: at most one reissue per
    loop iteration, however many plugins would answer. The reissue goes through
    ``pre_api_request`` like any request, is recorded as ``hook.reissued`` and
    as its own ``inference`` entry (``escalated`` true). If the named model is
    unknown or the reissued call fails, the first answer stands (recorded). A
    malformed answer, or an implementation that raises, is recorded as
    ``hook.error`` and the next plugin is asked.
    """


@hookspec(firstresult=True)
def transform_llm_output(text: str, model: str, task_id: str,
                         session_id: str) -> str | None:
    """Before the model's final answer is returned: may replace its text.

    The first returned string replaces the text (recorded as
    ``hook.transformed`` with both bodies' digests). A non-string answer, or an
    implementation that raises, is recorded as ``hook.error`` and the next
    plugin is asked.
    """


@hookspec(firstresult=True)
def pre_tool_call(tool_name: str, args: dict[str, Any], task_id: str, session_id: str,
                  tool_call_id: str) -> Block | str | None:
    """Before a tool call runs (after the cap, malformed and unknown-tool checks): a block-check.

    Returns None to let the call go on, or a :class:`~overt.hooks.Block`
    (a plain string is shorthand for ``Block("blocked", that_string)``). The
    first block wins. A blocked call is not executed and is recorded as tool
    status ``not_allowed`` with the block's reason code, beside a
    ``hook.blocked`` entry naming the plugin; the model reads the message.

    Fails closed: an implementation that raises, answers anything else, or runs
    past its timeout (``pre_tool_call_timeout_s``, default 5 s) blocks the call,
    recorded as ``hook.error`` (consequence ``blocked``) and reason code
    ``hook_error`` or ``hook_timeout``. An ``async def`` implementation is
    cancelled at the timeout; a ``def`` one cannot be interrupted, so one that
    returns late is treated as timed out.
    """


@hookspec(firstresult=True)
def pre_tool_call_can_provide_result(tool_name: str, args: dict[str, Any], task_id: str,
                                     session_id: str,
                                     tool_call_id: str) -> Mapping[str, Any] | None:
    """After ``pre_tool_call`` let the call go on, before registry dispatch: may answer it.

    ``{"result": "<str>"}`` short-circuits dispatch: the registry's tool is not
    run and the string is the tool's result (a non-string value is rendered as
    a tool's return value would be; ``"is_error": true`` marks it an error the
    model reads). ``None``, a non-dict, or a dict without ``"result"`` falls
    through to the next plugin, then to the registry. The first result wins.

    The call is audited like any other (``tool_call.started`` is committed
    before this hook runs, then ``tool_call.completed``) with the plugin's name
    as ``provided_by``, beside a ``hook.provided`` entry. ``None`` or a dict
    without ``"result"`` is this plugin's "nothing to provide": recorded as a
    ``hook.declined`` entry, not an error. Fails safe: an implementation that
    raises or runs past the tool timeout is logged at DEBUG, recorded as
    ``hook.error`` (consequence ``fell_through``) and the next plugin is asked.
    An answer that is neither ``None`` nor a dict is recorded the same way.
    """


@hookspec
def post_tool_call(tool_name: str, args: dict[str, Any], result: str, status: str,
                   is_error: bool, duration_ms: float, provided_by: str | None,
                   task_id: str, session_id: str, tool_call_id: str) -> None:
    """After a tool call ran or was provided: an observer.

    Fires the same way on both paths (``provided_by`` names the plugin on the
    provided one, None after dispatch), including a call that failed or timed
    out; not for a call that was refused or blocked before running. Order per
    call: ``pre_tool_call -> pre_tool_call_can_provide_result -> (dispatch) ->
    post_tool_call -> transform_tool_result``. Every implementation is called;
    one that raises is recorded as ``hook.error``.
    """


@hookspec(firstresult=True)
def transform_tool_result(tool_name: str, args: dict[str, Any], result: str, status: str,
                          provided_by: str | None, task_id: str, session_id: str,
                          tool_call_id: str) -> str | None:
    """After ``post_tool_call``: may replace the result text the model reads.

    The first returned string replaces it. The ``tool_call.completed`` entry
    keeps the digest of what the tool (or provider) returned; a
    ``hook.transformed`` entry adds the digest of what the model read instead.
    A non-string answer, or an implementation that raises, is recorded as
    ``hook.error`` and the next plugin is asked.
    """


@hookspec
def register_tools() -> Iterable[Tool | ToolSpec | Mapping[str, Any]] | None:
    """At start-up: the tools a plugin adds (overt's built-in tools arrive this way too).

    Returns :class:`~overt.tools.Tool` values (``@tool`` functions) and, for
    tools whose results the plugin provides itself, specs or descriptors in
    either shape. Tools register in plugin order, built-ins first. A plugin
    that raises, returns something else, or names a tool already registered
    adds no tools at all; that is recorded as ``hook.error`` (consequence
    ``no_tools``) when the runtime starts, and the runtime runs without them.
    """


@hookspec
def register_models() -> Iterable[Model | ModelProvider] | None:
    """At start-up: models (by ``name``) and model providers (by spec scheme) a plugin adds.

    overt's ``local`` and ``scripted`` schemes arrive this way from the built-in
    plugin. Models named here can be used as the runtime's model and as a
    ``Reissue`` target. A plugin that raises or returns something else adds no
    models; recorded as ``hook.error`` (consequence ``no_models``).
    """


@hookspec
def on_event(event: Event) -> None:
    """After each batch of a turn's events is committed: sees every event, in order.

    Events are the typed values of :mod:`overt.events` (identifiers and digests
    only). Called once the events are on the record, never before. Every
    implementation is called; one that raises is logged and recorded as
    ``hook.error`` (but a failure on a ``hook.error`` event is only logged, so
    a broken observer cannot feed itself).
    """


HOOK_NAMES: tuple[str, ...] = (
    "pre_api_request", "pre_tool_list_finalized", "post_api_request",
    "post_llm_call_can_reissue", "transform_llm_output", "pre_tool_call",
    "pre_tool_call_can_provide_result", "post_tool_call", "transform_tool_result",
    "register_tools", "register_models", "on_event",
)
"""Every hook, in the order they are documented here."""
