"""The generated reference pages: built from the code each time the site is built.

A reference page holds a marker, ``<!-- overt:reference NAME -->``, that this hook
replaces with markdown made from the code itself:

- ``cli``: every command and flag, from overt's argparse parser;
- ``config``: every ``overt.toml`` key with its type, default and meaning, from the
  pydantic models of :mod:`overt.config.schema`;
- ``events``: every ledger event kind and its fields, from the JSON Schema of
  :mod:`overt.events` (``events.schema.json`` beside the page, committed: a test holds
  it to the code);
- ``http``: every route of the HTTP API, from its OpenAPI document
  (:mod:`overt.channels.openapi`), published beside the page (``openapi.json``).

The functions are plain (code in, markdown out) so the tests read the same output the
site shows (``tests/docs/test_reference.py``).
"""

from __future__ import annotations

import argparse
import html
import json
import re
import types
import typing
from collections.abc import Iterator
from typing import Any

MARKER = re.compile(r"<!--\s*overt:reference\s+(\w+)\s*-->")


# --- the command line -------------------------------------------------------------


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _helps(parser: argparse.ArgumentParser) -> dict[str, str]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return {a.dest: a.help or "" for a in action._choices_actions}
    return {}


def cli_commands() -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser, str]]:
    """Every command of ``overt`` (its words, its parser, its one-line help), depth first."""
    from overt.cli.main import _parser

    def walk(words: tuple[str, ...], parser: argparse.ArgumentParser,
             help_: str) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser, str]]:
        yield words, parser, help_
        helps = _helps(parser)
        for name, sub in _subparsers(parser).items():
            yield from walk((*words, name), sub, helps.get(name, ""))

    yield from walk((), _parser(), "")


def _arguments(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions  # a flag hidden from help (a global flag repeated
            if not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))
            and a.help != argparse.SUPPRESS]  # after each command) is documented once


def _flag_cell(action: argparse.Action) -> str:
    if not action.option_strings:
        name = action.metavar or action.dest
        return f"`{name}`" + (" (optional)" if action.nargs in ("?", "*") else "")
    takes = action.nargs != 0
    metavar = action.metavar or action.dest.upper()
    names = ", ".join(f"`{o}`" for o in action.option_strings)
    if takes and not isinstance(metavar, tuple):
        value = f"[{metavar}]" if action.nargs == "?" else str(metavar)
        names += f" `{value}`"
    return names


def _md(text: str) -> str:
    """Help text as a table cell: pipes escaped, markup of angle brackets kept literal."""
    return html.escape(text, quote=False).replace("|", "\\|").replace("\n", " ")


def _help_cell(action: argparse.Action) -> str:
    text = action.help or ""
    if text == argparse.SUPPRESS:
        text = ""
    if "%(" in text:
        text = text % {"default": action.default, "prog": "overt",
                       "choices": action.choices}
    extras = []
    if action.choices and not isinstance(action, argparse._SubParsersAction):
        extras.append("one of " + ", ".join(f"`{c}`" for c in action.choices))
    if (action.option_strings and action.nargs != 0 and action.default not in (None, [], "")
            and action.default is not argparse.SUPPRESS and "default" not in text):
        extras.append(f"default `{action.default}`")
    if action.required and action.option_strings:
        extras.append("required")
    if (action.option_strings and isinstance(action, argparse._AppendAction)
            and "repeatable" not in text):
        extras.append("repeatable")
    return _md("; ".join([t for t in [text, *extras] if t]))


def cli_markdown() -> str:
    out: list[str] = []
    for words, parser, help_ in cli_commands():
        title = " ".join(("overt", *words))
        level = "##" if len(words) <= 1 else "###"
        out.append(f"{level} `{title}`\n")
        description = parser.description if not words else (help_ or parser.description)
        if description:
            out.append(_md(description) + "\n")
        usage = parser.format_usage().strip().removeprefix("usage: ")
        out.append(f"```text\n{usage}\n```\n")
        args = _arguments(parser)
        if args:
            out.append("| argument | meaning |\n| --- | --- |")
            out.extend(f"| {_flag_cell(a)} | {_help_cell(a)} |" for a in args)
            out.append("")
        subs = _subparsers(parser)
        if subs and words:
            helps = _helps(parser)
            out.append("Commands: " + ", ".join(
                f"[`{name}`](#{_anchor(' '.join(('overt', *words, name)))})"
                + (f" ({_md(helps[name])})" if helps.get(name) else "")
                for name in subs) + ".\n")
        if parser.epilog and not words:
            out.append(_md(parser.epilog) + "\n")
    return "\n".join(out)


