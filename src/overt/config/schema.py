"""The shape of ``overt.toml``: pydantic models (unknown keys are errors) and the
cross-references a schema cannot check (a route naming a model that does not exist).

Values here are what the file says; :mod:`overt.config.file` turns them into a
:class:`overt.config.Config` with the environment and the command line over them.
"""

from __future__ import annotations

import re
import types
from collections.abc import Iterable, Iterator, Mapping
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, field_validator

from overt.models.router import DEFAULT_HEDGES

BUILTIN_SCHEMES = ("local", "scripted", "anthropic", "openai")
"""Model spec schemes known without loading a plugin."""

Loc = tuple[str | int, ...]
NonNegInt = Annotated[int, Field(ge=0)]
NonNegFloat = Annotated[float, Field(ge=0)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True,
                              use_attribute_docstrings=True)


class LimitsFile(_Strict):
    max_tool_calls: Annotated[int, Field(ge=1)] | None = None
    """Tool calls the model may ask for in one response (default 5; env OVERT_MAX_TOOL_CALLS)."""
    max_tool_calls_per_turn: Annotated[int, Field(ge=1)] | None = None
    """Tool calls in one turn (default 25; env OVERT_MAX_TOOL_CALLS_PER_TURN)."""
    max_consecutive_tool_errors: Annotated[int, Field(ge=1)] | None = None
    """Failed tool calls in a row after which the model gets one last call without tools (default
    3)."""
    tool_timeout_s: Annotated[float, Field(gt=0)] | None = None
    """Seconds a tool may run before it is stopped as `timeout` (env OVERT_TOOL_TIMEOUT_S)."""
    max_tool_result_chars: Annotated[int, Field(ge=100)] | None = None
    """Characters of one tool result the model reads, the rest cut with a line saying so; the record
    keeps it whole (default 50,000)."""
    pre_tool_call_timeout_s: Annotated[float, Field(gt=0)] | None = None
    """Seconds a plugin's `pre_tool_call` check may take; one that times out blocks the call (env
    OVERT_PRE_TOOL_CALL_TIMEOUT_S)."""


class ProviderFile(_Strict):
    """A provider's settings. ``api_key_env`` names the variable holding the key: keys
    are never written in the file."""

    base_url: str | None = None
    """The provider's API endpoint (a gateway, or an OpenAI-compatible server)."""
    api_key_env: Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")] | None = None
    """The environment variable holding the API key (never the key itself)."""
    timeout_s: Annotated[float, Field(gt=0)] | None = None
    """Seconds per attempt (connecting gets at most 10)."""
    max_retries: NonNegInt | None = None
    """Retries of a failed call, with the provider SDK's backoff (default 2)."""
    # Sampling and adapter options, passed to the provider as they are; a provider
    # refuses one it does not take when the model is built.
    max_tokens: Annotated[int, Field(gt=0)] | None = None
    """The most tokens the model may write per call."""
    temperature: Annotated[float, Field(ge=0)] | None = None
    """Sampling temperature, passed to the provider."""
    seed: int | None = None
    """Sampling seed, passed to a provider that takes one."""
    fold_tool_results: bool | None = None
    """Send the tool round as one user message without tools (small OpenAI-compatible models answer
    better so)."""


class ModelFile(ProviderFile):
    """``[models.NAME]``: a name for a model spec, with provider settings of its own."""

    spec: Annotated[str, Field(min_length=1)]
    """The model spec this name stands for (`local`, `openai:NAME`, `anthropic:MODEL`,
    `scripted:FILE`)."""


class PriceFile(_Strict):
    """USD per million tokens."""

    input: NonNegFloat
    """USD per million input tokens."""
    output: NonNegFloat
    """USD per million output tokens."""


class BudgetFile(_Strict):
    session_tokens: NonNegInt | None = None
    """Tokens one session may use; a model call that would go over is not made."""
    day_tokens: NonNegInt | None = None
    """Tokens one UTC day may use."""
    session_usd: NonNegFloat | None = None
    """Dollars one session may spend."""
    day_usd: NonNegFloat | None = None
    """Dollars one UTC day may spend."""


