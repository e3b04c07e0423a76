"""A model's reasoning text, cut into typed steps.

What an auditor needs from a bad decision is *which* part of the reasoning
was a plan, which noticed an error and which was musing; so the text is cut
into steps by rules that are written down, deterministic and total:

1. **Bracket markers** decide first. ``[思考] [計画] [承認待ち] [実行] [エラー]``
   (the Japanese labels of seed 004, also in full-width ``【】``) and their
   English names ``[thinking] [plan] [waiting_approval] [execute] [error]``
   (any case; ``waiting approval`` and ``waiting-approval`` too) label the
   text up to the next marker as one step, blank lines and all: the model
   said what it is.
2. Text outside markers is read line by line:

   - **plan**: a numbered (``1.``, ``2)``, ``１．``) or bulleted (``-``, ``*``,
     ``•``, ``・``) list whose lead-in line names a plan (``plan``, ``steps``,
     ``手順``, ``計画``), with that lead-in and the items' indented
     continuations; also a single line naming a plan with its items inline
     (``Plan: 1. a 2. b``). A list without such a lead-in is not a plan.
   - **error**: a line saying ``error``, ``failed``, ``エラー`` or ``失敗``.
   - **thinking**: everything else.

   Consecutive lines of one phase are one step; a blank line ends a step
   (a paragraph), except between the items of one plan.

Steps are numbered from 0 without gaps; a step never has empty content.
The parser never raises on any string and makes one pass over it with
precompiled patterns: it runs on every model response.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from overt.events import REASONING_PHASES, ReasoningPhase

LABELS: dict[str, dict[ReasoningPhase, str]] = {
    "ja": {"thinking": "思考", "plan": "計画", "waiting_approval": "承認待ち",
           "execute": "実行", "error": "エラー"},
    "en": {"thinking": "thinking", "plan": "plan", "waiting_approval": "waiting_approval",
           "execute": "execute", "error": "error"},
}
"""The bracket label of each phase, per language (``--labels ja|en``)."""

_PHASE_OF_LABEL: dict[str, ReasoningPhase] = {
    label.lower(): phase for names in LABELS.values() for phase, label in names.items()
}

_MARKER = re.compile(
    r"[\[【]\s*(思考|計画|承認待ち|実行|エラー|thinking|plan|waiting[ _-]?approval|execute|error)"
    r"\s*[\]】]",
    re.IGNORECASE,
)
_LIST_ITEM = re.compile(
    r"\s*(?:"
    r"\d{1,3}[.)](?:\s|$)"     # 1. or 2) then a space: not 1.5 (\d: full-width too)
    r"|\d{1,3}[．）、]"          # full-width punctuation needs no space
    r"|[-*+•](?:\s|$)"
    r"|[・●]"
    r")"
)
_PLAN_WORD = re.compile(r"\b(?:plan|plans|planning|steps)\b|手順|計画", re.IGNORECASE)
# An item number later on a plan word's line: a plan stated inline ("Plan: 1. a 2. b").
_INLINE_ITEM = re.compile(r"(?<![\w.,])\d{1,3}(?:[.)]\s+|[．）、]\s*)\S")
_ERROR_WORD = re.compile(r"\b(?:error|errors|errored|failed)\b|エラー|失敗", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class ParsedStep:
    """One step cut from reasoning text: its place, its phase and its text."""

    step_number: int
    phase: ReasoningPhase
    content: str


def parse_steps(text: str) -> list[ParsedStep]:
    """Cut ``text`` into steps (see the module docstring for the rules).

    Total: any string gives a list (empty for blank text), numbered 0, 1, 2 …
    """
    if not isinstance(text, str) or not text.strip():
        return []
    steps: list[ParsedStep] = []
    position = 0
    phase: ReasoningPhase | None = None  # None: not under a marker, use the heuristics
    for match in _MARKER.finditer(text):
        _emit(steps, phase, text[position:match.start()])
        phase = _PHASE_OF_LABEL.get(_normal(match.group(1)), "thinking")
        position = match.end()
    _emit(steps, phase, text[position:])
    return steps


def _normal(label: str) -> str:
    label = label.lower()
    return "waiting_approval" if label.startswith("waiting") else label


def _emit(steps: list[ParsedStep], phase: ReasoningPhase | None, segment: str) -> None:
    if phase is not None:
        content = segment.strip()
        if content:
            steps.append(ParsedStep(len(steps), phase, content))
        return
    for line_phase, content in _by_lines(segment):
        steps.append(ParsedStep(len(steps), line_phase, content))


def _by_lines(segment: str) -> list[tuple[ReasoningPhase, str]]:
    """Unmarked text as (phase, content) pieces, by the line rules."""
    if not segment.strip():
        return []
    lines = segment.split("\n")
    count = len(lines)
    # next_text[i]: index of the first non-blank line after i (count if none)
    next_text = [count] * count
    following = count
    for i in range(count - 1, -1, -1):
        next_text[i] = following
        if lines[i].strip():
            following = i

    pieces: list[tuple[ReasoningPhase, str]] = []
    current: ReasoningPhase | None = None
    buffer: list[str] = []
    in_plan = False

    def flush() -> None:
        if current is not None and buffer:
            content = "\n".join(buffer).strip()
            if content:
                pieces.append((current, content))
        buffer.clear()

    for i, line in enumerate(lines):
        stripped = line.strip()
        if not stripped:
            nxt = next_text[i]
            if in_plan and nxt < count and (_LIST_ITEM.match(lines[nxt])
                                            or lines[nxt][:1].isspace()):
                continue  # a blank line between the items of one plan
            flush()
            current = None
            continue
        if in_plan and (_LIST_ITEM.match(line) or line[:1].isspace()):
            phase: ReasoningPhase = "plan"
        else:
            in_plan = False
            word = _PLAN_WORD.search(stripped)
            if word is not None and (
                    (next_text[i] < count and _LIST_ITEM.match(lines[next_text[i]]))
                    or _INLINE_ITEM.search(stripped, word.end())):
                phase = "plan"
                in_plan = True
            elif _ERROR_WORD.search(stripped):
                phase = "error"
            else:
                phase = "thinking"
        if phase != current:
            flush()
            current = phase
        buffer.append(line.rstrip())
    flush()
    return pieces


__all__ = ["LABELS", "REASONING_PHASES", "ParsedStep", "parse_steps"]