def _anchor(title: str) -> str:
    """The id Python-Markdown's toc gives a heading ``\\`title\\```."""
    slug = re.sub(r"[^\w\s-]", "", title.lower()).strip()
    return re.sub(r"[-\s]+", "-", slug)


# --- overt.toml -------------------------------------------------------------------


def _type_name(annotation: Any) -> str:
    from pydantic import BaseModel

    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin in (typing.Union, types.UnionType):
        names = [_type_name(a) for a in args if a is not type(None)]
        return " or ".join(names)
    if origin is typing.Literal:
        return " \\| ".join(f'`"{a}"`' if isinstance(a, str) else f"`{a}`" for a in args)
    if origin is list:
        return f"list of {_type_name(args[0])}" if args else "list"
    if origin is dict:
        return f"table of {_type_name(args[1])}" if args else "table"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "table"
    if annotation is typing.Any:
        return "any"
    return {str: "string", int: "integer", float: "number", bool: "boolean"}.get(
        annotation, getattr(annotation, "__name__", str(annotation)))


def _model_of(annotation: Any) -> tuple[type | None, str]:
    """The pydantic model a field holds, and how: ``table``, ``NAME`` (a table of
    them), ``[]`` (an array of tables)."""
    from pydantic import BaseModel

    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return _model_of(args[0])
    if origin in (typing.Union, types.UnionType):
        for a in args:
            model, how = _model_of(a)
            if model is not None:
                return model, how
        return None, ""
    if origin is dict and args:
        model, how = _model_of(args[1])
        return (model, "NAME") if model is not None and how == "table" else (None, "")
    if origin is list and args:
        model, how = _model_of(args[0])
        return (model, "[]") if model is not None and how == "table" else (None, "")
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, "table"
    return None, ""


def _default(field: Any) -> str:
    from pydantic_core import PydanticUndefined

    if field.is_required():
        return "required"
    if field.default_factory is not None:
        value = field.default_factory()
    else:
        value = field.default
    if value is None or value is PydanticUndefined:
        return "unset"
    from pydantic import BaseModel

    if isinstance(value, BaseModel):
        return "(table)"
    if value in ([], {}):
        return "empty"
    shown = json.dumps(value, ensure_ascii=False)
    if len(shown) > 60:
        return f"the built-in list ({len(value)})" if isinstance(value, list) else "built in"
    return f"`{shown}`".replace("|", "\\|")


def config_keys() -> Iterator[tuple[str, Any, type]]:
    """Every key of ``overt.toml`` as a dotted path (``routes.NAME.model``), its pydantic
    field and the model that holds it."""
    from overt.config.schema import ConfigFile

    def walk(prefix: str, model: type) -> Iterator[tuple[str, Any, type]]:
        for name, field in model.model_fields.items():  # type: ignore[attr-defined]
            path = f"{prefix}{name}"
            yield path, field, model
            sub, how = _model_of(field.annotation)
            if sub is not None:
                step = {"table": ".", "NAME": ".NAME.", "[]": "[]."}[how]
                yield from walk(path + step, sub)

    yield from walk("", ConfigFile)


def _doc(text: str | None) -> str:
    return " ".join((text or "").split())


def config_markdown() -> str:
    from pydantic import BaseModel

    out: list[str] = []
    table_docs: dict[str, str] = {}
    rows: dict[str, list[str]] = {"": []}
    for path, field, _model in config_keys():
        sub, how = _model_of(field.annotation)
        if sub is not None:
            step = {"table": "", "NAME": ".NAME", "[]": "[]"}[how]
            table_docs[path + step] = _doc(sub.__doc__ if sub.__doc__ != BaseModel.__doc__
                                           else "")
            rows.setdefault(path + step, [])
        parent = path.rsplit(".", 1)[0] if "." in path else ""
        for table in sorted(rows, key=len, reverse=True):
            if table and (path.startswith(table + ".")):
                parent = table
                break
        else:
            parent = ""
        rows[parent].append(
            f"| `{path.removeprefix(parent + '.') if parent else path}` "
            f"| {_type_name(field.annotation)} | {_default(field)} "
            f"| {_md(_doc(field.description))} |")
    for table, lines in rows.items():
        if table:
            out.append(f"## `[{table}]`\n")
            if table_docs.get(table):
                out.append(_md(table_docs[table]) + "\n")
        else:
            out.append("## Top level\n")
        out.append("| key | type | default | meaning |\n| --- | --- | --- | --- |")
        out.extend(lines)
        out.append("")
    return "\n".join(out)


# --- ledger events ----------------------------------------------------------------