class EscalationFile(_Strict):
    """``[routes.NAME.escalation]``: the signals of :class:`overt.models.router.EscalationRule`.

    ``hedges`` replaces the default phrases; ``extra_hedges`` adds to them.
    """

    hedges: list[str] = Field(default_factory=lambda: list(DEFAULT_HEDGES))
    """Regexes of hedging phrases that escalate an answer (replaces the built-in list)."""
    extra_hedges: list[str] = Field(default_factory=list)
    """Regexes added to the built-in hedging phrases."""
    confidence_below: Annotated[float, Field(ge=0, le=1)] = 0.5
    """Escalate when the answer reports a confidence below this (0 to 1)."""
    on_empty: bool = True
    """Escalate an empty answer."""
    on_malformed_tool_call: bool = True
    """Escalate a tool call that could not be parsed."""
    tool_error_streak: NonNegInt = 2
    """Escalate after this many failed tool results in a row (0: never)."""

    @field_validator("hedges", "extra_hedges")
    @classmethod
    def _regexes(cls, value: list[str]) -> list[str]:
        for pattern in value:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"{pattern!r} is not a valid regex: {exc}") from None
        return value


class RouteFile(_Strict):
    """``[routes.NAME]``: a model, an optional stronger one to escalate to, fallbacks on
    provider errors, the tools offered (all when absent), a budget of its own."""

    model: str | None = None
    """The model (a `[models.NAME]` name or a spec) that answers on this route."""
    escalate_to: str | None = None
    """A stronger model to ask again when an escalation signal fires."""
    fallback: list[str] = Field(default_factory=list)
    """Models to try in order when the provider fails."""
    tools: list[str] | None = None
    """The tools offered on this route (all when unset)."""
    budget: BudgetFile | None = None
    """A budget of the route's own, beside `[budget]`."""
    escalation: EscalationFile = Field(default_factory=EscalationFile)
    """The signals that escalate an answer to `escalate_to`."""


class ConditionFile(_Strict):
    """``[[policy.rules.when]]``: a test on one argument (see :mod:`overt.policy.rules`)."""

    model_config = ConfigDict(extra="forbid", strict=False, frozen=True,
                              use_attribute_docstrings=True)
    arg: Annotated[str, Field(min_length=1)]
    """A dotted path into the call's arguments (`target.env`)."""
    op: Literal["eq", "ne", "in", "not_in", "glob", "regex", "gt", "ge", "lt", "le", "exists",
                "absent", "contains"]
    """How the argument is compared with `value`."""
    value: Any = None
    """What the argument is compared with (unused by `exists` and `absent`)."""


class RuleFile(_Strict):
    """``[[policy.rules]]``: one rule; matchers left out match anything."""

    name: Annotated[str, Field(min_length=1)]
    """A unique name, recorded as the rule that fired."""
    effect: Literal["allow", "deny", "ask", "quarantine"]
    """What the rule decides."""
    reason_code: Annotated[str, Field(pattern=r"^[a-z][a-z0-9_.\-]{0,63}$")]
    """A short code recorded with the decision and shown to the model."""
    message: str = ""
    """Why, in words: shown to the model and to the operator."""
    priority: int = 0
    """Higher rules are tried first; ties keep file order."""
    tools: list[str] = Field(default_factory=lambda: ["*"])
    """Tool name globs the rule applies to."""
    sources: list[Literal["cli", "http", "slack_dm", "email", "mcp"]] | None = None
    """Channels the rule applies to (all when unset)."""
    routes: list[str] | None = None
    """Route name globs the rule applies to (all when unset)."""
    actors: list[str] | None = None
    """Actor globs the rule applies to (all when unset)."""
    mutating: bool | None = None
    """Only mutating tools (true) or only read-only ones (false); both when unset."""
    when: list[ConditionFile] = Field(default_factory=list)
    """Conditions on the arguments, all of which must hold."""


class PolicyFile(_Strict):
    """``[policy]``: rules (higher ``priority`` first), whether the defaults follow them,
    and how long an approval request waits before it expires."""

    defaults: bool = True
    """Whether the default rules follow yours; false: a call no rule matches is denied."""
    approval_ttl_s: Annotated[float, Field(gt=0)] | None = None
    """Seconds an approval request waits before it expires (default 86,400)."""
    rules: list[RuleFile] = Field(default_factory=list)
    """The rules, tried by priority."""


