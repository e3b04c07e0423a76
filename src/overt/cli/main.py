"""``overt``: ask the agent, and read its record.

Exit codes:
    0  success
    1  the turn ended with an error (``ResponseResult.error`` is set)
    2  usage or configuration error
    3  ``ledger verify`` found an entry that does not match
    4  no such turn (or session)
    5  the ledger or the model could not be opened or used, or a span exporter failed
    6  an approval could not be decided (already decided, or not the actor's to decide)
    130 interrupted
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import os
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from overt.channels.delivery import deliver_pending
from overt.cli import (
    approvals_cmd,
    bundle_cmd,
    config_cmd,
    email_cmd,
    eval_cmd,
    export_cmd,
    flags,
    global_flags,
    memory_cmd,
    proofs_cmd,
    render,
    replay_cmd,
    serve_cmd,
    sessions_cmd,
    trail_cmd,
    witness_cmd,
)
from overt.cli.flags import count_flag
from overt.cli.repliers import repliers
from overt.cli.stream_out import TerminalAnswer
from overt.clock import period_start
from overt.config import Config
from overt.config import file as config_file
from overt.errors import (
    LedgerError,
    LedgerIntegrityError,
    ModelError,
    NotFoundError,
    OvertError,
    UsageError,
)
from overt.events import json_schema
from overt.hooks.manager import list_plugins
from overt.ids import new_ulid
from overt.ledger import open_ledger, retention, sqlite_path
from overt.ledger.base import Ledger
from overt.ledger.sqlite_conn import writable
from overt.policy.actors import Actor
from overt.policy.capabilities import Capabilities
from overt.runtime import Runtime, run_sync
from overt.types import IncomingMessage, text_problem
from overt.version import __version__

EXIT_OK, EXIT_TURN_ERROR, EXIT_USAGE, EXIT_VERIFY, EXIT_NOT_FOUND, EXIT_BACKEND = 0, 1, 2, 3, 4, 5

DEMO_QUESTION = "How many tokens have I used today?"


def _progress(line: str) -> None:
    print(f"overt: {line}", file=sys.stderr, flush=True)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="overt", description=__doc__.split("\n")[0],
                                epilog="Exit codes: 0 ok, 1 turn error, 2 usage, 3 verify "
                                       "failed, 4 not found, 5 backend error. "
                                       + global_flags.EPILOG + " " + flags.IDS)
    p.add_argument("--version", action="version", version=f"overt {__version__}")
    global_flags.add(p)
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    ask = sub.add_parser("ask", help="ask the agent one question")
    ask.add_argument("text")
    ask.add_argument("--model", help="local (default, 1.5B) | local:small (0.5B) | "
                     "scripted:FILE | ... (env OVERT_MODEL)")
    ask.add_argument("--json", action="store_true", help="print the ResponseResult as JSON")
    ask.add_argument("--session", metavar="ID", type=flags.session_id,
                     help="continue this session (its earlier turns are the model's history)")
    ask.add_argument("--no-stream", action="store_true",
                     help="print the answer once it is complete (the default when standard "
                          "output is not a terminal)")

    usage = sub.add_parser("usage", help="tokens and money spent (the burn)")
    usage.add_argument("--since", default="today",
                       help="today (default), all, a duration like 24h or 7d, or an ISO time")
    usage.add_argument("--by", default="route,model",
                       help="group by route, model, day and/or session, comma separated "
                            "(default route,model)")
    usage.add_argument("--json", action="store_true")

    chat = sub.add_parser("chat", help="a conversation in one session (empty line or EOF ends)")
    chat.add_argument("--model")
    chat.add_argument("--resume", nargs="?", const="", metavar="ID",
                      type=flags.session_id_or_last,
                      help="continue the last command-line session, or session ID")
    chat.add_argument("--no-stream", action="store_true",
                      help="print each answer once it is complete")

    runs = sub.add_parser("runs", help="recent turns")
    runs.add_argument("--limit", type=count_flag, default=20)
    runs.add_argument("--json", action="store_true")

    show = sub.add_parser("show", help="the full record of one turn")
    show.add_argument("turn_id", type=flags.turn_id)
    show.add_argument("--content", action="store_true",
                      help="also print message, arguments and results (content tier)")
    show.add_argument("--json", action="store_true")

    ledger = sub.add_parser("ledger", help="the ledger itself")
    lsub = ledger.add_subparsers(dest="ledger_command", required=True, metavar="COMMAND")
    verify = lsub.add_parser("verify", help="recompute the hash chain")
    verify.add_argument("--json", action="store_true")
    proofs_cmd.add_verify_flags(verify)
    proofs_cmd.add_parsers(lsub)
    export_cmd.add_parser(lsub)
    lsub.add_parser("migrate", help="create or update the ledger's schema (idempotent)")
    lsub.add_parser("schema", help="print the JSON Schema of every ledger event (an entry's "
                    "kind and data), for verifiers in other languages")
    prune = lsub.add_parser("prune", help="remove entries and content older than a threshold")
    prune.add_argument("--older-than", default=retention.DEFAULT_OLDER_THAN, metavar="AGE",
                       help="a duration like 30d, 12h, 2w, or an ISO 8601 time "
                            f"(default {retention.DEFAULT_OLDER_THAN})")
    prune.add_argument("--json", action="store_true")
    roles = lsub.add_parser("setup-roles", help="PostgreSQL: an owner role (DDL, prune) and a "
                            "writer role (reads; appends to audit_log and content_blobs "
                            "only) for this ledger")
    roles.add_argument("--owner", required=True, help="the role that owns and prunes")
    roles.add_argument("--writer", required=True, help="the role `overt serve` connects as")

    model = sub.add_parser("model", help="model weights")
    msub = model.add_subparsers(dest="model_command", required=True, metavar="COMMAND")
    prepare = msub.add_parser("prepare", help="assemble and check the embedded model's weights")
    prepare.add_argument("name", nargs="?", default="local")

    demo = sub.add_parser("demo", help="ask the embedded model a question that needs a tool")
    demo.add_argument("--model")

    plugins = sub.add_parser("plugins", help="installed plugins, whether enabled, their hooks")
    plugins.add_argument("--json", action="store_true")
    config_cmd.add_parser(sub)
    trail_cmd.add_parsers(sub)
    bundle_cmd.add_parsers(sub)
    memory_cmd.add_parser(sub)
    approvals_cmd.add_parser(sub)
    replay_cmd.add_parser(sub)
    sessions_cmd.add_parser(sub)
    serve_cmd.add_parsers(sub)
    email_cmd.add_parser(sub)
    eval_cmd.add_parser(sub)
    witness_cmd.add_parser(sub)
    global_flags.add_after(p)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = global_flags.merge(parser, parser.parse_args(argv))
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        stream=sys.stderr, format="%(levelname)s %(name)s %(message)s")
    try:
        def load() -> Config:
            config = config_file.load(path=args.config, db=args.db, route=args.route,
                                      model=getattr(args, "model", None))
            return config.with_(
                plugins_enabled=(*config.plugins_enabled, *args.enable_plugin),
                plugins_disabled=(*config.plugins_disabled, *args.disable_plugin),
                plugin_files=(*config.plugin_files, *args.plugin_file))
        if args.command == "config":
            return config_cmd.run(args, load)
        config = load()
        reads = _reads(args)
        return int(_dispatch(args, config.with_(read_only=_read_only(args, config.db, reads),
                                                create_ledger=not reads)))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # the reader went away (`overt runs | head`): nothing left to say to it
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except UsageError as exc:
        print(f"overt: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except NotFoundError as exc:
        print(f"overt: {exc}", file=sys.stderr)
        return EXIT_NOT_FOUND
    except (LedgerError, ModelError, OvertError) as exc:
        print(f"overt: {exc}", file=sys.stderr)
        return EXIT_BACKEND


READ_COMMANDS = {"usage", "runs", "show", "trail", "export", "sessions", "memory"}
"""Commands that only read (refusing an actor a session is recorded, so they may
write that): they open only a ledger that is there (a mistyped ``--db`` or
``?schema=`` is an error, not a new empty ledger that ``verify`` calls ok), and a
SQLite ledger this process cannot write read-only."""
READ_LEDGER_COMMANDS = {"verify", "export", "consistency"}
"""The same, of ``overt ledger``."""


def _reads(args: argparse.Namespace) -> bool:
    """Whether the command only reads (:data:`READ_COMMANDS`)."""
    return args.command in READ_COMMANDS or (
        args.command == "ledger" and args.ledger_command in READ_LEDGER_COMMANDS)


def _read_only(args: argparse.Namespace, db: str, reads: bool) -> bool:
    """Whether to open the ledger writing nothing: told so, or a command that only
    reads a SQLite ledger this process may not write (its file or folder)."""
    if args.read_only:
        return True
    path = sqlite_path(db)
    return reads and path not in (None, ":memory:") and not writable(path)


def _dispatch(args: argparse.Namespace, config: Config) -> int:
    command = args.command
    if command == "ask":
        if not args.text.strip():  # as the HTTP API: no model call for nothing asked
            raise UsageError("the question is empty")
        return run_sync(_ask(config, args.text, as_json=args.json, session=args.session,
                             stream=_streams(args)))
    if command == "demo":
        return run_sync(_demo(config))
    if command == "chat":
        return run_sync(_chat(config, args.resume, stream=_streams(args)))
    if command == "usage":
        return run_sync(_usage(config, args.since, args.by, args.json))
    if command == "runs":
        return run_sync(_runs(config, args.limit, args.json))
    if command == "show":
        return run_sync(_show(config, args.turn_id, args.content, args.json))
    if command == "ledger":
        if args.ledger_command == "migrate":
            return _migrate(config)
        if args.ledger_command == "schema":
            print(json.dumps(json_schema(), indent=2, ensure_ascii=False))
            return EXIT_OK
        if args.ledger_command == "export":
            return run_sync(_export(config, args))
        if args.ledger_command == "prune":
            return run_sync(_prune(config, args.older_than, args.json))
        if args.ledger_command == "setup-roles":
            return _setup_roles(config, args.owner, args.writer)
        if args.ledger_command in ("keygen", "check-proof"):
            return proofs_cmd.run_offline(args, config)
        if args.ledger_command in proofs_cmd.COMMANDS or (
                args.ledger_command == "verify" and args.checkpoints):
            return run_sync(_proofs(config, args))
        return run_sync(_verify(config, args.json))
    if command == "model":
        return _prepare(config, args.name)
    if command == "plugins":
        return _plugins(config, args.json)
    if command == "memory":
        return run_sync(_memory(config, args))
    if command == "approvals":
        return run_sync(_approvals(config, args))
    if command in serve_cmd.COMMANDS:
        return serve_cmd.run(config, args)
    if command in email_cmd.COMMANDS:
        return email_cmd.run(config, args)
    if command in witness_cmd.COMMANDS:
        return witness_cmd.run(args)
    if command in eval_cmd.COMMANDS:
        return eval_cmd.run(config, args)
    if command in sessions_cmd.COMMANDS:
        return run_sync(_sessions(config, args))
    if command in bundle_cmd.COMMANDS:
        return bundle_cmd.check(args)
    if command == "export" and bundle_cmd.wants_bundle(args):
        return run_sync(_bundle(config, args))
    if command in trail_cmd.COMMANDS:
        return run_sync(_trail(config, args))
    if command == "replay":
        return run_sync(replay_cmd.run(args, config))
    raise UsageError(f"unknown command {command}")


@asynccontextmanager
async def _opened(config: Config) -> AsyncIterator[Ledger]:
    """The configured ledger, closed afterwards whatever happens."""
    ledger = open_ledger(config.db, read_only=config.read_only, create=config.create_ledger)
    try:
        yield ledger
    finally:
        await ledger.close()


def _cli_message(text: str, session_id: str) -> IncomingMessage:
    """A message typed here; ``session_id`` is the session's (``cli:ID``) or a bare id."""
    bare = session_id.removeprefix("cli:")
    return IncomingMessage("cli", text, {"session_id": bare})


