"""What a small model may choose once it opens a tool call: pure functions, no llama.cpp.

:mod:`overt.models.local` constrains a call the 0.5B model begins with a grammar
built from the offered tools' schemas. Three things shape that choice here:

- **Declining.** Asked to approve, delete, pause, post or raise a budget, the
  0.5B model opens a call 82-96% of the time, and with no tool that does the
  thing it picks the nearest one by its words (``get_operational_state`` for
  "approve", ``node_history`` for "delete"). :data:`DECLINE` is one more choice
  shown with the tools (never sent to the engine): a request for an action no
  offered tool performs. Chosen, the call is dropped and the reply, decoded
  without tools, begins with :func:`decline_opening` ("I cannot do that from
  here."); the model goes on from it (the system prompt names the operator's
  own path).
- **Ids it has seen.** An argument that names a record by id (``id``,
  ``*_id``, a string) may only hold an id that appears in the conversation (a
  26-character ULID in a message or a tool result): the model cannot know any
  other, and a made-up one (``"last_week"``, ``"1234567890"``) only earns a
  ``not_found``. A tool that requires such an id, with none in the
  conversation, is left out of the choice.
- **An earlier answer's figure is no answer.** Asked "and over the last 7
  days?" after "today you spent $0.0500", the model answers "$0.0500" again
  (call probability below 0.1%). A reply without a call that restates a figure
  of an earlier assistant answer (one no operator message holds) is dropped
  for a call (:func:`restates`). So is, in a follow-up, a reply stating a figure
  that no message holds (:func:`invents`): asked "How many tokens was that?"
  after "$0.0920 this week", the 1.5B model answered "That was 1 token."
- **No guessed filters.** An optional enum argument without a default (a filter
  whose absence means "all": ``node_search``'s ``kind`` and ``scope``) is left out
  of the call grammar; the models filled it with a guess that hid the node asked for.
- **A question is never declined, and only reads.** The 0.5B model picks
  :data:`DECLINE` for "How many approvals are waiting for me?" as surely as for
  "Approve the deploy" (its description says a question is never this; the
  model does not follow it), and answered "What's the staging database host?"
  by writing a node with a made-up body. The decline and the tools that change
  something are offered in the grammar only when the operator's last message
  gives an order rather than asks (:func:`asks`); a question goes to a tool that
  reads. The listing is unchanged, so the cached prompt is the same.
- **A JSON fence is a call.** A reply that opens with a fenced JSON block in a
  turn with tools is the model writing a tool's data instead of calling it
  (it made up a usage table); :func:`opens_json_fence` lets the decoder take it
  for the opening of a call.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from decimal import Decimal
from typing import Any

from overt.types import Message, ToolSpec

DECLINE = ToolSpec(
    name="cannot_do",
    description=(
        "Only when the operator tells you to do something that no other tool here does: "
        "approve or deny a pending request, delete or prune records, pause or stop "
        "yourself, send an email or post a message, restart or change another system, "
        "change a setting or a budget. A question (how many approvals are waiting, what "
        "was spent, what is remembered) is never this: it goes to its tool."),
    input_schema={"type": "object", "properties": {}},
    read_only=True,
)
"""The choice of no tool for an action the agent cannot take (shown to the model only)."""

REPLY = ToolSpec(
    name="reply",
    description=(
        "Answer in words alone, when nothing is to be done but this answer: a greeting "
        "or thanks, writing, translating or rewriting text, arithmetic on numbers the "
        "operator gave, explaining a general idea, or a question about the outside world "
        "(the web, news, weather, prices) that no tool here can see. Never for an order "
        "to do something (send, post, restart, approve, delete, change)."),
    input_schema={"type": "object", "properties": {}},
    read_only=True,
)
"""The choice of no tool for what needs none (shown to the model only). The models open
a call for most messages, whatever they ask: for a greeting the 1.5B model called
``get_operational_state``, for "What is 12% of 250?" ``get_usage``, for "Translate
..." ``node_create``. Chosen, the reply is decoded without tools."""

CHOICES = (DECLINE.name, REPLY.name)
"""The names of the choices that are not tools (never sent to the engine)."""

_OPENING = {"ja": "それはここからはできません。", "en": "I cannot do that from here."}
_JAPANESE = re.compile(r"[\u3040-\u30ff\u4e00-\u9fff]")

_ULID = re.compile(r"(?<![0-9A-Za-z])[0-9A-HJKMNP-TV-Z]{26}(?![0-9A-Za-z])")
_ID_ARG = re.compile(r"^(?:id|[a-z0-9_]+_id)$")
_FIGURE = re.compile(r"(?<![\w.])\d+(?:,\d{3})*(?:\.\d+)?(?![\w])")
_JSON_FENCE = re.compile(r"^\s*```[ \t]*(?:json|JSON)?[ \t]*\n\s*[\[{]")


