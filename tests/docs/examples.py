"""Runs the code examples of a markdown page as a reader would (the docs' example tests).

The page is parsed with Sybil's markdown lexers; each fenced block is one example,
run in order, all of a page's examples sharing one temporary folder (the reader's
working directory, with ``HOME`` inside it, so the default ledger is a fresh one):

``python``
    run as written, in one namespace per page, in that folder.
``console``
    each ``$ COMMAND`` line runs in bash in that folder, with overt's virtual
    environment first on ``PATH``. The lines after a command are its expected output:
    ``...`` stands for any text, whitespace runs match any whitespace, and ``<NAME>``
    (capitals) stands for one word that later commands use as ``<NAME>`` or ``$NAME``
    (a request id, a token). No expected lines: any output. The command must exit 0,
    or the code its comment names (``# exit 3``). A command ending in ``&`` runs in the
    background until the page is done (and, if it names ``--port N``, the next command
    waits for that port). ``export NAME=VALUE`` holds for the rest of the page, Python
    blocks included. Each port a page names (``--port 8765``, ``127.0.0.1:8765``) is a
    free one in fact, the same for the whole page, in commands and Python alike: several
    checkouts run these tests on one machine at once. ``pip install`` lines are not
    run: the test environment has every extra. The repository's ``examples/`` folder
    is linked into the page's folder, for commands a page runs from the repository's
    root.
``bash``, ``sh``
    run as one bash script in that folder.
a block whose title is a file name (```` ```toml title="overt.toml" ````)
    written to that file before the examples after it run.

Where a model answers, it is a scripted one: ``<!-- examples: model [REPLY, ...] -->``
(JSON: each reply a string or ``{"text", "tool_calls"}``, as ``--model scripted:FILE``
reads them) sets the replies for what follows, through ``OVERT_MODEL``; before one, the
model is the page's own (its ``overt.toml``, else the embedded model, which the tests do
not load: a page that asks before it sets replies fails).
``<!-- examples: postgres SCHEMA -->``: the page uses PostgreSQL at
``127.0.0.1:5432/test`` (as such a page says) in ``SCHEMA``, which is dropped before
and after; with no server there, outside CI, the rest of the page is skipped.
``<!-- examples: skip REASON -->`` skips the next block, which must be one that cannot
run here (Slack's servers, a long build); keep them few. A block of another language
(``toml``, ``json``, ``text``) is data, not an example. A block with no language fails:
every block says what it is.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sybil import Document, Region, Sybil
from sybil.parsers.abstract.lexers import LexingException
from sybil.parsers.markdown.lexers import DirectiveInHTMLCommentLexer, RawFencedCodeBlockLexer

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
RUN = {"python", "console", "bash", "sh"}
TIMEOUT_S = 120
WORD = r"[^\s,;.()`'\"+]+(?:\.[^\s,;.()`'\"+]+)*"
"""What ``<NAME>`` stands for in an expected output: one word (dots inside it, as in a
host name, but not at its end)."""


@dataclass
class Page:
    """What a page's examples share."""

    folder: Path
    env: dict[str, str]
    namespace: dict[str, Any] = field(default_factory=dict)
    bound: dict[str, str] = field(default_factory=dict)
    exported: dict[str, str] = field(default_factory=dict)
    ports: dict[str, str] = field(default_factory=dict)
    background: list[subprocess.Popen[bytes]] = field(default_factory=list)
    skip_next: str | None = None
    skip_rest: str | None = None
    drop_schemas: list[str] = field(default_factory=list)
    wait_port: int | None = None


@dataclass(frozen=True)
class Block:
    language: str
    title: str | None
    source: str
    line: int


@dataclass(frozen=True)
class Directive:
    name: str
    argument: str
    line: int


def _info(text: str) -> tuple[str, str | None]:
    info = text.strip()
    language = info.split(None, 1)[0] if info else ""
    title = re.search(r'title="([^"]*)"', info)
    return language, title.group(1) if title else None


class _Blocks:
    """Every fenced block, with its language and title."""

    def __init__(self) -> None:
        self.lexer = RawFencedCodeBlockLexer(
            info_pattern=re.compile(r"(?P<info>[^\n]*)\n", re.MULTILINE))

    def __call__(self, document: Document) -> Iterator[Region]:
        for region in self.lexer(document):
            language, title = _info(region.lexemes["info"])
            line = document.text.count("\n", 0, region.start) + 1
            region.parsed = Block(language, title, str(region.lexemes["source"]), line)
            region.evaluator = _evaluate
            yield region


class _Directives:
    def __init__(self) -> None:
        self.lexer = DirectiveInHTMLCommentLexer(directive="examples", arguments=r"\w+.*?")

    def __call__(self, document: Document) -> Iterator[Region]:
        for region in self.lexer(document):
            name, _, argument = region.lexemes["arguments"].strip().partition(" ")
            line = document.text.count("\n", 0, region.start) + 1
            region.parsed = Directive(name, (argument + " " + str(region.lexemes["source"]))
                                      .strip(), line)
            region.evaluator = _evaluate
            yield region