def _streams(args: argparse.Namespace) -> bool:
    """Whether to print the answer as it is generated: on a terminal, unless told not."""
    return not args.no_stream and not getattr(args, "json", False) and sys.stdout.isatty()


async def _ask(config: Config, text: str, *, as_json: bool, session: str | None = None,
               stream: bool = False) -> int:
    runtime = Runtime.from_config(config, progress=_progress)
    screen = TerminalAnswer(sys.stdout) if stream else None
    try:
        if session is not None:
            await sessions_cmd.existing(runtime.ledger, session)
        session_id = session or f"cli:{new_ulid()}"
        result = await runtime.respond(_cli_message(text, session_id), session_id=session_id,
                                       history=None if session else (),  # new: none to read
                                       on_answer=screen)
    finally:
        await runtime.close()
    if as_json:
        print(json.dumps(result.to_dict(), ensure_ascii=False, indent=2))
    else:
        if screen is not None:
            screen.finish(result.text)
        else:
            print(result.text)
        if result.error:
            print(f"overt: {result.error}", file=sys.stderr)
        print(f"overt: session {result.session_id} (continue it with --session "
              f"{result.session_id})", file=sys.stderr)
    return EXIT_TURN_ERROR if result.error else EXIT_OK


async def _demo(config: Config) -> int:
    runtime = Runtime.from_config(config, progress=_progress)
    try:
        _progress(f"asking {runtime.model.name} (ledger {config.db})")
        result = await runtime.respond(_cli_message(DEMO_QUESTION, new_ulid()))
    finally:
        await runtime.close()
    used = "(engine errored)" if result.tools_used is None else (
        ", ".join(result.tools_used) or "(none)")
    db = f" --db {config.db}"
    me = _invoked_as()
    print(f"question:   {DEMO_QUESTION}")
    print(f"answer:     {result.text}")
    print(f"tools used: {used}")
    print(f"turn id:    {result.turn_id}")
    print(f"its record: {me}{db} show {result.turn_id} --content")
    print(f"verify:     {me}{db} ledger verify")
    if result.error:
        print(f"error:      {result.error}")
    return EXIT_TURN_ERROR if result.error else EXIT_OK


