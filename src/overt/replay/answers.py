"""The engine's two inputs, answered from the record: a model that gives the recorded
response to each request (and compares the request with the recorded one), and a
tool executor that gives each call its recorded result. Nothing runs.

Ids: overt makes new ids for a replayed turn's tool calls, approval requests and
decisions. :class:`IdMap` pairs each with the recorded one by order of appearance,
so a request is compared as the engine would have sent it under the recorded ids.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from typing import Any

from overt.engine.dispatch import ToolOutcome, refuse
from overt.engine.record import response_body
from overt.engine.request_body import Chain, pack, read_messages, request_body, tool_form, unpack
from overt.errors import ModelError
from overt.events import Event
from overt.ledger.canonical import canonical_json, digest_text
from overt.ledger.chain import clean_text
from overt.models.base import Model
from overt.replay.record import Reads, RecordedTurn, note_ids, response_from_body
from overt.replay.types import Divergence
from overt.tools.base import Tool, ToolContext
from overt.types import Message, ModelRequest, ModelResponse, ToolCall


class IdMap:
    """Replayed ids -> recorded ids, paired by order of first appearance per kind."""

    def __init__(self, recorded: Mapping[str, list[str]]) -> None:
        self.recorded = recorded
        self.replayed: dict[str, list[str]] = {}
        self.seen: set[str] = set()
        self.map: dict[str, str] = {}

    def observe(self, event: Event) -> None:
        before = {k: len(v) for k, v in self.replayed.items()}
        note_ids(self.replayed, self.seen, event)
        for kind, ids in self.replayed.items():
            theirs = self.recorded.get(kind, [])
            for index in range(before.get(kind, 0), len(ids)):
                if index < len(theirs):
                    self.map[ids[index]] = theirs[index]

    def text(self, text: str) -> str:
        for mine, theirs in self.map.items():
            if mine in text:
                text = text.replace(mine, theirs)
        return text

    def message(self, m: Message) -> Message:
        if not self.map:
            return m
        calls = tuple(replace(c, id=self.map.get(c.id, c.id)) for c in m.tool_calls)
        return replace(m, content=self.text(m.content), tool_calls=calls,
                       tool_call_id=self.map.get(m.tool_call_id, m.tool_call_id)
                       if m.tool_call_id is not None else None)


Report = Callable[[Divergence], None]


class RecordedModel:
    """Answers a replayed turn's model calls with the recorded responses, in order,
    reporting each request that differs from the recorded one (which part)."""

    def __init__(self, ledger: Reads, turn: RecordedTurn, ids: IdMap, report: Report,
                 name: str, notes: list[str], ask: Model | None = None,
                 parts: dict[str, str] | None = None) -> None:
        self.name = name
        self.ask = ask  # a real model re-asked each recorded request (--model)
        self.ledger = ledger
        self.turn = turn
        self.ids = ids
        self.report = report
        self.notes = notes
        self.calls = 0
        self.asked = 0  # recorded requests put to ``ask``
        self.context_window: int | None = None
        self.chain = Chain()  # the turn's requests share their messages
        # the parts of the requests as replayed (the replayer's: a session's chain is
        # carried from turn to turn, and its parts with it)
        self.parts: dict[str, str] = parts if parts is not None else {}

    async def complete(self, request: ModelRequest) -> ModelResponse:
        index = self.calls
        self.calls += 1
        if index >= len(self.turn.inferences):
            self.report(Divergence(self.turn.turn_id, f"inference {index}", "model_call",
                                   "", "(none)", "a model call the record does not have"))
            raise ModelError("replay: the record has no answer for this model call")
        inference, seq = self.turn.inferences[index]
        mapped, recorded = await self._compare(request, inference.request_digest, seq, index)
        if inference.response_digest is None:
            raise ModelError(f"replay: the recorded call failed ({inference.error_type})")
        body = await self.ledger.content(inference.response_digest, seq=seq)
        if body is None:
            raise ModelError("replay: the recorded response is not held")
        answer = response_from_body(body, inference)
        if self.ask is not None:
            await self._ask(f"inference {index}", mapped, recorded, body, answer)
        return answer

    async def _ask(self, step: str, request: ModelRequest, recorded: dict[str, Any] | None,
                   body: str, answer: ModelResponse) -> None:
        """Ask the real model ``request`` (the replayed request under the recorded ids)
        and report where its answer, or what its adapter sent, differs from the
        record's: byte for byte, the response as the content tier stores it (the call
        ids overt made are the recorded ones, paired by order)."""
        assert self.ask is not None
        turn_id = self.turn.turn_id
        self.asked += 1
        try:
            fresh = await self.ask.complete(request)
        except ModelError as exc:
            self.report(Divergence(turn_id, step, "answer", "error", digest_text(body),
                                   "(no answer)", f"{self.ask.name} failed: {exc}"))
            return
        if recorded is not None and "sent" in recorded and fresh.sent is not None:
            await self._sent(step, recorded["sent"], fresh.sent)
        ids = [c.id for c in answer.tool_calls]
        calls = tuple(replace(c, id=ids[i]) if i < len(ids) else c
                      for i, c in enumerate(fresh.tool_calls))
        mine = response_body(replace(fresh, tool_calls=calls))
        if mine == body:
            return
        theirs, now = json.loads(body), json.loads(mine)
        for part in ("text", "reasoning", "tool_calls"):
            if theirs.get(part) == now.get(part):
                continue
            was, is_ = canonical_json(theirs.get(part)), canonical_json(now.get(part))
            at = next((i for i, (a, b) in enumerate(zip(was, is_, strict=False)) if a != b),
                      min(len(was), len(is_)))
            self.report(Divergence(turn_id, step, "answer", part, digest_text(was),
                                   digest_text(is_), f"{self.ask.name} answers otherwise "
                                   f"from character {at} of the {part} on"))

    async def _sent(self, step: str, theirs: Any, sent: Mapping[str, Any]) -> None:
        """Report the keys of the adapter's payload (rendered prompts, grammar, model
        digest, seed, sampling) that differ from the recorded request's."""
        parts = self.parts

        def store(text: str, digest: str | None = None, /) -> str:
            digest = digest or digest_text(text)
            parts[digest] = text
            return digest

        mine = pack(sent, store)
        if mine == theirs:
            return
        was = await unpack(theirs, self.ledger.content)
        now = await unpack(mine, _reader(parts))
        keys = sorted(k for k in set(was) | set(now) if was.get(k) != now.get(k))
        self.report(Divergence(
            self.turn.turn_id, step, "request", "sent", digest_text(canonical_json(was)),
            digest_text(canonical_json(now)), "the adapter sends otherwise: "
            + ", ".join(keys)))

    async def _compare(self, request: ModelRequest, digest: str | None, seq: int,
                       index: int) -> tuple[ModelRequest, dict[str, Any] | None]:
        """Report where ``request`` differs from the recorded one; ``request`` under
        the recorded ids, and the recorded request body (``None``: not held)."""
        step = f"inference {index}"
        mapped = ModelRequest(tuple(self.ids.message(m) for m in request.messages),
                              request.tools, request.max_output_tokens)
        if digest is None:
            self.notes.append(f"{self.turn.turn_id} {step}: request not recorded")
            return mapped, None
        recorded_text = await self.ledger.content(digest, seq=seq)
        if recorded_text is None:
            self.notes.append(f"{self.turn.turn_id} {step}: request body not held")
            return mapped, None
        recorded: dict[str, Any] = json.loads(recorded_text)
        parts = self.parts

        def store(text: str, digest: str | None = None, /) -> str:
            if digest is None:
                text = clean_text(text)
                digest = digest_text(text)
            parts[digest] = text
            return digest

        mine = json.loads(request_body(mapped, None, store, self.chain))
        turn_id = self.turn.turn_id
        if (mine["messages"], mine.get("skip", 0)) != (recorded["messages"],
                                                       recorded.get("skip", 0)):
            await self._messages(step, recorded, mine, parts)
        if mine.get("tools") != recorded.get("tools"):
            await self._tools(step, recorded.get("tools"), mapped)
        if mine.get("max_output_tokens") != recorded.get("max_output_tokens"):
            self.report(Divergence(turn_id, step, "request", "options",
                                   str(recorded.get("max_output_tokens")),
                                   str(mine.get("max_output_tokens")),
                                   "max_output_tokens differs"))
        return mapped, recorded

    async def _messages(self, step: str, theirs: dict[str, Any], mine: dict[str, Any],
                        parts: dict[str, str]) -> None:
        recorded = await read_messages(theirs["messages"], self.ledger.content,
                                       int(theirs.get("skip", 0)))
        replayed = await read_messages(mine["messages"], _reader(parts),
                                       int(mine.get("skip", 0)))
        first = next((i for i, (a, b) in enumerate(zip(recorded, replayed, strict=False))
                      if a != b), min(len(recorded), len(replayed)))
        turn_id = self.turn.turn_id
        system = [m["content"] for m in recorded[:1] + replayed[:1] if m["role"] == "system"]
        if first == 0 and system:
            self.report(Divergence(turn_id, step, "request", "prompt",
                                   _digest(recorded[:1]), _digest(replayed[:1]),
                                   "the system prompt differs"))
        if _history(recorded) != _history(replayed):
            part = "window"  # before the turn's own message: the earlier turns let in
        elif recorded[1:] != replayed[1:]:
            part = "messages"
        else:
            return
        self.report(Divergence(
            turn_id, step, "request", part, f"{len(recorded)} messages",
            f"{len(replayed)} messages", f"the messages differ from message {first} on"))

    async def _tools(self, step: str, theirs: str | None, request: ModelRequest) -> None:
        recorded: dict[str, str] = {}
        listed = await self.ledger.content(theirs) if theirs is not None else "[]"
        for digest in json.loads(listed or "[]"):
            body = await self.ledger.content(digest)
            name = json.loads(body)["name"] if body is not None else digest
            recorded[name] = digest
        replayed = {t.name: digest_text(canonical_json(tool_form(t))) for t in request.tools}
        for name in sorted(set(recorded) | set(replayed)):
            if recorded.get(name) != replayed.get(name):
                what = ("no longer offered" if name not in replayed else
                        "newly offered" if name not in recorded else "its schema differs")
                self.report(Divergence(self.turn.turn_id, step, "request", "tool_schema",
                                       recorded.get(name, "(none)"),
                                       replayed.get(name, "(none)"), f"tool {name}: {what}"))


