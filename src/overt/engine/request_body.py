"""The request as sent, as the content tier keeps it: one body per inference, its
repeating parts stored once.

A request body (canonical JSON, under the inference's ``request_digest``)::

    {"v": 1,
     "messages": DIGEST,              the head of the message chain (below)
     "tools": DIGEST | null,          the tools offered: a part listing each tool
                                      schema's digest, in order (each schema a part)
     "max_output_tokens": N,
     "sent": PACKED}                  the adapter's own payload (its wire form), packed

(a key whose value would be null is left out).

The messages are a hash-linked chain: each message is one part
``{"p": DIGEST, "m": {...}}`` naming the part before it (none for the first), so two
requests that begin alike (every request of a session, each turn adding its messages
to the last) share the parts they begin with, and a 200-turn session stores each
message once, not once per request. Inside a part, a message's text is under
``text`` when short, else its digest under ``content`` (the body the turn stored
anyway: the operator's text, the tool result). Two requests
with the same messages have the same head digest, which is what replay compares first.
When a history window has moved on, the body's ``skip`` (left out when 0) says how
many messages after the first (the system prompt) the chain holds that the request
left out, so the chain of a long conversation is linked once, not again at each step
of its window.

The adapter's payload is packed the same way (:func:`pack`): its ``messages`` list
as a chain, its ``tools`` list one part per tool, ``system`` and any long string a
part of its own, ``{"$part": DIGEST}`` (a string) or ``{"$json": DIGEST}`` (a tool)
where it stood. :func:`unpack` gives back
exactly what was sent.

``store`` is how a part reaches the content tier: :meth:`overt.engine.record.Recorder.part`
adds it to the turn's next commit unless this engine has committed it before
(:class:`overt.engine.record.PartStore`).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol

from overt.engine.record import jsonable
from overt.ledger.canonical import canonical_json, digest_text
from overt.ledger.chain import clean_text
from overt.types import Message, ModelRequest, ToolSpec

BODY_VERSION = 1
LONG = 64
"""Strings of the adapter's payload longer than this are parts of their own."""
SHORT = 64
"""A message's text up to this long is kept in its chain part, not by digest."""
PART = "$part"
JSON_PART = "$json"

class Store(Protocol):
    """Keeps a part's text for the content tier; its digest (``digest``: the text's,
    already known)."""

    def __call__(self, body: str, digest: str | None = None, /) -> str: ...


def message_form(message: Message, store: Store) -> dict[str, Any]:
    """A message as its chain part holds it: its text, or its digest when long."""
    out: dict[str, Any] = {"role": message.role}
    if len(message.content) <= SHORT:
        out["text"] = message.content
    else:
        out["content"] = store(message.content)
    if message.tool_calls:
        out["tool_calls"] = [{"id": c.id, "name": c.name, "arguments": jsonable(c.arguments),
                              "malformed": c.malformed} for c in message.tool_calls]
    if message.tool_call_id is not None:
        out.update(tool_call_id=message.tool_call_id, name=message.name,
                   is_error=message.is_error)
    return out


def node(prev: str | None, message: Any) -> str:
    """A chain part: ``message`` after the part ``prev``."""
    return canonical_json({"m": message} if prev is None else {"m": message, "p": prev})


def tool_form(spec: ToolSpec) -> dict[str, Any]:
    """A tool as a model is told of it (``read_only`` is overt's, not sent)."""
    return {"name": spec.name, "description": spec.description,
            "input_schema": jsonable(dict(spec.input_schema))}