def _invoked_as() -> str:
    """How to run this command again from here: ``.venv/bin/overt`` when it was run so."""
    argv0 = sys.argv[0]
    if os.path.basename(argv0) == "overt" and os.sep in argv0:
        relative = os.path.relpath(argv0)
        return relative if relative.startswith((".", os.sep)) else f".{os.sep}{relative}"
    return "overt"


async def _chat(config: Config, resume: str | None, *, stream: bool = False) -> int:
    """A conversation; each turn's history is read back from the ledger, so a chat
    ended (or a process killed) can be taken up again with ``--resume``."""
    if sys.stdin is None:  # started with standard input closed (<&-)
        raise UsageError("overt chat reads what you say from standard input, which is "
                         "closed; use overt ask TEXT")
    runtime = Runtime.from_config(config, progress=_progress)
    try:
        await runtime.start()  # the tools (MCP servers' too) are known from here
        runtime.preload()  # the embedded model loads and warms while the operator types
        typed = sys.stdin.isatty()
        ends = "empty line or Ctrl-D ends" if typed else "the end of the input ends"
        if resume is None:
            session = f"cli:{new_ulid()}"
            print(f"overt chat, session {session} ({ends})", file=sys.stderr)
        else:
            info = await (sessions_cmd.existing(runtime.ledger, resume) if resume
                          else sessions_cmd.last_cli_session(runtime.ledger))
            session = info.session_id
            print(f"overt chat, resuming session {session} ({info.turns} turns so far; "
                  f"{ends})", file=sys.stderr)
        if isinstance(sys.stdin, io.TextIOWrapper):  # bytes not UTF-8: refused below, by line
            sys.stdin.reconfigure(errors="surrogateescape")
        while True:
            try:
                text = input("you> ")
            except EOFError:
                break
            if not text.strip():
                if typed:
                    break
                continue  # piped: a blank line is not the end, the end of input is
            if problem := text_problem(text):
                print(f"overt: {problem}", file=sys.stderr)
                if typed:
                    continue  # type it again
                return EXIT_USAGE  # piped: nobody can, and what follows may depend on it
            screen = TerminalAnswer(sys.stdout, "overt> ") if stream else None
            result = await runtime.respond(_cli_message(text, session), session_id=session,
                                           on_answer=screen)
            if screen is not None:
                screen.finish(result.text)
            else:
                print(f"overt> {result.text}")
            if result.error:
                print(f"overt: {result.error}", file=sys.stderr)
    finally:
        await runtime.close()
    return EXIT_OK


