"""The built-in ``router`` plugin: a cheap model first, the strong one when its answer is weak.

Registered by the runtime (:meth:`overt.runtime.Runtime.from_config`) when the
route has ``escalate_to``, unless ``plugins.disabled`` names ``router``: so a
plugin can replace the rule by disabling this one and answering
``post_llm_call_can_reissue`` itself. Its implementation is ``trylast``, so an
enabled plugin that answers the hook is asked first and wins.

The escalation itself is the engine's reissue: recorded as ``hook.reissued``
(plugin ``router``, the reason code) and a second ``inference`` entry with
``escalated`` true. At most one per loop iteration.
"""

from __future__ import annotations

from overt.hooks.answers import Reissue
from overt.hooks.specs import hookimpl
from overt.models.router import EscalationRule, escalation_context
from overt.types import ModelRequest, ModelResponse

NAME = "router"


class RouterPlugin:
    """Escalates a weak answer of ``cheap`` (any model when None) to ``strong``.

    ``strong`` is a model name or spec the runtime's catalog resolves (a
    ``[models.NAME]`` alias, ``anthropic:NAME``). ``route``: only that route's
    calls are judged (None: every route's).
    """

    def __init__(self, strong: str, rule: EscalationRule | None = None, *,
                 cheap: str | None = None, route: str | None = None) -> None:
        self.strong = strong
        self.rule = rule or EscalationRule()
        self.cheap = cheap
        self.route = route

    @hookimpl(trylast=True)
    def post_llm_call_can_reissue(self, request: ModelRequest, response: ModelResponse,
                                  model: str, route: str) -> Reissue | None:
        """A :class:`Reissue` to the strong model when a signal fires on a cheap answer."""
        if model == self.strong or (self.cheap is not None and model != self.cheap) or (
                self.route is not None and route != self.route):
            return None
        decision = self.rule.assess(request, response)
        if decision is None:
            return None
        return Reissue(model=self.strong, context=escalation_context(response, decision),
                       reason_code=decision.reason_code)