class Chain:
    """A turn's message chain so far: the parts of the messages already linked, so
    each inference links only the messages added since the last one.

    When a history window has moved on (the request leaves out the oldest messages
    the chain holds after its first, the system prompt), the chain is kept and the
    request names how many it skips (:attr:`skip`), so a moving window links only
    the new messages, not the whole window again. A chain skipping more than three
    times the messages the request holds starts afresh, linking the window anew:
    what it keeps stays within four times the window (what reading a request back
    walks), and a window moving one turn at a time links itself anew once every
    one and a half windows' worth of turns."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.heads: list[str] = []
        self.skip = 0
        """Messages after the first that the last request left out (0: none)."""
        self.sent: list[Any] = []
        """The adapter's ``messages`` of the last request (as it sent them)..."""
        self.sent_heads: list[str] = []
        """...and the head of their packed chain after each."""

    def copy(self) -> Chain:
        chain = Chain()
        chain.messages, chain.heads = list(self.messages), list(self.heads)
        chain.skip = self.skip
        chain.sent, chain.sent_heads = list(self.sent), list(self.sent_heads)
        return chain

    def pack_sent(self, items: Sequence[Any], store: Store) -> str | None:
        """The head of the packed chain of the adapter's ``messages`` ``items``: the
        items the last request began with are not packed and hashed again (an
        adapter builds its payload afresh, so they are compared by value)."""
        shared = 0
        for mine, theirs in zip(self.sent, items, strict=False):
            if mine != theirs:
                break
            shared += 1
        del self.sent[shared:], self.sent_heads[shared:]
        prev = self.sent_heads[-1] if self.sent_heads else None
        for item in items[shared:]:
            prev = store(node(prev, pack(item, store)))
            self.sent.append(item)
            self.sent_heads.append(prev)
        return prev

    def _window(self, messages: Sequence[Message]) -> int | None:
        """How many messages after the first the chain holds that ``messages`` leave
        out, if ``messages`` are the chain's first, then a run of its later ones to
        its end, then new ones (a window moved on); else ``None``."""
        mine = self.messages
        if len(messages) < 2 or len(mine) < 2 or (mine[0] is not messages[0]
                                                   and mine[0] != messages[0]):
            return None
        start = messages[1]
        for at in range(1 + self.skip, len(mine)):  # a window only moves on
            if mine[at] is start or mine[at] == start:
                tail = len(mine) - at
                if tail > len(messages) - 1 or mine[at:] != list(messages[1:1 + tail]):
                    return None
                skip = at - 1
                return skip if skip <= 3 * len(messages) else None  # else start afresh
        return None

    def head(self, messages: Sequence[Message], store: Store) -> str | None:
        shared = len(self.messages)
        if shared > len(messages) or self.messages != list(messages[:shared]):
            skip = self._window(messages)
            if skip:
                self.skip = skip
                held = len(self.messages) - skip  # the request's messages the chain holds
                self.messages[0] = messages[0]  # the same messages: compared by identity next
                self.messages[1 + skip:] = messages[1:held]
                prev: str | None = self.heads[-1]
                for message in messages[held:]:
                    prev = store(node(prev, message_form(message, store)))
                    self.messages.append(message)
                    self.heads.append(prev)
                return prev
            self.skip = 0
            shared = 0  # (the usual case, compared above element by element in C)
            for mine, theirs in zip(self.messages, messages, strict=False):
                if mine is not theirs and mine != theirs:
                    break
                shared += 1
        self.messages[:shared] = messages[:shared]  # the same messages: compared by identity next
        del self.messages[shared:], self.heads[shared:]
        prev = self.heads[-1] if self.heads else None
        for message in messages[shared:]:
            prev = store(node(prev, message_form(message, store)))
            self.messages.append(message)
            self.heads.append(prev)
        return prev


class Chains:
    """The chain of each session's last turn that this engine committed, so that the
    session's next turn, whose request begins with the same messages (the system
    prompt, the earlier turns), links and hashes only the messages that follow
    them: a turn of a long conversation costs what one of a short one does. What a
    chain holds is checked message by message against the next request (the
    earlier turns are the same objects, or equal), so a history that changed
    meanwhile (another process's turn, a window that moved) only shortens what is
    shared. At most ``size`` sessions, the least recently used dropped first."""

    def __init__(self, size: int = 256) -> None:
        self.size = size
        self._kept: OrderedDict[str, Chain] = OrderedDict()

    def start(self, session_id: str) -> Chain:
        """A chain for a turn of ``session_id``: its last committed one's, copied."""
        kept = self._kept.get(session_id)
        return kept.copy() if kept is not None else Chain()

    def keep(self, session_id: str, chain: Chain) -> None:
        """``chain`` is a turn's of ``session_id`` whose every part is committed."""
        self._kept[session_id] = chain
        self._kept.move_to_end(session_id)
        while len(self._kept) > self.size:
            self._kept.popitem(last=False)


class ToolParts:
    """The parts of the tool lists this engine offered: each schema's text and the
    list's, with their digests, made once per list of the same tool specs (the
    registry keeps its specs, so each turn offers the same objects), not
    canonicalised and hashed again at every inference. At most ``size`` lists, the
    least recently used dropped first."""

    def __init__(self, size: int = 64) -> None:
        self.size = size
        self._kept: OrderedDict[tuple[int, ...],
                                tuple[tuple[ToolSpec, ...], list[tuple[str, str]]]] = OrderedDict()

    def store(self, tools: Sequence[ToolSpec], store: Store) -> str:
        """The digest of the part listing ``tools``' schemas, each part given to ``store``."""
        key = tuple(id(t) for t in tools)
        kept = self._kept.get(key)
        if kept is None or any(a is not b for a, b in zip(kept[0], tools, strict=True)):
            texts = [clean_text(canonical_json(tool_form(t))) for t in tools]
            digests = [digest_text(text) for text in texts]
            listing = canonical_json(digests)
            parts = [*zip(texts, digests, strict=True), (listing, digest_text(listing))]
            kept = (tuple(tools), parts)
            self._kept[key] = kept
            while len(self._kept) > self.size:
                self._kept.popitem(last=False)
        self._kept.move_to_end(key)
        for text, digest in kept[1]:
            store(text, digest)
        return kept[1][-1][1]