async def _usage(config: Config, since: str, by: str, as_json: bool) -> int:
    groups = tuple(g.strip() for g in by.split(",") if g.strip())
    unknown = set(groups) - {"route", "model", "day", "session"}
    if unknown or not groups:
        raise UsageError(f"--by takes route, model, day and/or session, not {by!r}")
    start = period_start(since)
    async with _opened(config) as ledger:
        rows = await ledger.usage(since=start, by=groups)
    if as_json:
        print(json.dumps({"since": start, "by": list(groups), "rows": [_slots(r) for r in rows]},
                         indent=2))
    else:
        print(render.usage_table(rows, groups, since=start))
    return EXIT_OK


async def _runs(config: Config, limit: int, as_json: bool) -> int:
    async with _opened(config) as ledger:
        turns = await ledger.recent_turns(limit)
    if as_json:
        print(json.dumps([_slots(t) for t in turns],
                         indent=2))
    else:
        print(render.runs_table(turns))
    return EXIT_OK


def _slots(obj: Any) -> dict[str, Any]:
    return {name: getattr(obj, name) for name in obj.__slots__}


async def _show(config: Config, turn_id: str, content: bool, as_json: bool) -> int:
    async with _opened(config) as ledger:
        entries = await ledger.entries(turn_id=turn_id)
        if not entries:
            raise NotFoundError(f"no turn {turn_id!r} in {config.db}")
        bodies: dict[str, str | None] = {}
        if content:
            for e in entries:
                for key, value in e.data.items():
                    if key.endswith(("_digest", "_sha256")) and isinstance(value, str):
                        bodies[value] = await ledger.content(value, seq=e.seq)
                    if key == "request_digest" and bodies.get(value) is not None:
                        bodies[value] = await render.request_text(ledger, bodies[value])
    if as_json:
        print(json.dumps({"entries": [e.to_dict() for e in entries],
                          "content": bodies if content else None}, ensure_ascii=False, indent=2))
    else:
        print(render.turn_record(entries, bodies))
    return EXIT_OK


