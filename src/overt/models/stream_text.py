"""What of a model's raw text, as it is generated, may be shown as answer text.

A model that writes its tool calls and thinking as text (the embedded Qwen
model, small models behind an OpenAI-compatible server) may be halfway into
``<tool_call>{"name": …`` or ``<think>`` when a piece arrives. The answer the
engine records is that text after :func:`~overt.models.toolcall_parse.split_reasoning`
and :func:`~overt.models.toolcall_parse.parse_tool_calls` took those out, so
:class:`AnswerFilter` passes on only the part that cannot turn into markup:

- nothing from a ``<tool_call>`` on, nor from a line that starts (after
  spaces) with ``{`` or ``[``, nor from a code fence: a bare or fenced call
  may begin there, and whether it is one is known only once the reply is
  complete (a code block in an answer is sent when the reply is);
- nothing inside a ``<think>`` block (it is reasoning, recorded as steps);
- not the tail that may be the start of those (``<to``, a line of spaces);
- white space as the recorded answer has it: none leading, none trailing
  until text follows it, three or more newlines as two.

What it holds back is not lost: the engine sends the rest of the answer once
the response is complete (:mod:`overt.engine.answer_stream`). It never raises.
"""

from __future__ import annotations

import re

from overt.models.base import TextSink

_MARKS = ("<tool_call>", "</tool_call>", "<think>")
_TAILS = (*_MARKS, "</think>")
# what may open a call: a line of bare JSON, or a fence anywhere (any language)
_CALL_LINE = re.compile(r"(?:^|\n)[ \t]*[{\[]|```")
_THINK = re.compile(r"<think>.*?</think>", re.DOTALL)
_BLANKS = re.compile(r"\n{3,}")
_FENCE_BEGUN = re.compile(r"`{1,2}\Z")  # may become a fence


def visible(raw: str) -> str:
    """The part of ``raw`` (a reply so far) sure to be answer text, tidied as the
    recorded answer is."""
    text = _THINK.sub("", raw).replace("</think>", "")
    cut = len(text)
    for mark in _MARKS:
        at = text.find(mark)
        if at >= 0:
            cut = min(cut, at)
    match = _CALL_LINE.search(text, 0, cut)
    if match is not None:
        cut = match.start()
    text = text[:cut]
    begun = _FENCE_BEGUN.search(text)
    if begun is not None:
        text = text[:begun.start()]
    for mark in _TAILS:  # a tail that may be a mark's beginning waits for more
        for size in range(min(len(mark) - 1, len(text)), 0, -1):
            if text.endswith(mark[:size]):
                text = text[:-size]
                break
    return _BLANKS.sub("\n\n", text).strip()


class AnswerFilter:
    """Feeds raw pieces of a reply in; sends ``sink`` the new answer text each brings.

    ``stop()`` sends nothing more (the model has begun a tool call).
    """

    def __init__(self, sink: TextSink) -> None:
        self.sink = sink
        self.raw = ""
        self.sent = ""
        self.stopped = False

    def feed(self, piece: str) -> None:
        if self.stopped or not piece:
            return
        self.raw += piece
        shown = visible(self.raw)
        if len(shown) > len(self.sent) and shown.startswith(self.sent):
            delta = shown[len(self.sent):]
            self.sent = shown
            self.sink(delta)

    def stop(self) -> None:
        self.stopped = True
