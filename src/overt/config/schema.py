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
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class LimitsFile(_Strict):
    max_tool_calls: Annotated[int, Field(ge=1)] | None = None
    max_tool_calls_per_turn: Annotated[int, Field(ge=1)] | None = None
    max_consecutive_tool_errors: Annotated[int, Field(ge=1)] | None = None
    tool_timeout_s: Annotated[float, Field(gt=0)] | None = None
    max_tool_result_chars: Annotated[int, Field(ge=100)] | None = None
    pre_tool_call_timeout_s: Annotated[float, Field(gt=0)] | None = None


class ProviderFile(_Strict):
    """A provider's settings. ``api_key_env`` names the variable holding the key: keys
    are never written in the file."""

    base_url: str | None = None
    api_key_env: Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")] | None = None
    timeout_s: Annotated[float, Field(gt=0)] | None = None
    max_retries: NonNegInt | None = None
    # Sampling and adapter options, passed to the provider as they are; a provider
    # refuses one it does not take when the model is built.
    max_tokens: Annotated[int, Field(gt=0)] | None = None
    temperature: Annotated[float, Field(ge=0)] | None = None
    seed: int | None = None
    fold_tool_results: bool | None = None


class ModelFile(ProviderFile):
    """``[models.NAME]``: a name for a model spec, with provider settings of its own."""

    spec: Annotated[str, Field(min_length=1)]


class PriceFile(_Strict):
    """USD per million tokens."""

    input: NonNegFloat
    output: NonNegFloat


class BudgetFile(_Strict):
    session_tokens: NonNegInt | None = None
    day_tokens: NonNegInt | None = None
    session_usd: NonNegFloat | None = None
    day_usd: NonNegFloat | None = None


class EscalationFile(_Strict):
    """``[routes.NAME.escalation]``: the signals of :class:`overt.models.router.EscalationRule`.

    ``hedges`` replaces the default phrases; ``extra_hedges`` adds to them.
    """

    hedges: list[str] = Field(default_factory=lambda: list(DEFAULT_HEDGES))
    extra_hedges: list[str] = Field(default_factory=list)
    confidence_below: Annotated[float, Field(ge=0, le=1)] = 0.5
    on_empty: bool = True
    on_malformed_tool_call: bool = True
    tool_error_streak: NonNegInt = 2

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
    escalate_to: str | None = None
    fallback: list[str] = Field(default_factory=list)
    tools: list[str] | None = None
    budget: BudgetFile | None = None
    escalation: EscalationFile = Field(default_factory=EscalationFile)


class ConditionFile(_Strict):
    """``[[policy.rules.when]]``: a test on one argument (see :mod:`overt.policy.rules`)."""

    model_config = ConfigDict(extra="forbid", strict=False, frozen=True)
    arg: Annotated[str, Field(min_length=1)]
    op: Literal["eq", "ne", "in", "not_in", "glob", "regex", "gt", "ge", "lt", "le", "exists",
                "absent", "contains"]
    value: Any = None


class RuleFile(_Strict):
    """``[[policy.rules]]``: one rule; matchers left out match anything."""

    name: Annotated[str, Field(min_length=1)]
    effect: Literal["allow", "deny", "ask", "quarantine"]
    reason_code: Annotated[str, Field(pattern=r"^[a-z][a-z0-9_.\-]{0,63}$")]
    message: str = ""
    priority: int = 0
    tools: list[str] = Field(default_factory=lambda: ["*"])
    sources: list[Literal["cli", "http", "slack_dm", "email", "mcp"]] | None = None
    routes: list[str] | None = None
    actors: list[str] | None = None
    mutating: bool | None = None
    when: list[ConditionFile] = Field(default_factory=list)


class PolicyFile(_Strict):
    """``[policy]``: rules (higher ``priority`` first), whether the defaults follow them,
    and how long an approval request waits before it expires."""

    defaults: bool = True
    approval_ttl_s: Annotated[float, Field(gt=0)] | None = None
    rules: list[RuleFile] = Field(default_factory=list)


class McpServerFile(_Strict):
    """``[mcp_servers.NAME]``: an MCP server whose tools the agent may use, started
    with ``command`` (stdio) or reached at ``url`` (streamable HTTP)."""

    command: list[str] | None = None
    url: str | None = None
    env: dict[str, str] = Field(default_factory=dict)
    read_only: list[str] = Field(default_factory=list)
    timeout_s: Annotated[float, Field(gt=0)] = 30.0
    headers: dict[str, str] = Field(default_factory=dict)
    """Sent to a ``url`` server with every request."""
    bearer_token_env: Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")] | None = None
    """The environment variable holding a token for ``Authorization: Bearer``."""


