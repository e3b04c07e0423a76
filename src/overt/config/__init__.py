"""Configuration: a value (:class:`Config`) and the ``overt.toml`` that fills it.

- :mod:`overt.config.values`: :class:`Config` and its parts, and ``Config.from_env``
  (only entry points read the environment).
- :mod:`overt.config.file`: ``overt.toml`` found, parsed, validated, loaded.
- :mod:`overt.config.schema`: the file's shape (pydantic models) and cross-references.
- :mod:`overt.config.lines`: the line of each key, for error messages.
- :mod:`overt.config.routing`: a config's route composed into a model and plugins.

Importing this package loads only the values; the file and routing modules are
imported by the entry points that need them.
"""

from overt.config.values import (
    Budget,
    Config,
    ModelAlias,
    PolicySettings,
    Route,
    default_cache_dir,
    default_data_dir,
)

__all__ = [
    "Budget",
    "Config",
    "ModelAlias",
    "PolicySettings",
    "Route",
    "default_cache_dir",
    "default_data_dir",
]