class RecordedResults:
    """The recorded result of each call whose tool ran, in order; no tool runs."""

    def __init__(self, ledger: Reads, turn: RecordedTurn, report: Report) -> None:
        self.ledger = ledger
        self.turn = turn
        self.report = report
        self.index = 0

    async def __call__(self, tool: Tool, call: ToolCall, context: ToolContext,
                       timeout_s: float | None) -> ToolOutcome:
        index = self.index
        self.index += 1
        if index >= len(self.turn.executed):
            self.report(Divergence(self.turn.turn_id, f"call {call.name}", "runs", "",
                                   "(not run)", "run", f"{call.name} now runs; the record "
                                   "has no result for it"))
            return refuse("replay_no_result", "the record holds no result for this call",
                          "execution_error")
        done = self.turn.executed[index]
        if done.tool_name != call.name:
            self.report(Divergence(self.turn.turn_id, f"call {index}", "runs", "",
                                   done.tool_name, call.name, "another tool runs here"))
        content = ""
        if done.result_digest is not None:
            content = await self.ledger.content(done.result_digest) or ""
        return ToolOutcome(done.tool_status, content, done.tool_status != "ok",
                           done.tool_duration_ms, done.exc_type, done.reason_code, True)



def _reader(parts: Mapping[str, str]) -> Callable[[str], Awaitable[str | None]]:
    async def read(digest: str) -> str | None:
        return parts.get(digest)
    return read


def _history(messages: list[dict[str, object]]) -> list[dict[str, object]]:
    """The messages sent before the turn's own (its last user message), system prompt
    left out: the earlier turns the history window let in."""
    users = [i for i, m in enumerate(messages) if m["role"] == "user"]
    start = 1 if messages and messages[0]["role"] == "system" else 0
    return messages[start:users[-1]] if users else []


def _digest(messages: list[dict[str, object]]) -> str:
    """The digest of the system prompt among ``messages`` (its first), or ``(none)``."""
    if messages and messages[0]["role"] == "system":
        return digest_text(str(messages[0]["content"]))
    return "(none)"
