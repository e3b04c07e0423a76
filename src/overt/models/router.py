"""When a cheap model's answer is weak enough to ask a stronger one: the escalation rule.

A route with ``escalate_to`` has the cheap model answer first; the built-in
``router`` plugin (:mod:`overt.hooks.router`) asks :meth:`EscalationRule.assess`
about each answer and, when a signal fires, has the call reissued once to the
strong model with the cheap answer in its context. Each signal has a reason
code, which goes on the record:

==================================  ==================================================
``empty_answer``                    no text and no tool call
``malformed_tool_call``             a tool call that could not be parsed
``tool_error_streak``               the request ends with N failed tool results in a row
``low_confidence_self_reported``    ``confidence: 0.3``, ``(confidence: low)``, ``20%``
                                    below ``confidence_below``
``low_confidence_hedging``          a hedging phrase (a list of regexes, case-insensitive)
==================================  ==================================================

Signals are checked in that order; the first that fires is the reason.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from overt.errors import ConfigError
from overt.types import ModelRequest, ModelResponse

DEFAULT_HEDGES: tuple[str, ...] = (
    r"\bI(?:'m| am) not (?:entirely |completely |totally )?(?:sure|certain)\b",
    r"\bI(?:'m| am) unsure\b",
    r"\bI do(?:n'?t| not) know\b",
    r"\bI can(?:'?t|not) be (?:sure|certain)\b",
    r"\bI (?:might|may|could) be wrong\b",
    r"\bI(?:'m| am) (?:just )?guessing\b",
    r"\bnot (?:entirely )?sure (?:about|whether|if)\b",
    r"\bI(?:'m| am) unable to (?:determine|verify|answer)\b",
)
"""Hedging phrases that mark a low-confidence answer, unless a route names its own."""

_CONFIDENCE = re.compile(
    r"\bconfidence(?:\s+level)?\s*(?:is\s*|[:=]\s*)"
    r"(?P<value>very\s+low|very\s+high|low|medium|moderate|high|\d+(?:\.\d+)?\s*%?|\.\d+)",
    re.IGNORECASE)
_WORDS = {"very low": 0.1, "low": 0.25, "medium": 0.5, "moderate": 0.5, "high": 0.85,
          "very high": 0.95}


@dataclass(frozen=True, slots=True)
class Escalation:
    """A decision to escalate: a reason code for the record and a sentence for people."""

    reason_code: str
    message: str


def self_reported_confidence(text: str) -> float | None:
    """The lowest confidence the text reports about itself (0..1), or None if it reports none.

    ``confidence: 0.3``, ``confidence = 30%``, ``(confidence: low)``,
    ``confidence level is high``; a bare number above 1 is read as a percentage.
    """
    lowest: float | None = None
    for match in _CONFIDENCE.finditer(text):
        raw = " ".join(match["value"].lower().split())
        if raw in _WORDS:
            value = _WORDS[raw]
        else:
            number = float(raw.rstrip("%").strip())
            value = number / 100 if raw.endswith("%") or number > 1 else number
        value = min(max(value, 0.0), 1.0)
        lowest = value if lowest is None else min(lowest, value)
    return lowest


@dataclass(frozen=True, slots=True)
class EscalationRule:
    """Which signals escalate an answer, and their thresholds.

    ``hedges``: regexes (case-insensitive) for hedging phrases; ``()`` turns the
    signal off. ``confidence_below``: a self-reported confidence under this
    escalates (``0`` turns it off). ``tool_error_streak``: that many failed tool
    results in a row at the end of the request escalate (``0`` turns it off).

    Raises:
        ConfigError: a hedge is not a valid regex, or a threshold is out of range.
    """

    hedges: tuple[str, ...] = DEFAULT_HEDGES
    confidence_below: float = 0.5
    on_empty: bool = True
    on_malformed_tool_call: bool = True
    tool_error_streak: int = 2
    # each hedge compiled alone: one alternation of them all scans more slowly
    _hedging: tuple[re.Pattern[str], ...] = field(default=(), init=False, repr=False,
                                                  compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "hedges", tuple(self.hedges))
        compiled = []
        for index, pattern in enumerate(self.hedges):
            try:
                compiled.append(re.compile(pattern, re.IGNORECASE))
            except re.error as exc:
                raise ConfigError(f"hedges[{index}] is not a valid regex: {exc}") from None
        object.__setattr__(self, "_hedging", tuple(compiled))
        if not 0 <= self.confidence_below <= 1:
            raise ConfigError(f"confidence_below must be within 0..1, got "
                              f"{self.confidence_below}")
        if self.tool_error_streak < 0:
            raise ConfigError("tool_error_streak must be 0 (off) or more")

    def assess(self, request: ModelRequest, response: ModelResponse) -> Escalation | None:
        """The first signal that fires on ``response`` (answering ``request``), or None."""
        text = response.text
        if self.on_empty and not text.strip() and not response.tool_calls:
            return Escalation("empty_answer", "the answer was empty")
        if self.on_malformed_tool_call:
            bad = [c.name for c in response.tool_calls if c.malformed]
            if bad:
                return Escalation("malformed_tool_call",
                                  f"{len(bad)} tool call(s) could not be parsed")
        if self.tool_error_streak:
            streak = trailing_tool_errors(request)
            if streak >= self.tool_error_streak:
                return Escalation("tool_error_streak",
                                  f"the last {streak} tool calls failed")
        if self.confidence_below > 0 and "confidence" in text.lower():
            confidence = self_reported_confidence(text)
            if confidence is not None and confidence < self.confidence_below:
                return Escalation("low_confidence_self_reported",
                                  f"the answer reported confidence {confidence:g}, below "
                                  f"{self.confidence_below:g}")
        if text and any(p.search(text) for p in self._hedging):
            return Escalation("low_confidence_hedging", "the answer hedged")
        return None


def trailing_tool_errors(request: ModelRequest) -> int:
    """Failed tool results in a row at the end of the conversation (assistant turns between
    them do not break the streak; a successful result or a user message does)."""
    count = 0
    for message in reversed(request.messages):
        if message.role == "tool":
            if not message.is_error:
                break
            count += 1
        elif message.role != "assistant":
            break
    return count


def escalation_context(response: ModelResponse, decision: Escalation) -> str:
    """The message the strong model reads after the request: the cheap answer, and why
    it was not trusted."""
    lines = [f"A faster model answered this first, and its answer was not trusted "
             f"({decision.message}). Its answer, for reference:", "<first_answer>"]
    if response.text.strip():
        lines.append(response.text.strip())
    for call in response.tool_calls:
        if call.malformed:
            lines.append(f"(a tool call to {call.name!r} that could not be parsed: "
                         f"{call.malformed})")
        else:
            args = json.dumps(dict(call.arguments), ensure_ascii=False, default=str)
            lines.append(f"(a tool call: {call.name} {args})")
    lines += ["</first_answer>",
              "Answer the request yourself; use tools where they help."]
    return "\n".join(lines)
