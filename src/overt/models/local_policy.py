"""What the embedded model does beyond decoding its template: :class:`LocalPolicy`.

:mod:`overt.models.local` decodes with the GGUF's own chat template, constrains a
call the model begins with a grammar built from the offered tools' schemas, and
answers a tool round folded into one user message. Those are how the model is run.
Everything else it does to steer a small model is a part of this policy, each one
switchable, all of them off with ``LocalPolicy.off()`` (config
``[providers.local] local_policy = false``, or ``overt eval --local-policy off``):

- ``no_tool_choice``: the call grammar offers one more choice, ``no_tool``
  (:data:`overt.models.call_choice.NO_TOOL`), for a request no offered tool serves;
  chosen, the reply is decoded again with no tools. Which requests those are is the
  model's to judge from the tools it is shown, never from the grammar of the sentence.
- ``known_ids``: an id argument may only hold an id the conversation holds; a tool
  that requires one, with none there, is not callable.
- ``no_guessed_filters``: optional enum filters without a default and ``limit`` are
  left out of the call grammar.
- ``fresh_figures``: a reply that restates an earlier answer's figure, or in a
  follow-up states one no message holds, is dropped for a call.
- ``json_fence_call``: a reply opening a fenced JSON block is taken for a call.
- ``call_probe``: a reply whose first token is not a call's opening is still a call
  when the call's openings hold at least ``call_threshold`` of its probability.
- ``brief_results``: the answer turn reads JSON tool results as short labelled lines
  (:func:`overt.models.result_text.brief`).

Each part that changed a reply is named in the response's ``decisions``
(``policy:<part>``), which the ledger keeps as the inference's ``adapter_decisions``.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

PARTS = ("no_tool_choice", "known_ids", "no_guessed_filters", "fresh_figures",
         "json_fence_call", "call_probe", "brief_results")
"""The parts of the policy, by name."""


@dataclass(frozen=True, slots=True)
class LocalPolicy:
    """Which of the embedded model's heuristics run (all of them by default)."""

    no_tool_choice: bool = True
    known_ids: bool = True
    no_guessed_filters: bool = True
    fresh_figures: bool = True
    json_fence_call: bool = True
    call_probe: bool = True
    brief_results: bool = True

    @classmethod
    def off(cls) -> LocalPolicy:
        """The policy with every part off: the model as its template and grammar run it."""
        return cls(**{f.name: False for f in fields(cls)})

    @classmethod
    def of(cls, value: bool | str) -> LocalPolicy:
        """The policy a setting names: true/``"on"`` (every part), false/``"off"``
        (none), or a comma-separated list of the parts to keep on.

        Raises:
            ValueError: a part is not one of :data:`PARTS`.
        """
        if isinstance(value, bool):
            return cls() if value else cls.off()
        text = value.strip().lower()
        if text in ("on", "true", "all"):
            return cls()
        if text in ("off", "false", "none", ""):
            return cls.off()
        wanted = [p.strip() for p in text.split(",") if p.strip()]
        unknown = [p for p in wanted if p not in PARTS]
        if unknown:
            raise ValueError(f"unknown local policy part {', '.join(unknown)}; "
                             f"known: on, off, {', '.join(PARTS)}")
        return replace(cls.off(), **{p: True for p in wanted})

    @property
    def parts(self) -> tuple[str, ...]:
        """The parts that are on."""
        return tuple(p for p in PARTS if getattr(self, p))
