"""A config's route, composed: model aliases, the fallback chain, the ``router`` plugin.

Called by :meth:`overt.runtime.Runtime.from_config` only; a runtime built by
hand composes the same pieces itself (:class:`~overt.models.fallback.FallbackModel`,
:class:`~overt.hooks.router.RouterPlugin`).
"""

from __future__ import annotations

from overt.config.values import Config
from overt.hooks.manager import PluginHost
from overt.hooks.router import NAME as ROUTER
from overt.hooks.router import RouterPlugin
from overt.models.base import Model
from overt.models.fallback import FallbackModel
from overt.models.resolve import ModelCatalog


def add_aliases(config: Config, catalog: ModelCatalog) -> None:
    """Make each ``[models.NAME]`` of ``config`` a name ``catalog`` resolves."""
    for name, alias in config.model_aliases.items():
        catalog.alias(name, alias.spec, alias.settings)


def route_model(config: Config, catalog: ModelCatalog) -> Model:
    """The model the config's route answers with: its model, wrapped in a
    :class:`FallbackModel` when the route names fallbacks.

    Raises:
        UsageError, ExtraMissingError, ModelAssetError: a model cannot be built.
    """
    primary = catalog.get(config.model)
    route = config.active_route
    if route is None or not route.fallback:
        return primary
    return FallbackModel([primary, *(catalog.get(spec) for spec in route.fallback)])


def add_router(config: Config, plugins: PluginHost, model: Model) -> bool:
    """Register the ``router`` plugin when the route escalates and ``plugins.disabled``
    does not name ``router``; whether it was registered.

    The strong model is resolved when first asked for, so a runtime that never
    escalates never builds it.
    """
    route = config.active_route
    if route is None or route.escalate_to is None or ROUTER in config.plugins_disabled:
        return False
    plugins.register(RouterPlugin(route.escalate_to, route.escalation, cheap=model.name,
                                  route=config.route), ROUTER, "built-in")
    return True