SYBIL = Sybil(parsers=[_Blocks(), _Directives()])


def _evaluate(example: Any) -> None:  # Sybil calls each region's evaluator
    raise AssertionError("run pages with run_page()")


def new_page(folder: Path) -> Page:
    home = folder / "home"
    home.mkdir(parents=True)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OVERT_", "XDG_", "PYTEST_", "COV_"))}
    env.update(HOME=str(home), PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}",
               OVERT_CACHE_DIR=str(folder / "cache"), PYTHONUNBUFFERED="1",
               COLUMNS="200", NO_COLOR="1")
    page = Page(folder, env)
    (folder / "examples").symlink_to(ROOT / "examples")  # what pages run "from the root"
    (folder / "verifier").symlink_to(ROOT / "verifier")
    return page


def _set_model(page: Page, replies: list[Any]) -> None:
    path = page.folder / f".replies-{len(list(page.folder.glob('.replies-*')))}.jsonl"
    path.write_text("".join(json.dumps({"text": r} if isinstance(r, str) else r) + "\n"
                            for r in replies))
    page.env["OVERT_MODEL"] = f"scripted:{path}"


def run_page(path: Path, folder: Path) -> int:
    """Run every example of the page at ``path`` in ``folder``; how many ran.

    Raises:
        AssertionError: an example failed (the message names its line).
    """
    try:
        document = SYBIL.parse(path)
    except LexingException as exc:
        raise AssertionError(f"{path}: {exc}") from exc
    page = new_page(folder)
    ran = 0
    cwd = Path.cwd()
    try:
        for example in document:
            item = example.region.parsed
            where = f"{path.relative_to(ROOT)}:{item.line}"
            if isinstance(item, Directive):
                _directive(page, item, where)
                continue
            ran += _block(page, item, where)
    finally:
        os.chdir(cwd)
        for proc in page.background:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=30)
        _drop_schemas(page)
    return ran


def _directive(page: Page, item: Directive, where: str) -> None:
    if item.name == "skip":
        assert item.argument, f"{where}: say why the next block cannot run"
        page.skip_next = item.argument
    elif item.name == "postgres":
        _postgres(page, item.argument, where)
    elif item.name == "model":
        try:
            replies = json.loads(item.argument)
        except ValueError as exc:
            raise AssertionError(f"{where}: the model's replies are not JSON: {exc}") from exc
        assert isinstance(replies, list), f"{where}: the model's replies are a JSON list"
        _set_model(page, replies)
    else:
        raise AssertionError(f"{where}: unknown examples directive {item.name!r}")


PG_SERVER = "postgresql://127.0.0.1:5432/test"