def listing(tools: Sequence[ToolSpec], decline: bool = True) -> tuple[ToolSpec, ...]:
    """The tools as the model is shown them: as offered, then :data:`DECLINE` and
    :data:`REPLY` (with ``decline``). The order is the one the tools were offered in:
    reordering it (the tools that only read first) makes a small model call tools for
    greetings."""
    return (*tools, DECLINE, REPLY) if decline else tuple(tools)


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


def callable_tools(tools: Sequence[ToolSpec], ids: Sequence[str]) -> list[ToolSpec]:
    """``tools`` as the call grammar offers them: id arguments limited to ``ids``; a tool
    that requires an id argument left out when ``ids`` is empty."""
    out: list[ToolSpec] = []
    for spec in tools:
        schema = _without_optional_filters(spec.input_schema)
        names = _id_args(schema)
        if not names:
            out.append(spec if schema == spec.input_schema else
                       ToolSpec(spec.name, spec.description, schema, spec.read_only))
            continue
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


_REQUEST_EN = re.compile(
    r"^(?:please|pls|kindly|go ahead|(?:can|could|would|will) (?:you|u)\b)", re.I)
_QUESTION_EN = re.compile(
    r"^(?:how|what|what's|whats|which|who|whom|whose|when|where|why|is|are|was|were|"
    r"do|does|did|has|have|had|any|anything|am)\b", re.I)
_REQUEST_JA = re.compile(
    r"(?:して|して下さい|してください|しておいて|しといて|してくれ|してくれる|してくれますか|"
    r"してもらえる|してもらえますか|しろ|せよ|ください|下さい|てほしい|て欲しい)[。！!？?\s]*$")
_INFO_EN = re.compile(
    r"^(?:show|tell|list|give me|break|summari[sz]e|explain|describe|remind me|look up|"
    r"find|search|check)\b", re.I)
_INFO_JA = re.compile(r"(?:教えて|見せて|説明して|調べて|探して|確認して)")
_QUESTION_JA = re.compile(
    r"(?:か|かな|の|ですか|ますか|でしょうか|何|いつ|どこ|どれ|誰)[。？?\s]*$")


def asks(messages: Sequence[Message]) -> bool:
    """Whether the operator's last message asks for information rather than gives
    an order: a question ("How many approvals are waiting?", "承認待ちは何件？") or
    a request to be shown something ("Show me ...", "教えて") is answered from a
    tool, never declined. A polite request to act ("Can you approve it?",
    "承認してくれますか？") is an order."""
    text = _operator_text(messages).strip()
    if not text:
        return False
    if _INFO_EN.match(text) or _INFO_JA.search(text):  # "show me ...", "教えて"
        return True
    if _REQUEST_EN.match(text) or _REQUEST_JA.search(text):
        return False
    return (text.endswith(("?", "？")) or bool(_QUESTION_EN.match(text))
            or bool(_QUESTION_JA.search(text)))


def choosable(shown: Sequence[ToolSpec], messages: Sequence[Message]) -> list[ToolSpec]:
    """The listed tools the model may call now: for a question, only the tools that
    read and :data:`REPLY` (never :data:`DECLINE`, never a tool that writes or changes
    something); for an order, all of them. Asked "What's the staging database host?", the 0.5B
    model wrote a node with a made-up body instead of searching for it."""
    if not asks(messages):
        return list(shown)
    return [t for t in shown if t.read_only and t.name != DECLINE.name]


def opens_json_fence(text: str) -> bool:
    """Whether ``text`` (the start of a reply) opens a fenced JSON object or list."""
    return bool(_JSON_FENCE.match(text))


def decline_opening(messages: Sequence[Message]) -> str:
    """How the reply to a declined request begins, in the operator's language (Japanese
    when the last message holds kana or kanji, else English); the model goes on from it
    (with the system prompt naming the operator's own path)."""
    return _OPENING["ja" if _JAPANESE.search(_operator_text(messages)) else "en"]


def _operator_text(messages: Sequence[Message]) -> str:
    """The text of the operator's last message ("" when there is none)."""
    return next((m.content for m in reversed(messages) if m.role == "user"), "") or ""


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


def unsourced(text: str, messages: Sequence[Message]) -> bool:
    """Whether ``text``, a reply given with no tool (:data:`REPLY`), states a figure
    that no message of the conversation holds while the operator's last message gives
    no number to work from: a value answered from nothing ("you spent $0.50 the day
    before"), where only a tool could give it. Arithmetic on the operator's own numbers
    ("12% of 250") is not from nothing."""
    figures = _figures(text)
    if not figures or _figures(_operator_text(messages)):
        return False
    held: set[str] = set()
    for message in messages:
        if message.role != "system":
            held |= _figures(message.content or "")
    return not figures <= held


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
