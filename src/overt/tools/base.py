"""``@tool``: a function becomes a tool a model can call.

The JSON schema comes from the type hints (through pydantic) and the
docstring: its first paragraph is the description, and an ``Args:`` section
describes each parameter. Arguments are validated before the call; an unknown
or ill-typed argument raises :class:`~overt.errors.ToolArgumentError` (a
``TypeError``) without running the function.

A parameter annotated :class:`ToolContext` is not part of the schema: the
engine passes the turn's context in (the ledger, the turn and session ids).

Sync functions run in a worker thread so the per-tool timeout can apply and
the event loop keeps going; ``inline=True`` runs a sync function on the loop
for trivially fast work (no timeout can interrupt it then).
"""

from __future__ import annotations

import asyncio
import inspect
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, get_type_hints, overload

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from overt.errors import ToolArgumentError, UsageError
from overt.policy.actors import Actor
from overt.policy.capabilities import Capabilities
from overt.types import ToolSpec

if TYPE_CHECKING:
    from overt.ledger.base import Ledger

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]{0,63}$")


@dataclass(frozen=True, slots=True)
class ToolContext:
    """What a tool may know about the turn that calls it.

    ``actor`` is who the call acts as (the agent on the turn's route, or the
    actor of a direct call); ``capabilities`` answers finer checks a tool makes
    itself (reading another actor's memory), which it records. Who the answer is
    for, the actor that sent the turn's message, is on the record:
    :func:`overt.tools.asker.asker` reads it, with what that actor may read.
    """

    ledger: Ledger
    turn_id: str
    session_id: str
    source: str
    caller_session_id: str
    tool_call_id: str
    runtime_started_at: str
    actor: Actor = field(default_factory=lambda: Actor("agent", "default"))
    capabilities: Capabilities = field(default_factory=lambda: Capabilities())


class _Arguments(BaseModel):
    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)


def _parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """(description, {param: description}) from a Google-style docstring."""
    if not doc:
        return "", {}
    text = inspect.cleandoc(doc)
    sections = re.split(r"\n\s*\n", text)
    description = " ".join(sections[0].split())
    params: dict[str, str] = {}
    in_args = False
    current: str | None = None
    for line in text.splitlines():
        stripped = line.strip()
        if stripped in ("Args:", "Arguments:", "Parameters:"):
            in_args = True
            continue
        if in_args:
            if stripped.endswith(":") and not line.startswith(" "):
                break  # next section (Returns:, Raises:)
            match = re.match(r"^\s{2,}(\w+)\s*(\([^)]*\))?\s*:\s*(.*)$", line)
            if match:
                current = match.group(1)
                params[current] = match.group(3).strip()
            elif current and stripped:
                params[current] += " " + stripped
    return description, params


@dataclass(frozen=True, slots=True)
class Tool:
    """A callable tool with its schema and its rules."""

    name: str
    description: str
    function: Callable[..., Any]
    arguments_model: type[BaseModel]
    input_schema: Mapping[str, Any]
    read_only: bool
    capability: str | None
    timeout_s: float | None
    context_param: str | None
    is_async: bool
    inline: bool
    idempotent: bool = False
    """Running it twice with the same arguments does no more than once: an approved
    call of it whose process died before its result is run again by
    ``approvals resume`` (any other tool is held for the operator instead)."""

    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(self.name, self.description, self.input_schema, self.read_only)

    def validate(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Validated keyword arguments for the function.

        Raises:
            ToolArgumentError: an argument is unknown, missing or of the wrong type.
        """
        if not isinstance(arguments, Mapping):
            raise ToolArgumentError(
                f"{self.name}() arguments must be an object, got {type(arguments).__name__}")
        try:
            model = self.arguments_model.model_validate(dict(arguments))
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or '(arguments)'}: {e['msg']}"
                for e in exc.errors(include_input=False, include_url=False)
            )
            raise ToolArgumentError(f"{self.name}() {problems}") from None
        return {name: getattr(model, name) for name in type(model).model_fields}

    async def run(self, arguments: Mapping[str, Any], context: ToolContext | None) -> Any:
        """Validate ``arguments`` and call the function (in a thread if it is sync).

        Raises:
            ToolArgumentError: the arguments are invalid; the function was not called.
            Exception: whatever the function raises.
        """
        kwargs = self.validate(arguments)
        if self.context_param is not None:
            kwargs[self.context_param] = context
        if self.is_async:
            return await self.function(**kwargs)
        if self.inline:
            return self.function(**kwargs)
        return await asyncio.to_thread(self.function, **kwargs)


def make_tool(function: Callable[..., Any], *, name: str | None = None,
              description: str | None = None, read_only: bool = False,
              capability: str | None = None, timeout_s: float | None = 30.0,
              inline: bool = False, idempotent: bool = False) -> Tool:
    """Build a :class:`Tool` from a function.

    Raises:
        UsageError: the name is not a valid tool name, or a parameter has no type hint.
    """
    tool_name = name or function.__name__
    if not _NAME.match(tool_name):
        raise UsageError(f"invalid tool name {tool_name!r}: letters, digits, _ and -, max 64")
    doc_description, param_docs = _parse_docstring(function.__doc__)
    hints = get_type_hints(function)
    fields: dict[str, Any] = {}
    context_param = None
    for param in inspect.signature(function).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise UsageError(f"tool {tool_name}: *args and **kwargs are not allowed")
        annotation = hints.get(param.name)
        if annotation is None:
            raise UsageError(f"tool {tool_name}: parameter {param.name!r} needs a type hint")
        if annotation is ToolContext:
            context_param = param.name
            continue
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[param.name] = (annotation, Field(default, description=param_docs.get(param.name)))
    model = create_model(f"{tool_name}_arguments", __base__=_Arguments, **fields)
    schema = model.model_json_schema()
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)
    schema.setdefault("properties", {})
    return Tool(
        name=tool_name,
        description=description or doc_description or tool_name,
        function=function,
        arguments_model=model,
        input_schema=schema,
        read_only=read_only,
        capability=capability,
        timeout_s=timeout_s,
        context_param=context_param,
        is_async=inspect.iscoroutinefunction(function),
        inline=inline,
        idempotent=idempotent,
    )


@overload
def tool(function: Callable[..., Any], /) -> Tool: ...


@overload
def tool(*, name: str | None = None, description: str | None = None, read_only: bool = False,
         capability: str | None = None, timeout_s: float | None = 30.0,
         inline: bool = False, idempotent: bool = False
         ) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(function: Callable[..., Any] | None = None, /, *, name: str | None = None,
         description: str | None = None, read_only: bool = False,
         capability: str | None = None, timeout_s: float | None = 30.0,
         inline: bool = False, idempotent: bool = False
         ) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a function a tool: ``@tool`` or ``@tool(read_only=True, capability="x")``.

    Raises:
        UsageError: see :func:`make_tool`.
    """
    if function is not None:
        return make_tool(function)

    def wrap(fn: Callable[..., Any]) -> Tool:
        return make_tool(fn, name=name, description=description, read_only=read_only,
                         capability=capability, timeout_s=timeout_s, inline=inline,
                         idempotent=idempotent)

    return wrap