async def _approvals(config: Config, args: argparse.Namespace) -> int:
    runtime = Runtime.from_config(config, progress=_progress)
    try:
        code = await approvals_cmd.run(args, runtime)
        channels = repliers(config, runtime)
        if channels:  # a resumed turn asked on Slack or by email is answered there
            await deliver_pending(runtime, channels)
        return code
    finally:
        await runtime.close()


async def _sessions(config: Config, args: argparse.Namespace) -> int:
    async with _opened(config) as ledger:
        return await sessions_cmd.run(args, ledger)


async def _memory(config: Config, args: argparse.Namespace) -> int:
    async with _opened(config) as ledger:
        return await memory_cmd.run(args, ledger, config.memory)


async def _verify(config: Config, as_json: bool) -> int:
    async with _opened(config) as ledger:
        report = await ledger.verify()
    if as_json:
        print(json.dumps(_slots(report), indent=2))
    else:
        print(render.verify_text(report))
    return EXIT_OK if report.ok else EXIT_VERIFY


async def _proofs(config: Config, args: argparse.Namespace) -> int:
    async with _opened(config) as ledger:
        return await proofs_cmd.run(args, config, ledger)


async def _export(config: Config, args: argparse.Namespace) -> int:
    async with _opened(config) as ledger:
        return await export_cmd.run(args, ledger)