def _postgres(page: Page, schema: str, where: str) -> None:
    """The page's examples from here on use PostgreSQL at :data:`PG_SERVER` (as the page
    says), in ``schema``, dropped before and after; without a server, outside CI, the
    rest of the page is skipped."""
    import psycopg

    assert re.fullmatch(r"[a-z_]+", schema), f"{where}: postgres SCHEMA"
    try:
        with psycopg.connect(PG_SERVER, connect_timeout=3, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    except psycopg.Error:
        if os.environ.get("CI"):
            raise AssertionError(f"{where}: no PostgreSQL at {PG_SERVER}") from None
        page.skip_rest = f"no PostgreSQL at {PG_SERVER}"
        return
    page.drop_schemas.append(schema)


def _drop_schemas(page: Page) -> None:
    if not page.drop_schemas:
        return
    import psycopg

    with psycopg.connect(PG_SERVER, connect_timeout=3, autocommit=True) as conn:
        for schema in page.drop_schemas:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def _block(page: Page, block: Block, where: str) -> int:
    if page.skip_rest is not None:
        return 0
    if page.skip_next is not None:
        page.skip_next = None
        return 0
    if block.title and re.fullmatch(r"[\w./-]+", block.title) and "." in block.title:
        target = page.folder / block.title
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(block.source)
    assert block.language, (f"{where}: a code block with no language: give it one "
                            "(console, python, toml, text, ...)")
    if block.language not in RUN:
        return 0
    os.chdir(page.folder)
    if block.language == "python":
        _wait(page, where)
        code = compile(_ports(page, block.source), where, "exec")
        saved = {k: os.environ.get(k) for k in page.exported}
        os.environ.update(page.exported)  # what the page exported, as its shell has it
        try:
            exec(code, page.namespace)  # the docs' own example, as written
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    elif block.language == "console":
        _console(page, block, where)
    else:
        _shell(page, _ports(page, block.source), where, expect=None, status=0)
    return 1


def _commands(source: str) -> Iterator[tuple[str, list[str]]]:
    command: str | None = None
    expected: list[str] = []
    for line in source.splitlines():
        if line.startswith("$ "):
            if command is not None:
                yield command, expected
            command, expected = line[2:], []
        elif command is not None and command.endswith("\\"):
            command = command + "\n" + line
        elif command is not None:
            expected.append(line)
    if command is not None:
        yield command, expected


def _console(page: Page, block: Block, where: str) -> None:
    commands = list(_commands(block.source))
    assert commands, f"{where}: a console block with no '$ ' command"
    for command, expected in commands:
        status = re.search(r"#\s*exit (\d+)\s*$", command)
        command = _substitute(page, command, where)
        if command.startswith("pip install"):
            continue
        export = re.fullmatch(r"export ([A-Za-z_][A-Za-z0-9_]*)=(\S*)", command.strip())
        if export:  # kept for the page's later commands, as a shell keeps it
            value = subprocess.run(["bash", "-c", f"printf %s {export.group(2)}"],
                                   capture_output=True, text=True, check=True).stdout
            page.exported[export.group(1)] = value
            continue
        _shell(page, command, where, expect=expected, status=int(status.group(1)) if status
               else 0)


_PORT = re.compile(r"(--port[ =]|127\.0\.0\.1:|localhost:)(\d{4,5})\b")


def _ports(page: Page, text: str) -> str:
    """``text`` with each port the page names (``--port 8765``, ``127.0.0.1:8765``)
    replaced by a free one, the same for the whole page: several checkouts run these
    tests on one machine at once, and a port a page names may be taken."""
    def one(m: re.Match[str]) -> str:
        if m.group(2) == "5432":  # PostgreSQL's, which the page does not start
            return m.group(0)
        port = page.ports.get(m.group(2))
        if port is None:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = page.ports[m.group(2)] = str(s.getsockname()[1])
        return m.group(1) + port

    return _PORT.sub(one, text)


def _substitute(page: Page, command: str, where: str) -> str:
    def one(m: re.Match[str]) -> str:
        name = m.group(1)
        assert name in page.bound, f"{where}: <{name}> was not in an earlier output"
        return page.bound[name]

    return _ports(page, re.sub(r"<([A-Z][A-Z0-9_]*)>", one, command))


def _shell(page: Page, command: str, where: str, *, expect: list[str] | None,
           status: int) -> None:
    env = {**page.env, **page.bound, **page.exported}
    _wait(page, where)
    background = re.search(r"&\s*(#.*)?$", command)
    if background and expect is not None:
        proc = subprocess.Popen(["bash", "-c", command[:background.start()]], cwd=page.folder,
                                env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
        page.background.append(proc)
        port = re.search(r"--port[ =](\d+)", command)
        page.wait_port = int(port.group(1)) if port else None
        return
    try:
        out = subprocess.run(["bash", "-c", command], cwd=page.folder, env=env,
                             capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"{where}: `{command}` ran over {TIMEOUT_S} s") from exc
    shown = f"{where}: `{command}`\n--- stdout\n{out.stdout}--- stderr\n{out.stderr}"
    assert out.returncode == status, f"exit {out.returncode}, not {status}: {shown}"
    if expect and any(line.strip() for line in expect):
        _match(page, "\n".join(expect), out.stdout, out.stderr, shown)


def _match(page: Page, expected: str, stdout: str, stderr: str, shown: str) -> None:
    """``expected`` against standard output, or against both outputs (what a terminal
    shows: overt writes its notes, such as a session's id, to standard error)."""
    pattern, names = [], []
    for token in re.split(r"(\.\.\.|<[A-Z][A-Z0-9_]*>|\s+)", expected.strip()):
        if token == "...":
            pattern.append(r".*?")
        elif re.fullmatch(r"<[A-Z][A-Z0-9_]*>", token):
            name = token[1:-1]
            if name in page.bound:
                pattern.append(re.escape(page.bound[name]))
            elif name in names:
                pattern.append(f"(?P={name})")
            else:
                names.append(name)
                pattern.append(rf"(?P<{name}>{WORD})")
        elif token.isspace():
            pattern.append(r"\s+")
        elif token:
            pattern.append(re.escape(token))
    regex = re.compile("".join(pattern), re.S)
    found = regex.fullmatch(stdout.strip()) or regex.fullmatch((stdout + stderr).strip())
    assert found, f"the output does not match the page's:\n{expected}\n{shown}"
    page.bound.update({k: v for k, v in found.groupdict().items() if v is not None})


def _wait(page: Page, where: str) -> None:
    """Wait for the port a background command named, once, before what follows it."""
    if page.wait_port is not None:
        port, page.wait_port = page.wait_port, None
        _wait_for(port, where)


def _wait_for(port: int, where: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
            return
        time.sleep(0.2)
    raise AssertionError(f"{where}: nothing answered on port {port} within 60 s")


def pages() -> list[Path]:
    """The pages whose examples run: the README, the changelog and every docs page."""
    return [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").rglob("*.md"))]


def have(tool: str) -> bool:
    return shutil.which(tool) is not None