class McpServerFile(_Strict):
    """``[mcp_servers.NAME]``: an MCP server whose tools the agent may use, started
    with ``command`` (stdio) or reached at ``url`` (streamable HTTP)."""

    command: list[str] | None = None
    """The command starting a server that speaks MCP on stdio."""
    url: str | None = None
    """The URL of a server speaking MCP's streamable HTTP transport."""
    env: dict[str, str] = Field(default_factory=dict)
    """Environment variables for a `command` server."""
    read_only: list[str] = Field(default_factory=list)
    """Tools of the server to treat as read-only (besides those it marks so)."""
    timeout_s: Annotated[float, Field(gt=0)] = 30.0
    """Seconds a call to the server may take."""
    headers: dict[str, str] = Field(default_factory=dict)
    """Sent to a ``url`` server with every request."""
    bearer_token_env: Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")] | None = None
    """The environment variable holding a token for ``Authorization: Bearer``."""


class PluginsFile(_Strict):
    enabled: list[str] = Field(default_factory=list)
    """Plugins to run, by name (env OVERT_PLUGINS_ENABLED)."""
    disabled: list[str] = Field(default_factory=list)
    """Plugins never to run, even if enabled; `builtin` removes overt's own tools (env
    OVERT_PLUGINS_DISABLED)."""
    files: list[str] = Field(default_factory=list)
    """Python files offered as plugins, named by their stem (env OVERT_PLUGIN_FILES)."""


class MemoryFile(_Strict):
    """``[memory]``: node kinds besides the 18 built in, and (from kind, to kind) pairs
    each link kind may join besides the built-in rules (``*``: any kind); see
    :mod:`overt.memory.kinds`."""

    kinds: list[str] = Field(default_factory=list)
    """Node kinds besides the built-in ones."""
    links: dict[str, list[Annotated[list[str], Field(min_length=2, max_length=2)]]] = Field(
        default_factory=dict)
    """Link kind -> the (from kind, to kind) pairs it may join, besides the built-in rules."""


EnvName = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]
ActorName = Annotated[str, Field(pattern=r"^(operator|agent|mcp_client|system):\S+$")]
"""An actor as config names one, ``KIND:NAME`` (:mod:`overt.policy.actors`)."""


class SlackFile(_Strict):
    """``[slack]``: the Slack DM channel (see :class:`overt.channels.settings.SlackSettings`);
    secrets are named by variable, never written here."""

    allowed_users: list[str] = Field(default_factory=list)
    """Slack user ids whose direct messages are answered; no one else's are."""
    signing_secret_env: EnvName = "SLACK_SIGNING_SECRET"
    """The variable holding the app's signing secret."""
    bot_token_env: EnvName = "SLACK_BOT_TOKEN"
    """The variable holding the bot token (`xoxb-...`)."""
    api_base_url: str = "https://slack.com/api/"
    """Slack's Web API base URL."""
    path: Annotated[str, Field(pattern=r"^/")] = "/slack/events"
    """Where `overt serve` mounts the Events API endpoint."""
    actors: dict[str, ActorName] = Field(
        default_factory=dict,
        description="Slack user id to overt actor (`U0123 = \"operator:alice\"`): the "
                    "person's sessions are owned by that actor, and its capabilities apply")
    default_actor: ActorName | None = Field(
        None, description="The actor of an allowed user `actors` does not list "
                          "(default: the operator, `operator:default` or as the top-level "
                          "`operator` names it)")
    dm_session_idle_s: Annotated[float, Field(ge=0)] = Field(
        1800.0, description="A DM typed in the main pane continues the session of the "
                            "user's previous main-pane DM sent less than this many seconds "
                            "before it; 0: each main-pane DM starts a session. A thread "
                            "continues the session of the message it hangs from")


class EmailFile(_Strict):
    """``[email]``: the email channel (see :class:`overt.channels.settings.EmailSettings`)."""

    imap_host: str
    """The IMAP server to poll."""
    imap_port: Annotated[int, Field(gt=0, lt=65536)] = 993
    """The IMAP port."""
    imap_user: str
    """The IMAP login."""
    imap_password_env: EnvName = "OVERT_IMAP_PASSWORD"
    """The variable holding the IMAP password."""
    imap_ssl: bool = True
    """IMAP over TLS."""
    mailbox: str = "INBOX"
    """The mailbox polled for unread mail."""
    smtp_host: str
    """The SMTP server replies are sent through."""
    smtp_port: Annotated[int, Field(gt=0, lt=65536)] = 587
    """The SMTP port."""
    smtp_user: str | None = None
    """The SMTP login (none: no login)."""
    smtp_password_env: EnvName | None = None
    """The variable holding the SMTP password."""
    smtp_starttls: bool = True
    """Upgrade the SMTP connection with STARTTLS."""
    allowed_senders: list[str] = Field(default_factory=list)
    """Addresses whose mail is answered; no one else's is."""
    from_address: Annotated[str, Field(pattern=r"^[^@\s]+@[^@\s]+$")]
    """The address replies come from."""
    poll_interval_s: Annotated[float, Field(gt=0)] = 60.0
    """Seconds between polls of `overt email poll`."""
    actors: dict[str, ActorName] = Field(
        default_factory=dict,
        description="Sender address to overt actor (`\"alice@example.org\" = "
                    "\"operator:alice\"`, case-insensitive): the person's sessions are "
                    "owned by that actor, and its capabilities apply")
    default_actor: ActorName | None = Field(
        None, description="The actor of an allowed sender `actors` does not list "
                          "(default: the operator)")


