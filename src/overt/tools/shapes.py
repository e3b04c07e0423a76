"""Tool descriptors in the two shapes model APIs speak, converted in one place.

=========  ===========================================================================
shape      descriptor
=========  ===========================================================================
Anthropic  ``{"name": N, "description": D, "input_schema": S}``
OpenAI     ``{"type": "function", "function": {"name": N, "description": D,
           "parameters": S}}`` (also what vLLM, llama.cpp server and Ollama take)
=========  ===========================================================================

overt's own :class:`~overt.types.ToolSpec` is the neutral, Anthropic-like shape;
adapters convert at the edge with :func:`to_anthropic` / :func:`to_openai`, and
descriptors that plugins hand in (either shape) become specs with
:func:`to_spec`. Converting a well-formed descriptor there and back gives it
back unchanged; keys outside the shape are dropped, but for a plugin's word that
the tool changes nothing (:func:`declared_read_only`): ``"read_only": true`` or MCP's
tool annotation ``"annotations": {"readOnlyHint": true}``, beside either shape or,
in the OpenAI shape, inside its ``"function"`` object::

    {"type": "function", "function": {"name": "kora__get_operational_state",
                                      "parameters": {...}, "read_only": true}}
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from overt.errors import UsageError
from overt.types import ToolSpec

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]{0,63}$")
_EMPTY_SCHEMA: Mapping[str, Any] = {"type": "object", "properties": {}}


def to_anthropic(spec: ToolSpec) -> dict[str, Any]:
    """``spec`` as an Anthropic tool descriptor."""
    return {"name": spec.name, "description": spec.description,
            "input_schema": dict(spec.input_schema)}


def to_openai(spec: ToolSpec) -> dict[str, Any]:
    """``spec`` as an OpenAI function-tool descriptor."""
    return {"type": "function", "function": {
        "name": spec.name, "description": spec.description,
        "parameters": dict(spec.input_schema)}}


def from_anthropic(descriptor: Mapping[str, Any]) -> ToolSpec:
    """The spec an Anthropic-shaped descriptor describes.

    Raises:
        UsageError: it is not an Anthropic tool descriptor.
    """
    _require_mapping(descriptor)
    return _spec(descriptor.get("name"), descriptor.get("description"),
                 descriptor.get("input_schema"), "input_schema")


def from_openai(descriptor: Mapping[str, Any]) -> ToolSpec:
    """The spec an OpenAI-shaped descriptor describes (``parameters`` may be left out).

    Raises:
        UsageError: it is not an OpenAI function-tool descriptor.
    """
    _require_mapping(descriptor)
    if descriptor.get("type") != "function" or not isinstance(descriptor.get("function"),
                                                               Mapping):
        raise UsageError('an OpenAI tool descriptor needs "type": "function" and a '
                         '"function" object')
    function = descriptor["function"]
    return _spec(function.get("name"), function.get("description"),
                 function.get("parameters", _EMPTY_SCHEMA), "parameters")


def to_spec(value: ToolSpec | Mapping[str, Any]) -> ToolSpec:
    """A spec from a spec or a descriptor of either shape (told apart by ``"type"``).

    Raises:
        UsageError: ``value`` is neither a spec nor a well-formed descriptor.
    """
    if isinstance(value, ToolSpec):
        _spec(value.name, value.description, value.input_schema, "input_schema")
        return value
    _require_mapping(value)
    spec = from_openai(value) if "function" in value else from_anthropic(value)
    return replace(spec, read_only=True) if declared_read_only(value, spec.name) else spec


def declared_read_only(descriptor: Mapping[str, Any], name: str = "") -> bool:
    """Whether a descriptor says its tool changes nothing: ``"read_only": true``, or
    ``"annotations": {"readOnlyHint": true}`` (MCP's tool annotation), beside the
    descriptor or inside an OpenAI descriptor's ``"function"``. Unsaid: False.

    Raises:
        UsageError: a value is not true or false, or two of them disagree.
    """
    places = [descriptor]
    if isinstance(descriptor.get("function"), Mapping):
        places.append(descriptor["function"])
    said: dict[str, bool] = {}
    for place in places:
        annotations = place.get("annotations")
        if annotations is not None and not isinstance(annotations, Mapping):
            raise UsageError(f"tool {name}: annotations must be an object")
        for key, value in (("read_only", place.get("read_only")),
                           ("annotations.readOnlyHint",
                            (annotations or {}).get("readOnlyHint"))):
            if value is None:
                continue
            key = key if place is descriptor else f"function.{key}"
            if not isinstance(value, bool):
                raise UsageError(f"tool {name}: {key} must be true or false")
            said[key] = value
    if len(set(said.values())) > 1:
        stated = ", ".join(f"{k}={str(v).lower()}" for k, v in said.items())
        raise UsageError(f"tool {name}: {stated} disagree on whether the tool changes "
                         "anything")
    return any(said.values())


def anthropic_to_openai(descriptor: Mapping[str, Any]) -> dict[str, Any]:
    """An Anthropic descriptor in the OpenAI shape.

    Raises:
        UsageError: it is not an Anthropic tool descriptor.
    """
    return to_openai(from_anthropic(descriptor))


def openai_to_anthropic(descriptor: Mapping[str, Any]) -> dict[str, Any]:
    """An OpenAI descriptor in the Anthropic shape.

    Raises:
        UsageError: it is not an OpenAI function-tool descriptor.
    """
    return to_anthropic(from_openai(descriptor))


def _require_mapping(value: object) -> None:
    if not isinstance(value, Mapping):
        raise UsageError(f"a tool descriptor must be an object, got {type(value).__name__}")


def _spec(name: object, description: object, schema: object, schema_key: str) -> ToolSpec:
    if not isinstance(name, str) or not _NAME.match(name):
        raise UsageError(f"invalid tool name {name!r}: letters, digits, _ and -, max 64")
    if description is None:
        description = ""
    if not isinstance(description, str):
        raise UsageError(f"tool {name}: description must be a string")
    if not isinstance(schema, Mapping) or schema.get("type", "object") != "object":
        raise UsageError(f"tool {name}: {schema_key} must be a JSON schema of an object")
    return ToolSpec(name, description, schema)
