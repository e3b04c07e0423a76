"""What a small model may choose once it opens a tool call: pure functions, no llama.cpp.

:mod:`overt.models.local` constrains a call the model begins with a grammar built
from the offered tools' schemas. The parts of its :class:`~overt.models.local_policy.
LocalPolicy` that shape that choice are here:

- **No tool** (``no_tool_choice``). Asked to translate, to write, to approve or to
  delete, a small model opens a call anyway, and with no tool that does the thing it
  picks the nearest one by its words (``get_operational_state`` for "approve").
  :data:`NO_TOOL` is one more choice shown with the tools (never sent to the engine):
  a request that no offered tool serves. Chosen, the call is dropped and the reply is
  decoded with no tools; the system prompt says what the agent cannot do and the
  operator's own path. Whether a request is served is the model's to judge from the
  tools it is shown: nothing here reads the grammar of the sentence.
- **Ids it has seen** (``known_ids``). An argument that names a record by id (``id``,
  ``*_id``, a string) may only hold an id that appears in the conversation (a
  26-character ULID in a message or a tool result): the model cannot know any other,
  and a made-up one only earns a ``not_found``. A tool that requires such an id, with
  none in the conversation, is left out of the choice.
- **No guessed filters** (``no_guessed_filters``). An optional enum argument without a
  default (a filter whose absence means "all": ``node_search``'s ``kind`` and
  ``scope``) and an optional ``limit`` are left out of the call grammar; the models
  filled them with a guess that hid the node asked for.
- **An earlier answer's figure is no answer** (``fresh_figures``). A reply without a
  call that restates a figure of an earlier assistant answer (one no operator message
  holds) is dropped for a call (:func:`restates`); so is, in a follow-up, a reply
  stating a figure that no message holds (:func:`invents`).
- **A JSON fence is a call** (``json_fence_call``). A reply that opens with a fenced
  JSON block in a turn with tools is the model writing a tool's data instead of
  calling it; :func:`opens_json_fence` lets the decoder take it for a call.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from decimal import Decimal
from typing import Any

from overt.types import Message, ToolSpec

NO_TOOL = ToolSpec(
    name="no_tool",
    description=(
        "Choose this when none of the other tools gives or does what the operator asks: "
        "a greeting or thanks, writing, translating, explaining or working something out "
        "from what is already in the conversation, a question about the world outside "
        "this agent, or an action no other tool here performs (say then that you cannot "
        "do it from here). Never for a question another tool here answers."),
    input_schema={"type": "object", "properties": {}},
    read_only=True,
)
"""The choice of no tool (shown to the model only): chosen, the reply is decoded
again without tools."""

_ULID = re.compile(r"(?<![0-9A-Za-z])[0-9A-HJKMNP-TV-Z]{26}(?![0-9A-Za-z])")
_ID_ARG = re.compile(r"^(?:id|[a-z0-9_]+_id)$")
_FIGURE = re.compile(r"(?<![\w.])\d+(?:,\d{3})*(?:\.\d+)?(?![\w])")
_JSON_FENCE = re.compile(r"^\s*```[ \t]*(?:json|JSON)?[ \t]*\n\s*[\[{]")


def listing(tools: Sequence[ToolSpec], no_tool: bool = True) -> tuple[ToolSpec, ...]:
    """The tools as the model is shown them: as offered, then :data:`NO_TOOL` (with
    ``no_tool``). The order is the one the tools were offered in: reordering it
    (the tools that only read first) makes a small model call tools for greetings."""
    return (*tools, NO_TOOL) if no_tool else tuple(tools)


def ids_in(messages: Sequence[Message]) -> list[str]:
    """The record ids (ULIDs) the conversation holds, in order of first appearance."""
    seen: dict[str, None] = {}
    for message in messages:
        if message.role == "system":
            continue
        for match in _ULID.finditer(message.content or ""):
            seen.setdefault(match.group(0))
        for call in message.tool_calls or ():
            for value in call.arguments.values():
                if isinstance(value, str) and _ULID.fullmatch(value):
                    seen.setdefault(value)
    return list(seen)


def _id_args(schema: Mapping[str, Any]) -> list[str]:
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return []
    return [name for name, prop in properties.items()
            if _ID_ARG.match(name) and isinstance(prop, Mapping)
            and prop.get("type") == "string" and "enum" not in prop]


def _without_optional_filters(schema: Mapping[str, Any]) -> dict[str, Any]:
    """``schema`` less its optional enum arguments that have no default: a filter whose
    absence means "all" (``node_search``'s ``kind`` and ``scope``). The 0.5B and 1.5B
    models fill every such field with a guess (``kind: "Ticket"`` for a Note). An
    optional ``limit`` (a cap on results) goes too: the 1.5B model set ``limit: 1`` on
    its searches, and the one best match by its words ("hostname", "invoicing") was not
    the node asked for."""
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return dict(schema)
    required = set(schema.get("required") or ())
    kept = {name: prop for name, prop in properties.items()
            if name in required or (name != "limit" and (
                not isinstance(prop, Mapping) or "enum" not in prop or "default" in prop))}
    if len(kept) == len(properties):
        return dict(schema)
    return {**schema, "properties": kept, "additionalProperties": False}


def callable_tools(tools: Sequence[ToolSpec], ids: Sequence[str], *, known_ids: bool = True,
                   no_guessed_filters: bool = True,
                   fired: set[str] | None = None) -> list[ToolSpec]:
    """``tools`` as the call grammar offers them: with ``known_ids``, id arguments limited
    to ``ids`` and a tool that requires an id argument left out when ``ids`` is empty;
    with ``no_guessed_filters``, optional enum filters and ``limit`` left out. The name
    of each part that changed a tool goes into ``fired``."""
    out: list[ToolSpec] = []
    for spec in tools:
        schema = (_without_optional_filters(spec.input_schema) if no_guessed_filters
                  else dict(spec.input_schema))
        if schema != spec.input_schema and fired is not None:
            fired.add("no_guessed_filters")
        names = _id_args(schema) if known_ids else []
        if not names:
            out.append(spec if schema == spec.input_schema else
                       ToolSpec(spec.name, spec.description, schema, spec.read_only))
            continue
        if fired is not None:
            fired.add("known_ids")
        required = set(schema.get("required") or ())
        if not ids:
            if required & set(names):
                continue
            out.append(spec)
            continue
        properties = {k: dict(v) for k, v in schema["properties"].items()}
        for name in names:
            properties[name] = {k: v for k, v in properties[name].items()
                                if k not in ("type", "anyOf", "default")}
            properties[name]["enum"] = list(ids)
        schema["properties"] = properties
        out.append(ToolSpec(spec.name, spec.description, schema, spec.read_only))
    return out


def opens_json_fence(text: str) -> bool:
    """Whether ``text`` (the start of a reply) opens a fenced JSON object or list."""
    return bool(_JSON_FENCE.match(text))


def _figures(text: str) -> set[str]:
    out = set()
    for match in _FIGURE.finditer(text):
        value = Decimal(match.group(0).replace(",", ""))
        out.add(format(value.normalize(), "f"))
    return out


def stale_figures(messages: Sequence[Message]) -> frozenset[str]:
    """The figures of the assistant's earlier answers that no operator message holds:
    values read for an earlier question (``$0.0500`` spent today)."""
    said: set[str] = set()
    written: set[str] = set()
    for message in messages:
        if message.role == "assistant":
            said |= _figures(message.content or "")
        elif message.role == "user":
            written |= _figures(message.content or "")
    return frozenset(said - written)


def restates(text: str, stale: Collection[str]) -> bool:
    """Whether a reply states one of the ``stale`` figures: it answers a new question
    with an earlier answer's value ("and over the last 7 days?" - "$0.0500"), where a
    tool would give the value asked for."""
    return bool(stale) and not _figures(text).isdisjoint(stale)


def follow_up_figures(messages: Sequence[Message]) -> frozenset[str] | None:
    """In a follow-up (an assistant answer with text comes before the operator's last
    message), every figure of the operator's and the assistant's messages; else None."""
    last = max((i for i, m in enumerate(messages) if m.role == "user"), default=-1)
    if not any(m.role == "assistant" and (m.content or "").strip() for m in messages[:last]):
        return None
    out: set[str] = set()
    for message in messages:
        if message.role in ("user", "assistant"):
            out |= _figures(message.content or "")
    return frozenset(out)


def invents(text: str, said: Collection[str] | None) -> bool:
    """Whether a reply in a follow-up (``said``: :func:`follow_up_figures`) states a
    figure that no message holds: a new quantity of the same period ("How many tokens
    was that?") answered from nothing, where a tool would give it."""
    return said is not None and not _figures(text) <= set(said)