class WitnessFile(_Strict):
    """One cosigning witness of ``[checkpoints] witnesses``."""

    url: Annotated[str, Field(pattern=r"^https?://")]
    """Where it answers ``POST /add-checkpoint`` (C2SP tlog-witness)."""
    vkey: str
    """Its cosignature/v1 verifier key (``NAME+KEYID+BASE64``), as `overt witness keygen`
    prints it."""


class CheckpointsFile(_Strict):
    """``[checkpoints]``: signed checkpoints of the ledger (see
    :class:`overt.ledger.checkpoints.CheckpointSettings`); the key stays in its file."""

    private_key: str
    """The signing key's file (mode 0600; keep it off the ledger's host if you can)."""
    witness_dir: str
    """The directory each checkpoint is written to (ideally another machine's disk)."""
    commands: list[list[str]] = Field(default_factory=list)
    """Commands each given every checkpoint on standard input."""
    urls: list[Annotated[str, Field(pattern=r"^https?://")]] = Field(default_factory=list)
    """URLs each POSTed every checkpoint."""
    witnesses: list[WitnessFile] = Field(default_factory=list)
    """Cosigning witnesses: each is sent every checkpoint with its consistency proof, and
    its cosignature is kept beside the checkpoint (`<size>.cosignatures`)."""
    every_entries: Annotated[int, Field(ge=1)] = 10_000
    """`overt serve` signs a checkpoint after this many new entries..."""
    every_seconds: Annotated[float, Field(gt=0)] = 300.0
    """...or after this many seconds, whichever comes first."""


class ConfigFile(_Strict):
    """The whole of ``overt.toml``."""

    db: str | None = None
    """The ledger: a SQLite file (relative to this file) or a `postgresql://` URL (env OVERT_DB)."""
    model: str | None = None
    """The model spec or `[models]` name to answer with (env OVERT_MODEL; default `local`)."""
    route: str | None = None
    """The route to answer on (env OVERT_ROUTE)."""
    transcript: str | None = None
    """The transcript file, one line per reply (default `transcript.jsonl` beside the ledger; env
    OVERT_TRANSCRIPT)."""
    system_prompt: str | None = None
    """A file replacing the shipped system prompt (env OVERT_SYSTEM_PROMPT)."""
    cache_dir: str | None = None
    """Where model weights and prompt caches are kept (env OVERT_CACHE_DIR)."""
    limits: LimitsFile = Field(default_factory=LimitsFile)
    """Limits of a turn."""
    models: dict[str, ModelFile] = Field(default_factory=dict)
    """Names for model specs, with provider settings of their own."""
    routes: dict[str, RouteFile] = Field(default_factory=dict)
    """Routes: a model, escalation, fallbacks, tools and a budget."""
    prices: dict[str, PriceFile] = Field(default_factory=dict)
    """Prices per model, overriding the shipped table."""
    budget: BudgetFile = Field(default_factory=BudgetFile)
    """Token and dollar budgets, per session and per UTC day."""
    plugins: PluginsFile = Field(default_factory=PluginsFile)
    """Which plugins run."""
    memory: MemoryFile = Field(default_factory=MemoryFile)
    """Memory's extra node and link kinds."""
    providers: dict[str, ProviderFile] = Field(default_factory=dict)
    """Settings of each provider (`anthropic`, `openai`), for every model of it."""
    policy: PolicyFile = Field(default_factory=PolicyFile)
    """Policy rules and approvals."""
    mcp_servers: dict[str, McpServerFile] = Field(default_factory=dict)
    """MCP servers whose tools the agent may use."""
    capabilities: dict[str, list[str]] = Field(default_factory=dict)
    """Actor pattern -> the capabilities it holds (globs); replaces the default table."""
    operator: str | None = None
    """Who decides approvals from this machine: `operator:NAME` (env OVERT_OPERATOR)."""
    agent: str | None = None
    """The agent's name, `agent:NAME` (env OVERT_AGENT; default `agent:default`)."""
    slack: SlackFile | None = None
    """The Slack DM channel."""
    email: EmailFile | None = None
    """The email channel."""
    checkpoints: CheckpointsFile | None = None
    """Signed checkpoints and their witnesses."""