class PluginsFile(_Strict):
    enabled: list[str] = Field(default_factory=list)
    disabled: list[str] = Field(default_factory=list)
    files: list[str] = Field(default_factory=list)


class MemoryFile(_Strict):
    """``[memory]``: node kinds besides the 18 built in, and (from kind, to kind) pairs
    each link kind may join besides the built-in rules (``*``: any kind); see
    :mod:`overt.memory.kinds`."""

    kinds: list[str] = Field(default_factory=list)
    links: dict[str, list[Annotated[list[str], Field(min_length=2, max_length=2)]]] = Field(
        default_factory=dict)


EnvName = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]
ActorName = Annotated[str, Field(pattern=r"^(operator|agent|mcp_client|system):\S+$")]
"""An actor as config names one, ``KIND:NAME`` (:mod:`overt.policy.actors`)."""


class SlackFile(_Strict):
    """``[slack]``: the Slack DM channel (see :class:`overt.channels.settings.SlackSettings`);
    secrets are named by variable, never written here."""

    allowed_users: list[str] = Field(default_factory=list)
    signing_secret_env: EnvName = "SLACK_SIGNING_SECRET"
    bot_token_env: EnvName = "SLACK_BOT_TOKEN"
    api_base_url: str = "https://slack.com/api/"
    path: Annotated[str, Field(pattern=r"^/")] = "/slack/events"
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
    imap_port: Annotated[int, Field(gt=0, lt=65536)] = 993
    imap_user: str
    imap_password_env: EnvName = "OVERT_IMAP_PASSWORD"
    imap_ssl: bool = True
    mailbox: str = "INBOX"
    smtp_host: str
    smtp_port: Annotated[int, Field(gt=0, lt=65536)] = 587
    smtp_user: str | None = None
    smtp_password_env: EnvName | None = None
    smtp_starttls: bool = True
    allowed_senders: list[str] = Field(default_factory=list)
    from_address: Annotated[str, Field(pattern=r"^[^@\s]+@[^@\s]+$")]
    poll_interval_s: Annotated[float, Field(gt=0)] = 60.0
    actors: dict[str, ActorName] = Field(
        default_factory=dict,
        description="Sender address to overt actor (`\"alice@example.org\" = "
                    "\"operator:alice\"`, case-insensitive): the person's sessions are "
                    "owned by that actor, and its capabilities apply")
    default_actor: ActorName | None = Field(
        None, description="The actor of an allowed sender `actors` does not list "
                          "(default: the operator)")


class CheckpointsFile(_Strict):
    """``[checkpoints]``: signed checkpoints of the ledger (see
    :class:`overt.ledger.checkpoints.CheckpointSettings`); the key stays in its file."""

    private_key: str
    witness_dir: str
    commands: list[list[str]] = Field(default_factory=list)
    urls: list[Annotated[str, Field(pattern=r"^https?://")]] = Field(default_factory=list)
    every_entries: Annotated[int, Field(ge=1)] = 10_000
    every_seconds: Annotated[float, Field(gt=0)] = 300.0


class ConfigFile(_Strict):
    """The whole of ``overt.toml``."""

    db: str | None = None
    model: str | None = None
    route: str | None = None
    transcript: str | None = None
    system_prompt: str | None = None
    cache_dir: str | None = None
    limits: LimitsFile = Field(default_factory=LimitsFile)
    models: dict[str, ModelFile] = Field(default_factory=dict)
    routes: dict[str, RouteFile] = Field(default_factory=dict)
    prices: dict[str, PriceFile] = Field(default_factory=dict)
    budget: BudgetFile = Field(default_factory=BudgetFile)
    plugins: PluginsFile = Field(default_factory=PluginsFile)
    memory: MemoryFile = Field(default_factory=MemoryFile)
    providers: dict[str, ProviderFile] = Field(default_factory=dict)
    policy: PolicyFile = Field(default_factory=PolicyFile)
    mcp_servers: dict[str, McpServerFile] = Field(default_factory=dict)
    capabilities: dict[str, list[str]] = Field(default_factory=dict)
    operator: str | None = None
    agent: str | None = None
    slack: SlackFile | None = None
    email: EmailFile | None = None
    checkpoints: CheckpointsFile | None = None


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
