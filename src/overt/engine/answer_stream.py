"""A turn's answer as it is generated: typed events for a screen or a socket.

A caller that passes a sink to :meth:`overt.runtime.Runtime.respond`
(``on_answer=``) gets :class:`AnswerDelta` events, pieces of the answer in
order, while the model writes it. Which text the record will hold as the
answer is known only when the turn ends, so the stream keeps one promise:
**once the turn has ended, the deltas since the last** :class:`AnswerReset`
**concatenate to exactly the turn's recorded reply** (``ResponseResult.text``,
whose digest is ``turn.completed``'s ``reply_digest``). To keep it:

- a model response that turns out to call tools is not the answer: the text
  it streamed (a preamble, recorded as a reasoning step) is withdrawn with a
  reset (``reason="tool_call"``), and the next model call streams afresh;
- a plugin's reissue (``post_llm_call_can_reissue``, the router's escalation)
  withdraws the first answer (``reason="reissue"``) before the second streams;
- with a ``transform_llm_output`` plugin nothing streams: the answer is sent
  whole once the plugin has rewritten it, so text a plugin removes (a redacted
  secret) never reaches the screen;
- at the end the stream is settled against the recorded reply: the text a
  model held back (a line that might have been a tool call) is sent then, and
  a reply that is not a continuation of what was shown (a paused turn's
  approval notice, a model error's message, a retried provider call) is sent
  after a reset (``reason="replaced"``).

Streaming changes nothing on the record: the same entries and digests as a
turn without a sink. A sink that raises is logged and sent nothing more; the
turn goes on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

log = logging.getLogger("overt.engine")

ResetReason = Literal["tool_call", "reissue", "replaced"]


@dataclass(frozen=True, slots=True)
class AnswerDelta:
    """The next piece of the answer."""

    text: str
    kind: Literal["delta"] = "delta"


@dataclass(frozen=True, slots=True)
class AnswerReset:
    """The answer text sent since the last reset is withdrawn; ``reason`` says why."""

    reason: ResetReason
    kind: Literal["reset"] = "reset"


AnswerEvent = AnswerDelta | AnswerReset
AnswerSink = Callable[[AnswerEvent], None]


class AnswerStream:
    """One turn's answer stream: what was shown, and how to make it the reply.

    ``live``: deltas are passed on as the model writes them; not live, only the
    settled reply is sent (a plugin may rewrite it).
    """

    def __init__(self, sink: AnswerSink, *, live: bool = True) -> None:
        self.sink = sink
        self.live = live
        self.shown = ""
        self.broken = False

    def text(self, delta: str) -> None:
        """A model's new answer text (a :data:`~overt.models.base.TextSink`)."""
        if self.live and delta:
            self.shown += delta
            self._send(AnswerDelta(delta))

    def withdraw(self, reason: ResetReason) -> None:
        """What was shown is not the answer (see the module docstring)."""
        if self.shown:
            self.shown = ""
            self._send(AnswerReset(reason))

    def settle(self, reply: str) -> None:
        """Make what was shown since the last reset exactly ``reply``."""
        if reply.startswith(self.shown):
            rest = reply[len(self.shown):]
        else:
            self.withdraw("replaced")
            rest = reply
        if rest:
            self.shown += rest
            self._send(AnswerDelta(rest))

    def _send(self, event: AnswerEvent) -> None:
        if self.broken:
            return
        try:
            self.sink(event)
        except Exception as exc:  # noqa: BLE001  a broken screen or socket must not end the turn
            self.broken = True
            log.warning("answer stream stopped: its sink raised %s: %s",
                        type(exc).__name__, exc)