def allowed_keys(loc: Loc) -> list[str] | None:
    """The keys a table at ``loc`` may hold (for "unknown key" messages), if it is a model."""
    current: Any = ConfigFile
    for part in loc:
        if isinstance(current, type) and issubclass(current, BaseModel):
            field = current.model_fields.get(str(part))
            if field is None:
                return None
            current = _unwrap(field.annotation)
        elif get_origin(current) is dict:
            current = _unwrap(get_args(current)[1])
        elif get_origin(current) is list:
            current = _unwrap(get_args(current)[0])
        else:
            return None
    if isinstance(current, type) and issubclass(current, BaseModel):
        return list(current.model_fields)
    return None


def _unwrap(annotation: Any) -> Any:
    """``X | None`` and ``Annotated[X, ...]`` as ``X``."""
    while True:
        origin = get_origin(annotation)
        if origin is Annotated:
            annotation = get_args(annotation)[0]
        elif origin in (Union, types.UnionType):
            args = [a for a in get_args(annotation) if a is not type(None)]
            annotation = args[0]
        else:
            return annotation


def reference_problems(data: Mapping[str, Any], *, schemes: Iterable[str] = (),
                       models: Iterable[str] = (),
                       route_given: bool = False) -> Iterator[tuple[Loc, str]]:
    """What the schema cannot see: models, routes and schemes that are named but unknown.

    Reads the parsed TOML (``data``) leniently, so these are found beside the schema's
    own problems; values of the wrong type are left to the schema. ``schemes`` and
    ``models`` add what plugins register to overt's own. ``route_given``: a flag or
    variable names the route, so the file's own (or its default) is not the one used.
    """
    aliases = _table(data.get("models"))
    routes = _table(data.get("routes"))
    known_schemes = (*BUILTIN_SCHEMES, *schemes)
    names = (*aliases, *models)
    shown = ", ".join([*names, "local", *(f"{s}:{'FILE' if s == 'scripted' else 'NAME'}"
                                          for s in known_schemes if s != "local")])

    def unknown(spec: object) -> str | None:
        if not isinstance(spec, str) or spec in names or spec in known_schemes:
            return None
        scheme, colon, arg = spec.partition(":")
        if colon and scheme in known_schemes and arg:
            return None
        return f"unknown model {spec!r} (known: {shown})"

    for name, alias in aliases.items():
        spec = _table(alias).get("spec")
        if not isinstance(spec, str) or not spec:
            continue
        if spec in aliases:
            yield ("models", name, "spec"), (f"{spec!r} is a model name, not a spec "
                                             f"(a spec is SCHEME or SCHEME:ARG)")
        elif (scheme := spec.partition(":")[0]) not in known_schemes:
            yield ("models", name, "spec"), (f"unknown scheme {scheme!r} (known: "
                                             f"{', '.join(known_schemes)})")
    if problem := unknown(data.get("model")):
        yield ("model",), problem
    for name, route in routes.items():
        where, route = ("routes", name), _table(route)
        for key in ("model", "escalate_to"):
            if problem := unknown(route.get(key)):
                yield (*where, key), problem
        fallback = route.get("fallback")
        for index, value in enumerate(fallback if isinstance(fallback, list) else []):
            if problem := unknown(value):
                yield (*where, "fallback", index), problem
        primary = route.get("model", data.get("model", "local"))
        if route.get("escalate_to") is not None and route.get("escalate_to") == primary:
            yield (*where, "escalate_to"), "names the route's own model"
    chosen = data.get("route", "default")
    if routes and isinstance(chosen, str) and chosen not in routes and not route_given:
        yield ("route",) if "route" in data else ("routes",), (
            f"no route {chosen!r} in [routes] (known: {', '.join(routes)}); "
            "set route = one of them")


def _table(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}
