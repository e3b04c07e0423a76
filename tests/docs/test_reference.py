"""The generated reference pages cover the code: every command and flag, every
``overt.toml`` key, every ledger event kind and field, every HTTP route.

The pages are made by ``docs/_hooks/reference.py`` when the site is built; this reads
the same output and holds it to the code, enumerated here independently.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def ref() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_reference",
                                                  ROOT / "docs" / "_hooks" / "reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(("page", "name"), [("cli", "cli"), ("config", "config"),
                                            ("events", "events"), ("http", "http")])
def test_each_reference_page_holds_its_generated_part(page: str, name: str) -> None:
    text = (ROOT / "docs" / "reference" / f"{page}.md").read_text()
    assert f"<!-- overt:reference {name} -->" in text


def _parsers() -> list[tuple[str, argparse.ArgumentParser]]:
    from overt.cli.main import _parser

    out: list[tuple[str, argparse.ArgumentParser]] = []
    stack = [("overt", _parser())]
    while stack:
        name, parser = stack.pop()
        out.append((name, parser))
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                stack.extend((f"{name} {sub}", p) for sub, p in action.choices.items())
    return out


def test_every_command_and_flag_is_in_the_cli_reference(ref: ModuleType) -> None:
    text = ref.cli_markdown()
    sections = re.split(r"^#{2,3} `(overt[^`]*)`$", text, flags=re.M)
    by_command = dict(zip(sections[1::2], sections[2::2], strict=True))
    parsers = _parsers()
    assert sorted(by_command) == sorted(name for name, _ in parsers)
    for name, parser in parsers:
        for action in parser._actions:
            if (isinstance(action, (argparse._HelpAction, argparse._SubParsersAction))
                    or action.help == argparse.SUPPRESS):  # a global flag, under `overt`
                continue
            for option in action.option_strings or [action.metavar or action.dest]:
                assert f"`{option}`" in by_command[name], f"{name}: {option}"


def test_every_config_key_has_a_type_a_default_and_a_meaning(ref: ModuleType) -> None:
    from overt.config.schema import ConfigFile

    text = ref.config_markdown()
    rows = [[cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]]
            for line in text.splitlines() if line.startswith("| `")]
    assert all(len(row) == 4 for row in rows), [row for row in rows if len(row) != 4]
    documented = {key.strip("`"): (kind, default, meaning)
                  for key, kind, default, meaning in rows}
    seen = 0

    def walk(model: type, depth: int = 0) -> None:
        nonlocal seen
        for key, field in model.model_fields.items():  # type: ignore[attr-defined]
            seen += 1
            assert key in documented, key
            kind, default, meaning = documented[key]
            assert meaning, key
            assert kind.strip() and default.strip(), key
            assert field.description, (f"{model.__name__}.{key} has no docstring: write "
                                       "its meaning below the field in config/schema.py")
            sub, _ = ref._model_of(field.annotation)
            if sub is not None:
                walk(sub, depth + 1)

    walk(ConfigFile)
    assert len(rows) == seen


@pytest.mark.slow
def test_every_event_kind_and_field_is_in_the_events_reference(ref: ModuleType) -> None:
    from overt.events import EVENT_TYPES, json_schema

    text = ref.events_markdown()
    schema = json_schema()
    branches = {b["properties"]["kind"]["const"]: b for b in schema["oneOf"]}
    assert sorted(branches) == sorted(EVENT_TYPES)
    sections = dict(re.findall(r"^## `([^`]+)`\n(.*?)(?=^## |\Z)", text, re.M | re.S))
    for kind, cls in EVENT_TYPES.items():
        fields = [f.name for f in dataclasses.fields(cls)
                  if f.name not in ("turn_id", "session_id")]
        assert sorted(branches[kind]["properties"]["data"]["properties"]) == sorted(fields)
        for name in fields:
            assert f"| `{name}` |" in sections[kind], f"{kind}.{name}"


def test_every_route_is_in_the_http_reference(ref: ModuleType) -> None:
    from overt.channels.openapi import paths

    text = ref.http_markdown()
    documented = set(re.findall(r"^## `([A-Z]+) (/[^`]*)`$", text, re.M))
    expected = {(method.upper(), path) for path, ops in paths().items() for method in ops}
    assert documented == expected  # tests/channels hold these paths to the app's routes


def test_every_public_name_is_in_the_python_reference_with_a_docstring() -> None:
    import overt

    page = (ROOT / "docs" / "reference" / "python.md").read_text()
    for name in overt.__all__:
        if name == "__version__":
            continue
        assert f"::: overt.{name}\n" in page, name
        assert (getattr(overt, name).__doc__ or "").strip(), f"overt.{name} has no docstring"


def test_the_specs_and_the_standalone_verifier_name_the_body_fields_overt_writes() -> None:
    """A body field added to the ledger must reach the format specification, the
    evidence bundle's specification and its standalone verifier, or a bundle holding
    such a body fails to verify."""
    import importlib.util

    from overt.ledger.chain import BODY_FIELDS

    spec = importlib.util.spec_from_file_location(
        "overt_verify_bundle", ROOT / "verifier" / "overt_verify_bundle.py")
    assert spec is not None and spec.loader is not None
    verifier = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(verifier)
    assert set(verifier.BODY_FIELDS) == {*BODY_FIELDS, "title_digest", "body_digest"}
    for page in ("ledger-format.md", "evidence-bundle.md"):
        text = (ROOT / "docs" / "spec" / page).read_text()
        assert all(f"`{name}`" in text for name in BODY_FIELDS), page
