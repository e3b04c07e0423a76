"""What a replay yields: divergences, each turn's result, the run's summary."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

DivergenceKind = Literal["request", "decision", "refused", "allowed", "hook", "runs",
                         "model_call", "status", "answer"]


@dataclass(frozen=True, slots=True)
class Divergence:
    """One thing a replayed turn did otherwise than the record.

    ``kind``: ``request`` (a request that now differs; ``part`` says which: ``prompt``,
    ``window``, ``messages``, ``tool_schema``, ``options``), ``decision`` (the gate
    decides otherwise; ``rule`` is the rule that decides now), ``refused`` (a call
    that ran is now refused), ``allowed`` (the reverse), ``hook`` (a plugin now
    provides or blocks, or no longer does), ``runs`` (a call runs that the record has
    no result for), ``model_call`` (a model call the record lacks, or the reverse),
    ``status`` (the turn ends otherwise), ``answer`` (with a model re-asked, ``--model``:
    its answer differs from the recorded one; ``part``: ``text``, ``reasoning``,
    ``tool_calls`` or ``error``). A request's ``part`` ``sent`` says the adapter
    sends otherwise (the rendered prompt, grammar, model file digest, seed).
    """

    turn_id: str
    step: str
    kind: str
    part: str
    recorded: str
    replayed: str
    detail: str = ""
    rule: str = ""

    def line(self) -> str:
        what = f"{self.kind}:{self.part}" if self.part else self.kind
        rule = f" (rule {self.rule})" if self.rule else ""
        return (f"{self.turn_id} {self.step}: {what}: recorded {self.recorded!r}, now "
                f"{self.replayed!r}{rule}" + (f"; {self.detail}" if self.detail else ""))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class TurnReplay:
    """One replayed turn: what diverged, notes (``request not recorded``), and how many
    of its recorded answers a model re-asked gave again (``--model``)."""

    turn_id: str
    divergences: tuple[Divergence, ...]
    notes: tuple[str, ...] = ()
    asked: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"turn_id": self.turn_id, "divergences": [d.to_dict() for d in self.divergences],
                "notes": list(self.notes), "asked": self.asked}


@dataclass(slots=True)
class ReplaySummary:
    """The run: turns replayed, divergences, and decisions changed per rule."""

    turns: int = 0
    divergent_turns: int = 0
    divergences: int = 0
    notes: int = 0
    asked: int = 0
    decisions_changed: Counter[str] = field(default_factory=Counter)

    def add(self, result: TurnReplay) -> None:
        self.turns += 1
        self.divergent_turns += bool(result.divergences)
        self.divergences += len(result.divergences)
        self.notes += len(result.notes)
        self.asked += result.asked
        for d in result.divergences:
            if d.kind == "decision":
                self.decisions_changed[d.rule or "(none)"] += 1

    def to_dict(self) -> dict[str, Any]:
        return {"turns": self.turns, "divergent_turns": self.divergent_turns,
                "divergences": self.divergences, "notes": self.notes, "asked": self.asked,
                "decisions_changed": dict(sorted(self.decisions_changed.items()))}