def _schema_type(prop: dict[str, Any]) -> str:
    if "const" in prop:
        return f"`{json.dumps(prop['const'])}`"
    if "enum" in prop:
        return " \\| ".join(f"`{json.dumps(v)}`" for v in prop["enum"])
    if "anyOf" in prop:
        return " or ".join(_schema_type(p) for p in prop["anyOf"])
    if "$ref" in prop:
        return prop["$ref"].rsplit("/", 1)[-1]
    kind = prop.get("type", "any")
    if kind == "array":
        return f"array of {_schema_type(prop.get('items', {}))}"
    if kind == "object" and "additionalProperties" in prop:
        return "object"
    return str(kind)


def events_markdown() -> str:
    from overt.events import EVENT_TYPES, json_schema

    schema = json_schema()
    out = ["| kind | what it records |\n| --- | --- |"]
    out.extend(f"| [`{kind}`](#{_anchor(kind)}) | {_md(_doc(cls.__doc__))} |"
               for kind, cls in sorted(EVENT_TYPES.items()))
    out.append("")
    for branch in schema["oneOf"]:
        kind = branch["properties"]["kind"]["const"]
        data = branch["properties"]["data"]
        out.append(f"## `{kind}`\n")
        if data.get("description"):
            out.append(_md(_doc(data["description"])) + f" (`{data['title']}`)\n")
        required = set(data["required"])
        if data["properties"]:
            out.append("| field | type | | meaning |\n| --- | --- | --- | --- |")
            for name, prop in data["properties"].items():
                need = "required" if name in required else (
                    f"default `{json.dumps(prop['default'])}`" if "default" in prop
                    else "optional")
                out.append(f"| `{name}` | {_schema_type(prop)} | {need} "
                           f"| {_md(_doc(prop.get('description')))} |")
        else:
            out.append("No fields besides the entry's columns.")
        out.append("")
    return "\n".join(out)


# --- the HTTP API -----------------------------------------------------------------


def openapi_document() -> dict[str, Any]:
    from overt import __version__
    from overt.channels.openapi import document

    return document(__version__)


def http_routes() -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, methods in openapi_document()["paths"].items():
        for method, op in methods.items():
            yield method.upper(), path, op


def http_markdown() -> str:
    doc = openapi_document()
    out = [_md(doc["info"].get("description", "")) + "\n",
           "| route | capability | what it does |\n| --- | --- | --- |"]
    for method, path, op in http_routes():
        cap = re.search(r"`([^`]+)`", op.get("description", ""))
        out.append(f"| [`{method} {path}`](#{_anchor(f'{method} {path}')}) "
                   f"| {f'`{cap.group(1)}`' if cap else 'none'} | {_md(op['summary'])} |")
    out.append("")
    for method, path, op in http_routes():
        out.append(f"## `{method} {path}`\n")
        out.append(_md(op["summary"]) + ".")
        if op.get("description"):
            out.append(" " + _md(op["description"]))
        out.append("\n")
        params = op.get("parameters", [])
        if params:
            out.append("| parameter | in | type | meaning |\n| --- | --- | --- | --- |")
            for p in params:
                req = " (required)" if p.get("required") else ""
                out.append(f"| `{p['name']}`{req} | {p['in']} | {_schema_type(p['schema'])} "
                           f"| {_md(p.get('description', ''))} |")
            out.append("")
        body = op.get("requestBody")
        if body:
            schema = body["content"]["application/json"]["schema"]
            out.append(f"Body: {_schema_type(schema)}"
                       + (" (required)." if body.get("required") else ".") + "\n")
        out.append("| status | meaning |\n| --- | --- |")
        for status, resp in op["responses"].items():
            types_ = ", ".join(f"`{t}`" for t in resp.get("content", {}))
            out.append(f"| {status} | {_md(resp['description'])}"
                       + (f" ({types_})" if types_ else "") + " |")
        out.append("")
    out.append("## Schemas\n")
    for name, schema in doc["components"]["schemas"].items():
        out.append(f"### {name}\n")
        out.append("```json\n" + json.dumps(schema, indent=2, ensure_ascii=False) + "\n```\n")
    return "\n".join(out)


GENERATORS = {"cli": cli_markdown, "config": config_markdown, "events": events_markdown,
              "http": http_markdown}


def render(markdown: str) -> str:
    """``markdown`` with every reference marker replaced by its generated text."""
    return MARKER.sub(lambda m: GENERATORS[m.group(1)](), markdown)


# --- mkdocs hooks -----------------------------------------------------------------


def on_page_markdown(markdown: str, **_: Any) -> str:
    return render(markdown)


def on_files(files: Any, config: Any, **_: Any) -> Any:
    from mkdocs.structure.files import File

    files.append(File.generated(config, "reference/openapi.json",
                                content=json.dumps(openapi_document(), indent=2) + "\n"))
    return files

