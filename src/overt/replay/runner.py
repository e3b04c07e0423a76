"""Replaying recorded turns through the current engine, gate, hooks and history window.

Each turn runs in a real :class:`~overt.engine.loop.Engine` with two inputs swapped
(:mod:`overt.replay.answers`): the model answers from the record, and so do the
tools; nothing runs. The engine records into a scratch ledger in memory, never the
ledger it reads. A turn paused for approval is resumed with the recorded decision.
The replayed turn, as data, is then compared with the recorded one.

Replay refuses a ledger that does not verify (:class:`ReplayRefused`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from overt.engine.checkpoint import Checkpoint
from overt.engine.loop import Engine
from overt.engine.request_body import Chains
from overt.errors import LedgerIntegrityError
from overt.events import (
    Event,
    HookBlocked,
    HookProvided,
    PolicyDecided,
    ToolCallCompleted,
    TurnCompleted,
    TurnPaused,
)
from overt.ledger.base import Entry, Ledger
from overt.models.base import Model
from overt.policy.actors import Actor
from overt.replay.answers import IdMap, RecordedModel, RecordedResults
from overt.replay.record import RecordedTurn, read_turn
from overt.replay.source import Bodies, first_turns, scratch, turn_entries
from overt.replay.types import Divergence, TurnReplay
from overt.sessions import session_history
from overt.sessions.window import WINDOW_ATTRIBUTES, HistoryTurn
from overt.types import SOURCES, IncomingMessage


class ReplayRefused(LedgerIntegrityError):
    """The ledger does not verify: replay does not run on a record it cannot trust."""


async def verified(ledger: Ledger) -> None:
    """Raises :class:`ReplayRefused` unless ``ledger`` verifies (chain and bodies)."""
    report = await ledger.verify()
    if not report.ok:
        raise ReplayRefused(f"the ledger does not verify: {report.problem} "
                            f"(entry {report.bad_seq}); nothing was replayed")


async def select_turns(ledger: Ledger, *, turn_id: str | None = None,
                       session_id: str | None = None, since: str | None = None) -> list[str]:
    """The turns to replay, in the order they started."""
    if turn_id is not None:
        return [turn_id]
    entries = await ledger.entries(session_id=session_id, kinds=["turn.started"], since=since)
    return [e.turn_id for e in entries if e.turn_id is not None]


PARTS_KEPT = 200_000
"""Request parts a replayer keeps (its sessions' chains); past it, it starts over."""

CHUNK = 256
"""Turns whose entries and bodies are read at once."""


class Replayer:
    """Replays turns of ``ledger`` with ``engine``'s tools, hooks, gate, prompt and
    settings (a runtime's engine). With ``ask``, each recorded request is also put
    to that real model and its answer compared with the recorded one, byte for byte
    (the turn still goes on with the recorded answer)."""

    def __init__(self, engine: Engine, ledger: Ledger, *, ask: Model | None = None) -> None:
        self.base = engine
        self.ask = ask  # re-asked each recorded request, its answers compared (--model)
        self.ledger = ledger
        self.bodies = Bodies(ledger)
        # each session's message chain carried from turn to turn, as the engine that
        # recorded did, so a request's messages compare by their head and skip
        self.chains = Chains()
        self.parts: dict[str, str] = {}  # the parts of the chains, as replayed
        self.scratch, self.scratch_ledger = scratch()

    async def run(self, turn_ids: Sequence[str]) -> AsyncIterator[TurnReplay]:
        """Each turn's replay, in the order given.

        Raises:
            LedgerIntegrityError: a body a turn needs is not readable.
        """
        for start in range(0, len(turn_ids), CHUNK):
            chunk = list(turn_ids[start:start + CHUNK])
            entries = await turn_entries(self.ledger, chunk)
            seqs = [e.seq for found in entries.values() for e in found]
            if seqs:
                await self.bodies.load(min(seqs), max(seqs))
            sessions = sorted({found[0].session_id for found in entries.values()
                               if found and found[0].session_id is not None})
            firsts = await first_turns(self.ledger, sessions)
            for turn_id in chunk:
                yield await self.turn(turn_id, entries.get(turn_id), firsts)

    async def turn(self, turn_id: str, entries: list[Entry] | None = None,
                   firsts: dict[str, int] | None = None) -> TurnReplay:
        """Replay one turn.

        Raises:
            LedgerIntegrityError: a body the turn needs is not readable.
        """
        recorded = await read_turn(self.bodies, turn_id, entries if entries else None,
                                   self.ledger)
        if recorded is None:
            return TurnReplay(turn_id, (), ("no turn.started on record: not replayed",))
        divergences: list[Divergence] = []
        notes: list[str] = []
        ids = IdMap(recorded.ids)
        events: list[Event] = []

        def observe(event: Event) -> None:
            ids.observe(event)
            events.append(event)

        base = self.base
        model = RecordedModel(self.bodies, recorded, ids, divergences.append,
                              recorded.started.model, notes, self.ask, self.parts)
        session = recorded.started.session_id or ""
        if len(self.parts) > PARTS_KEPT:  # start over: no chain names a part forgotten
            self.chains, self.parts = Chains(), {}
            model.parts = self.parts
        model.chain = self.chains.start(session)
        for attr in WINDOW_ATTRIBUTES:  # the same window
            if hasattr(base.model, attr):
                setattr(model, attr, getattr(base.model, attr))
        self.scratch.clear()
        engine = Engine(model, base.tools, self.scratch_ledger,
                        system_prompt=base.system_prompt, settings=base.settings,
                        runtime_started_at=base.runtime_started_at,
                        observers=[observe], hooks=base.hooks,
                        system_prompt_for=base.system_prompt_for, prices=base.prices,
                        gate=base.gate)
        engine.execute = RecordedResults(self.bodies, recorded, divergences.append)
        engine.record_requests = False
        source = recorded.started.source
        message = IncomingMessage(source if source in SOURCES else "cli",  # type: ignore[arg-type]
                                  recorded.text)
        earlier: list[HistoryTurn] = []
        if firsts is None or firsts.get(session) != recorded.seq:
            earlier = await session_history(self.ledger, session, before_turn=turn_id)
        outcome = await engine.run_turn(message, session_id=recorded.started.session_id,
                                        earlier=earlier,
                                        actor=Actor.parse(recorded.started.actor))
        for resumed in recorded.resumed:
            waiting = outcome.result.awaiting_approval
            if waiting is None:
                break
            cp = await self._checkpoint(events, waiting)
            outcome = await engine.resume(cp, waiting, resumed.decision,
                                          resumed_by="operator:replay")
        self.chains.keep(session, model.chain)
        divergences.extend(compare(recorded, events, model.calls))
        return TurnReplay(turn_id, tuple(divergences), tuple(notes), model.asked)

    async def _checkpoint(self, events: Sequence[Event], request_id: str) -> Checkpoint:
        for event in reversed(events):
            if isinstance(event, TurnPaused) and event.request_id == request_id:
                body = await self.scratch.content(event.checkpoint_digest)
                if body is not None:
                    return Checkpoint.from_json(body)
        raise LedgerIntegrityError(f"replay: no checkpoint for request {request_id}")


def _name(event: object) -> str:
    return str(getattr(event, "tool_name", ""))


def compare(recorded: RecordedTurn, events: Sequence[Event],
            model_calls: int) -> list[Divergence]:
    """What the replayed turn (its ``events``) did otherwise than ``recorded``."""
    out: list[Divergence] = []
    turn_id = recorded.turn_id
    decisions = [e for e in events if isinstance(e, PolicyDecided)]
    for i in range(max(len(decisions), len(recorded.decisions))):
        r = recorded.decisions[i] if i < len(recorded.decisions) else None
        p = decisions[i] if i < len(decisions) else None
        if r is not None and p is not None and (r.tool_name, r.effect, r.rule) == (
                p.tool_name, p.effect, p.rule):
            continue
        out.append(Divergence(
            turn_id, f"call {i} {_name(p or r)}", "decision", "",
            f"{r.effect} by {r.rule}" if r else "(no decision)",
            f"{p.effect} by {p.rule}" if p else "(no decision)",
            rule=p.rule if p else (r.rule if r else "")))
    done = [e for e in events if isinstance(e, ToolCallCompleted)]
    for i in range(min(len(done), len(recorded.completions))):
        r_done, p_done = recorded.completions[i], done[i]
        was, now = r_done.tool_status == "not_allowed", p_done.tool_status == "not_allowed"
        if was != now:
            out.append(Divergence(
                turn_id, f"call {i} {p_done.tool_name}", "allowed" if was else "refused", "",
                f"{r_done.tool_status} {r_done.reason_code or ''}".strip(),
                f"{p_done.tool_status} {p_done.reason_code or ''}".strip()))
    hooks = [e for e in events if isinstance(e, HookBlocked | HookProvided)]
    for i in range(max(len(hooks), len(recorded.hooks))):
        rh = recorded.hooks[i] if i < len(recorded.hooks) else None
        ph = hooks[i] if i < len(hooks) else None
        key_r = (rh.kind, rh.plugin, rh.tool_name) if rh else None
        key_p = (ph.kind, ph.plugin, ph.tool_name) if ph else None
        if key_r != key_p:
            out.append(Divergence(turn_id, f"hook {i}", "hook", "",
                                  " ".join(key_r) if key_r else "(none)",
                                  " ".join(key_p) if key_p else "(none)"))
    if model_calls < len(recorded.inferences):
        out.append(Divergence(turn_id, f"inference {model_calls}", "model_call", "",
                              f"{len(recorded.inferences)} model calls",
                              f"{model_calls} model calls", "fewer model calls now"))
    completed = next((e for e in reversed(events) if isinstance(e, TurnCompleted)), None)
    ended = recorded.completed.status if recorded.completed else "paused"
    ends = completed.status if completed else "paused"
    if ended != ends:
        out.append(Divergence(turn_id, "end", "status", "", ended, ends))
    return out
