"""Configuration: a value (:class:`Config`) and the ``overt.toml`` that fills it.

- :mod:`overt.config.values`: :class:`Config` and its routes, and ``Config.from_env``
  (only entry points read the environment).
- :mod:`overt.config.file`: ``overt.toml`` found, parsed, validated, loaded.
- :mod:`overt.config.schema`: the file's shape (pydantic models) and cross-references.
- :mod:`overt.config.lines`: the line of each key, for error messages.
- :mod:`overt.config.routing`: a config's route composed into a model and plugins.

Each feature's settings live with the feature (:class:`~overt.engine.budget.Budget`,
:class:`~overt.policy.gate.PolicySettings`, :class:`~overt.models.options.ModelAlias`,
:class:`~overt.channels.settings.SlackSettings`, ...): this package assembles them,
and no feature package imports it. They are re-exported here by name.

Importing this package loads only the values; the file and routing modules are
imported by the entry points that need them.
"""

from overt.config.values import (
    Config,
    Route,
    default_cache_dir,
    default_data_dir,
)
from overt.engine.budget import Budget
from overt.models.options import ModelAlias
from overt.policy.gate import PolicySettings

__all__ = [
    "Budget",
    "Config",
    "ModelAlias",
    "PolicySettings",
    "Route",
    "default_cache_dir",
    "default_data_dir",
]