def request_body(request: ModelRequest, sent: Mapping[str, Any] | None, store: Store,
                 chain: Chain | None = None, tools: ToolParts | None = None) -> str:
    """``request`` (and the adapter's payload ``sent``) as the stored body; ``tools``
    keeps the tool lists' parts from one inference to the next."""
    chain = chain or Chain()
    body: dict[str, Any] = {"v": BODY_VERSION, "messages": chain.head(request.messages, store)}
    if chain.skip:
        body["skip"] = chain.skip
    if request.tools:
        body["tools"] = (tools or ToolParts()).store(request.tools, store)
    if request.max_output_tokens is not None:
        body["max_output_tokens"] = request.max_output_tokens
    if sent is not None:
        body["sent"] = pack(sent, store, chain=chain)
    return canonical_json(body)


def pack(value: Any, store: Store, key: str = "", chain: Chain | None = None) -> Any:
    """The adapter's payload with its repeating parts stored apart (module docstring);
    ``chain``: the turn's, which keeps the packed ``messages`` of its last request."""
    if isinstance(value, Mapping):
        return {k: pack(v, store, str(k), chain) for k, v in value.items()}
    if isinstance(value, list | tuple):
        if key == "messages":
            prev = (chain or Chain()).pack_sent(value, store)
            return {PART: prev, "chain": len(value)}
        if key == "tools":
            return [{JSON_PART: store(canonical_json(jsonable(t)))} for t in value]
        return [pack(v, store) for v in value]
    if isinstance(value, str) and (len(value) > LONG or key == "system"):
        return {PART: store(value)}
    return jsonable(value)


Read = Callable[[str], Awaitable[str | None]]


class PartMissing(LookupError):
    """A part a body names is not in the content tier (pruned, or never stored)."""


async def unpack(value: Any, read: Read) -> Any:
    """What :func:`pack` packed, read back with ``read`` (digest -> body).

    Raises:
        PartMissing: a part is not stored.
    """
    import json

    async def text(digest: str) -> str:
        body = await read(digest)
        if body is None:
            raise PartMissing(digest)
        return body

    if isinstance(value, dict):
        if PART in value and "chain" in value:
            items: list[Any] = []
            prev = value[PART]
            while prev is not None:
                part = json.loads(await text(prev))
                items.append(await unpack(part["m"], read))
                prev = part.get("p")
            return items[::-1]
        if set(value) == {PART}:
            return await text(value[PART])
        if set(value) == {JSON_PART}:
            return json.loads(await text(value[JSON_PART]))
        return {k: await unpack(v, read) for k, v in value.items()}
    if isinstance(value, list):
        return [await unpack(v, read) for v in value]
    return value


async def read_messages(head: str | None, read: Read, skip: int = 0) -> list[dict[str, Any]]:
    """The messages of a neutral chain from its ``head``, oldest first, texts read back;
    ``skip``: a request body's, the messages after the first it leaves out.

    Raises:
        PartMissing: a part is not stored.
    """
    import json

    linked: list[dict[str, Any]] = []
    while head is not None:
        body = await read(head)
        if body is None:
            raise PartMissing(head)
        part = json.loads(body)
        linked.append(dict(part["m"]))
        head = part.get("p")
    linked.reverse()
    if skip:
        del linked[1:1 + skip]
    for message in linked:
        if "text" in message:
            message["content"] = message.pop("text")
        else:
            content = await read(message["content"])
            if content is None:
                raise PartMissing(message["content"])
            message["content"] = content
    return linked


async def expand(body: str, read: Read) -> dict[str, Any]:
    """A stored request body with every part read back: the system prompt's text, the
    messages (texts read back), the tool schemas and the adapter's payload as sent.

    Raises:
        PartMissing: a part is not stored (pruned, or the record was cut).
        ValueError: ``body`` is not a request body.
    """
    import json

    data = json.loads(body)
    if not isinstance(data, dict) or data.get("v") != BODY_VERSION:
        raise ValueError("not a request body")
    tools = []
    listed = "[]"
    if data.get("tools") is not None:
        found = await read(data["tools"])
        if found is None:
            raise PartMissing(data["tools"])
        listed = found
    for digest in json.loads(listed):
        text = await read(digest)
        if text is None:
            raise PartMissing(digest)
        tools.append(json.loads(text))
    messages = await read_messages(data["messages"], read, int(data.get("skip", 0)))
    system = messages[0]["content"] if messages and messages[0]["role"] == "system" else None
    return {"system": system, "messages": messages, "tools": tools,
            "max_output_tokens": data.get("max_output_tokens"),
            "sent": await unpack(data["sent"], read) if "sent" in data else None}