async def _bundle(config: Config, args: argparse.Namespace) -> int:
    async with _opened(config) as ledger:
        return await bundle_cmd.export(args, config, ledger)


async def _trail(config: Config, args: argparse.Namespace) -> int:
    async with _opened(config) as ledger:
        return await trail_cmd.run(args, ledger, capabilities=Capabilities(config.capabilities),
                                   operator=Actor.operator(config.operator))


def _migrate(config: Config) -> int:
    ledger = open_ledger(config.db, read_only=config.read_only)  # opening migrates, creates
    try:
        versions = ledger.schema_versions()
    finally:
        run_sync(ledger.close())
    print(f"ledger schema at version {max(versions)} ({len(versions)} migrations applied)")
    return EXIT_OK


def _setup_roles(config: Config, owner: str, writer: str) -> int:
    from overt.ledger.roles import setup_roles

    done = setup_roles(str(config.db), owner, writer)
    print(f"owner {owner} (DDL, prune) and writer {writer} (reads; appends to audit_log and "
          f"content_blobs only) set up in {len(done)} statements; run `overt serve` with "
          f"--db as {writer}")
    return EXIT_OK


async def _prune(config: Config, older_than: str, as_json: bool) -> int:
    cutoff = period_start(older_than)
    if cutoff is None:
        raise UsageError("--older-than needs an age or a time, not 'all'")
    async with _opened(config) as ledger:
        try:  # never on top of a ledger.pruned entry that no prune wrote
            await proofs_cmd.check_before_prune(config, ledger)
        except LedgerIntegrityError as exc:
            print(f"FAILED: {exc}")
            return EXIT_VERIFY
        record = await ledger.prune(cutoff)
        signed = await proofs_cmd.make_after_prune(config, ledger, record) \
            if record.removed_entries else None
    if as_json:
        print(json.dumps(record.data(), indent=2))
    elif record.removed_entries:
        print(f"pruned {record.removed_entries} entries (seq {record.first_removed_seq}.."
              f"{record.through_seq}, {record.removed_from_at} .. {record.removed_to_at}) "
              f"and {record.removed_content} content bodies older than {cutoff}")
        print(f"sealed: entry {record.through_seq} had hash {record.last_removed_hash}")
    else:
        print(f"nothing older than {cutoff} to prune")
    if signed and not as_json:
        print(signed)
    if record.held_back_by_turn:
        print(f"kept from turn {record.held_back_by_turn} on: it is still waiting")
    return EXIT_OK


def _plugins(config: Config, as_json: bool) -> int:
    infos = list_plugins(config.plugins_enabled, config.plugins_disabled, config.plugin_files)
    if as_json:
        print(json.dumps([_slots(i) for i in infos], indent=2))
    else:
        print(render.plugins_table(infos))
    return EXIT_OK


def _prepare(config: Config, name: str) -> int:
    from overt.models.assets import ASSETS, ensure_asset

    if name not in ASSETS:
        raise UsageError(f"no weights to prepare for {name!r}; one of {sorted(ASSETS)}")
    path = ensure_asset(ASSETS[name], config.cache_dir, progress=_progress)
    print(path)
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
