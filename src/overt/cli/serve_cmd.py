"""``overt serve`` (the HTTP API, MCP over streamable HTTP, and the cockpit at ``/``)
and ``overt mcp`` (stdio).

Tokens live in a JSON file of SHA-256 digests (``--tokens``, env
``OVERT_TOKENS``, default ``tokens.json`` beside a SQLite ledger, else in the
current directory); ``overt serve --add-token ACTOR`` prints a new token once.
The cockpit signs its login cookies with a secret key in a file (``--web-secret``,
env ``OVERT_WEB_SECRET_FILE``, default ``cockpit.key`` beside the tokens file),
made with mode 0600 on first use: workers given the same file accept each
other's logins, and a restart keeps them.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import threading
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from overt.cli import flags
from overt.cli.flags import bytes_flag, port_flag
from overt.config import Config
from overt.errors import UsageError
from overt.policy.actors import Actor

if TYPE_CHECKING:
    from overt.channels.delivery import Replier
    from overt.engine.resume import Resumed
    from overt.runtime import Runtime

COMMANDS = ("serve", "mcp")


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    serve = sub.add_parser("serve", help="the HTTP API, MCP at /mcp and the cockpit at /; "
                                           "needs overt[server]")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=port_flag, default=8765)
    serve.add_argument("--max-body-bytes", type=bytes_flag, default=1_000_000)
    serve.add_argument("--tokens", metavar="PATH", help="the tokens file (env OVERT_TOKENS)")
    serve.add_argument("--web-secret", metavar="PATH",
                       help="the cockpit's cookie key file, made on first use "
                            "(env OVERT_WEB_SECRET_FILE)")
    serve.add_argument("--no-mcp", action="store_true", help="do not serve MCP at /mcp")
    serve.add_argument("--add-token", metavar="ACTOR", type=flags.actor,
                       help="make a token for ACTOR (e.g. mcp_client:claude-code), store its "
                            "hash, print it once, and exit")
    serve.add_argument("--model", help="model spec (as for ask)")
    mcp = sub.add_parser("mcp", help="the MCP server over stdio; needs overt[mcp]")
    mcp.add_argument("--actor", default="mcp_client:default", type=flags.actor,
                     help="who the stdio client is (default mcp_client:default)")
    mcp.add_argument("--model", help="model spec (as for ask)")


def tokens_path(config: Config, given: str | None) -> Path:
    if given or os.environ.get("OVERT_TOKENS"):
        return Path(given or os.environ["OVERT_TOKENS"])
    db = str(config.db)
    if db and "://" not in db and db != ":memory:":
        return Path(db).parent / "tokens.json"
    return Path("tokens.json")


def web_secret_path(tokens: Path, given: str | None) -> Path:
    """Where the cockpit's cookie key is: ``given``, env ``OVERT_WEB_SECRET_FILE``,
    else ``cockpit.key`` beside the tokens file (``tokens``), which every worker of
    one deployment already shares."""
    if given or os.environ.get("OVERT_WEB_SECRET_FILE"):
        return Path(given or os.environ["OVERT_WEB_SECRET_FILE"])
    return tokens.parent / "cockpit.key"


def run(config: Config, args: argparse.Namespace) -> int:
    if args.command == "mcp":
        return _mcp_stdio(config, Actor.parse(args.actor))
    from overt.channels.auth import Tokens, add_token
    path = tokens_path(config, args.tokens)
    if args.add_token:
        token = add_token(path, Actor.parse(args.add_token))
        print(token)
        print(f"overt: stored its SHA-256 in {path}; the token is not shown again",
              file=sys.stderr)
        return 0
    tokens = Tokens.load(path)
    if not tokens:
        raise UsageError(f"no tokens in {path}: make one with `overt serve --add-token ACTOR`")
    return _serve(config, tokens, args, web_secret_path(path, args.web_secret))


def _stop_on_sigterm(_signum: int, _frame: object) -> None:
    """SIGTERM is how a service manager asks for a stop, and a stop asked for is a
    clean exit. uvicorn takes the signal while it serves (it stops accepting, lets
    the requests in flight end, up to ``timeout_graceful_shutdown``, and the lifespan
    closes the ledger), then raises it again with the handler it found: this one,
    which ends the process with status 0 (the default handler would kill it, -15).
    Before uvicorn serves, it stops start-up the same way."""
    raise SystemExit(0)


def _serve(config: Config, tokens: object, args: argparse.Namespace, secret_file: Path) -> int:
    if threading.current_thread() is not threading.main_thread():  # no signals there
        return _run_server(config, tokens, args, secret_file)
    previous = signal.signal(signal.SIGTERM, _stop_on_sigterm)
    try:
        return _run_server(config, tokens, args, secret_file)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _run_server(config: Config, tokens: object, args: argparse.Namespace,
                secret_file: Path) -> int:
    try:
        import uvicorn
    except ImportError as exc:
        from overt.errors import ExtraMissingError
        raise ExtraMissingError("server", "uvicorn") from exc
    from overt.channels.auth import Tokens
    from overt.channels.http import create_app
    from overt.runtime import Runtime
    assert isinstance(tokens, Tokens)
    runtime = Runtime.from_config(config)
    mcp_app = None
    mcp_lifespan: Callable[[], AbstractAsyncContextManager[Any]] | None = None
    if not args.no_mcp:
        from overt.channels.mcp_server import create_server
        server = create_server(runtime)
        mcp_app = server.streamable_http_app(streamable_http_path="/mcp", host=args.host,
                                             max_request_body_size=args.max_body_bytes)
        mcp_lifespan = server.session_manager.run
    checkpoint_key = None
    if config.checkpoints is not None:  # signed checkpoints while serving
        from overt.ledger.checkpointer import with_checkpoints
        from overt.ledger.signing import read_private, read_public
        private = read_private(Path(config.checkpoints.private_key))
        mcp_lifespan = with_checkpoints(runtime.ledger, private, config.checkpoints,
                                        mcp_lifespan)
        # the cockpit checks signatures with the verifier key beside it, as a reader would
        public = Path(config.checkpoints.private_key + ".pub")
        checkpoint_key = read_public(public) if public.exists() else private.public
    from overt.web import cockpit_routes
    from overt.web.cookie import load_secret
    secret = load_secret(secret_file)
    from overt.channels.delivery import with_delivery
    from overt.cli.repliers import repliers
    channels = repliers(config, runtime)
    # answers owed after an approval decided elsewhere leave from here within seconds
    mcp_lifespan = with_delivery(runtime, channels, mcp_lifespan) if channels else mcp_lifespan
    routes = [*_channels(config, runtime, channels),
              *cockpit_routes(runtime, tokens, budget=config.effective_budget, secret=secret,
                              checkpoint_key=checkpoint_key)]
    app = create_app(runtime, tokens, max_body_bytes=args.max_body_bytes, mcp=mcp_app,
                     mcp_lifespan=mcp_lifespan, extra_routes=routes)
    # uvicorn stops accepting on SIGTERM/SIGINT and lets in-flight requests finish
    # (a turn ends recorded, or paused and resumable) before the lifespan closes the
    # ledger; then SIGTERM exits 0 (_stop_on_sigterm), SIGINT 130.
    uvicorn.run(app, host=args.host, port=args.port, log_level="info" if args.verbose
                else "warning", timeout_graceful_shutdown=30)
    return 0


def _channels(config: Config, runtime: Runtime, channels: dict[str, Replier]) -> list[Any]:
    """The routes of the channels configured here (Slack's Events endpoint), after
    arranging that answers of turns resumed after an approval reach the Slack
    thread or email they were asked in, each time this process resumes one."""
    from overt.channels.delivery import deliver_pending
    from overt.channels.slack import SlackDMHandler, slack_routes
    if channels:
        async def deliver(_resumed: Resumed) -> None:
            await deliver_pending(runtime, channels)
        runtime.on_resumed(deliver)
    settings = config.slack
    if settings is None:
        return []
    handler = channels.get("slack_dm")
    if not isinstance(handler, SlackDMHandler):
        raise UsageError(f"[slack] is configured: set {settings.signing_secret_env} and "
                         f"{settings.bot_token_env}")
    return slack_routes(handler, settings.path)


def _mcp_stdio(config: Config, actor: Actor) -> int:
    from overt.channels.mcp_server import create_server
    from overt.runtime import Runtime
    runtime = Runtime.from_config(config)
    server = create_server(runtime, actor=actor)

    async def main() -> None:
        try:
            await runtime.start()
            runtime.preload()  # the embedded model loads and warms while the client connects
            await server.run_stdio_async()
        finally:
            await runtime.close()
    asyncio.run(main())
    return 0
