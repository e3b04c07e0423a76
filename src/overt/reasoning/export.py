"""A trail's reasoning as Markdown (for people) or JSON lines (for tools).

Markdown follows seed 004's format: a ``## Turn <id> (<time>)`` heading per
turn, then one paragraph per step opening with its bracketed label
(``[思考]`` … or ``[thinking]`` …), a step tied to a tool call naming the
call, one tied to a policy decision naming the decision and the approval
request. Being bracketed, the export parses back into the same phases with
:func:`overt.reasoning.parse.parse_steps`.

Unlike ``overt ledger export``, these exports carry content (the steps'
text): they are for reading the reasoning, not for shipping to a log pipeline.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from overt.errors import UsageError
from overt.ledger.canonical import canonical_json
from overt.reasoning.parse import LABELS
from overt.reasoning.trail import Step, Trail, TurnTrail

_BLANK_LINES = re.compile(r"\n\s*\n")


def _labels(language: str) -> dict[Any, str]:
    try:
        return dict(LABELS[language])
    except KeyError:
        raise UsageError(f"labels are one of {', '.join(sorted(LABELS))}, "
                         f"not {language!r}") from None


def markdown(trail: Trail, labels: str = "ja") -> str:
    """The trail as Markdown: a session heading when it is a session's, then each turn.

    Raises:
        UsageError: ``labels`` is not ``ja`` or ``en``.
    """
    names = _labels(labels)
    parts = []
    if trail.turn_id is None and trail.session_id is not None:
        parts.append(f"# Session {trail.session_id}")
    elif trail.turn_id is None:
        parts.append(f"# Turns {trail.since or '…'} .. {trail.until or '…'}")
    parts.extend(turn_markdown(turn, names) for turn in trail.turns)
    return "\n\n".join(parts) + "\n"


def turn_markdown(turn: TurnTrail, names: dict[Any, str]) -> str:
    """One turn: its heading, then one bracketed paragraph per step."""
    lines = [f"## Turn {turn.turn_id} ({_second(turn.started_at)})"]
    if not turn.steps:
        lines.append("(no reasoning steps recorded)")
    for step in turn.steps:
        lines.append(f"[{names[step.phase]}] {_paragraph(step)}{_links(step)}")
    return "\n\n".join(lines)


def _second(at: str) -> str:
    """A ledger time to the second (``2026-02-23T10:30:00Z``), as seed 004 shows it."""
    return at[:19] + "Z" if len(at) >= 19 else at


def _paragraph(step: Step) -> str:
    if step.content is None:
        return f"(text pruned; was {step.content_digest})"
    # one paragraph per step: a blank line inside the text would start another
    return _BLANK_LINES.sub("\n", step.content.strip())


def _links(step: Step) -> str:
    links = [f"{name}: {value}" for name, value in (
        ("tool_call", step.tool_call_id), ("policy_decision", step.policy_decision_id),
        ("approval_request", step.approval_request_id)) if value is not None]
    return f" ({', '.join(links)})" if links else ""


def jsonl_lines(trail: Trail) -> Iterator[str]:
    """One canonical JSON object per step, in order (no trailing newline)."""
    for turn, step in trail.steps():
        yield canonical_json({
            "turn_id": turn.turn_id, "session_id": turn.session_id, "seq": step.seq,
            "step_id": step.step_id, "step_number": step.step_number, "phase": step.phase,
            "content": step.content, "content_digest": step.content_digest,
            "tool_call_id": step.tool_call_id, "policy_decision_id": step.policy_decision_id,
            "approval_request_id": step.approval_request_id, "created_at": step.at,
        })
