"""The typed events every layer speaks.

The engine emits them; the ledger records each as one audit entry (``kind`` plus
the event's fields as ``data``); hooks, exports and the web cockpit read them.
Readers get them back typed and validated (:func:`from_entry`, ``Entry.event``), so a
field renamed here breaks its readers at type-check time; :func:`json_schema` describes
them all for readers in other languages.
Events hold identifiers, statuses, numbers and digests only: never message
text, tool arguments or tool results. Content goes to the ledger's content tier
beside the event, referenced by digest.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar, Literal, TypeVar, Union, cast, get_args, overload

from pydantic import (
    ConfigDict,
    Discriminator,
    GetCoreSchemaHandler,
    GetPydanticSchema,
    Tag,
    TypeAdapter,
    ValidationError,
)
from pydantic_core import CoreSchema, ErrorDetails

from overt.errors import EventDecodeError

ToolStatus = Literal["ok", "not_allowed", "execution_error", "timeout", "unknown_tool"]
TOOL_STATUSES: tuple[str, ...] = ("ok", "not_allowed", "execution_error", "timeout",
                                  "unknown_tool")

TurnStatus = Literal["completed", "tool_error_streak", "model_error", "ledger_error",
                     "budget_exceeded", "interrupted"]

TurnErrorKind = Literal["model_error", "budget_exceeded", "ledger_error"]
"""Why a turn ended without its answer (:class:`overt.types.TurnError`): each is also
the ``status`` its ``turn.completed`` records (a ``ledger_error`` turn may have none)."""
TURN_ERROR_KINDS: tuple[str, ...] = get_args(TurnErrorKind)


@dataclass(frozen=True, slots=True, kw_only=True)
class Event:
    """Base of every event. ``kind`` names it in the ledger."""

    kind: ClassVar[str] = "event"
    turn_id: str | None = None
    session_id: str | None = None

    def data(self) -> dict[str, Any]:
        """The event's fields as the ledger's ``data`` object (ids moved to columns).

        A field holding a value its type does not allow is written as it is, with a
        warning: the ledger's API is not where a forged entry is stopped (``verify`` is),
        and :func:`from_entry` refuses it on the way back in.
        """
        data: dict[str, Any] = _ADAPTER.dump_python(self, exclude=_COLUMNS)
        return data


@dataclass(frozen=True, slots=True, kw_only=True)
class RuntimeStarted(Event):
    """A runtime process opened the ledger."""

    kind: ClassVar[str] = "runtime.started"
    overt_version: str
    pid: int
    host: str
    model: str


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnStarted(Event):
    """A message arrived and the engine began a turn."""

    kind: ClassVar[str] = "turn.started"
    source: str
    caller_session_id: str
    message_digest: str
    model: str
    route: str
    max_tool_calls: int
    actor: str
    """Who sent the message (``operator:alice``, ``mcp_client:claude``; the runtime's
    operator when the caller named nobody); the actor of a session's first turn owns
    the session."""


@dataclass(frozen=True, slots=True, kw_only=True)
class InferenceRecorded(Event):
    """One model call finished (or failed)."""

    kind: ClassVar[str] = "inference"
    inference_id: str
    iteration: int
    model: str
    route: str
    input_tokens: int
    output_tokens: int
    cost_usd: float
    duration_ms: float
    tools_offered: list[str]
    tool_calls_requested: int
    stop_reason: str
    response_digest: str | None
    escalated: bool = False
    escalation_reason: str | None = None
    """Why this call was escalated (the reissue's reason code), when ``escalated``."""
    error_type: str | None = None
    info: dict[str, Any] = field(default_factory=dict)
    history_omitted_through: str | None = None
    """The newest of the session's earlier turns left out of this request to fit the
    model's context window (its turn id): every turn of the session before it was
    left out too (:func:`overt.sessions.fit`); ``None`` when none was. The request
    as sent (:attr:`request_digest`) holds exactly what was kept."""
    history_omitted_tokens: int = 0
    """The tokens the turns left out would have taken, of those within one window's
    worth of tokens of the newest (older ones could not have been sent)."""
    request_digest: str | None = None
    """The request as sent, in the content tier (:mod:`overt.engine.request_body`);
    ``None`` on inferences recorded before requests were."""
    adapter_decisions: list[str] = field(default_factory=list)
    """What the adapter decided on its own (:data:`overt.models.base.ADAPTER_DECISIONS`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallStarted(Event):
    """Intent: the engine is about to execute a tool. Committed before the effect."""

    kind: ClassVar[str] = "tool_call.started"
    tool_call_id: str
    tool_name: str
    triggered_by: str
    caller_session_id: str
    args_sha256: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallCompleted(Event):
    """A tool call ended: executed, refused, failed or timed out."""

    kind: ClassVar[str] = "tool_call.completed"
    tool_call_id: str
    tool_name: str
    triggered_by: str
    caller_session_id: str
    tool_status: ToolStatus
    tool_duration_ms: float
    exc_type: str | None
    args_sha256: str
    result_digest: str | None
    reason_code: str | None = None
    provided_by: str | None = None
    """The plugin whose ``pre_tool_call_can_provide_result`` gave the result, if one did."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnCompleted(Event):
    """The turn ended, with an answer or an error."""

    kind: ClassVar[str] = "turn.completed"
    status: TurnStatus
    reply_digest: str | None
    tools_used: list[str] | None
    tool_calls: int
    model_calls: int
    input_tokens: int
    output_tokens: int
    cost_usd: float
    duration_ms: float
    error_type: str | None = None
    """What failed, more precisely than ``error_kind``: the exception's type (a
    model's), or the spending limit that refused (``budget_exceeded``)."""
    error_kind: TurnErrorKind | None = None
    """Why the turn ended without its answer (:class:`overt.types.TurnError`); ``None``
    when it answered. Entries written before this field lack it: their ``status``
    says the same (:func:`overt.channels.turns.turn_error`)."""
    error_digest: str | None = None
    """The error's message, in the content tier."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LedgerPruned(Event):
    """Retention removed the chain's prefix ``first_removed_seq..through_seq``.

    Seals what it removed: ``last_removed_hash`` is the hash of entry
    ``through_seq``, from which ``verify`` checks what remains.
    """

    kind: ClassVar[str] = "ledger.pruned"
    cutoff: str
    through_seq: int
    first_removed_seq: int | None
    removed_entries: int
    removed_content: int
    last_removed_hash: str | None
    removed_from_at: str | None
    removed_to_at: str | None
    held_back_by_turn: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class LedgerCheckpointed(Event):
    """A signed checkpoint of the ledger was made and sent to its witnesses
    (see :mod:`overt.ledger.checkpoints`): the tree of the first ``tree_size``
    entries has root ``root_hash`` (base64) and entry ``tree_size`` the chain hash
    ``head_hash``; ``key_id`` (``NAME+HASH``) signed it, ``signature`` is the note's
    signature line's base64."""

    kind: ClassVar[str] = "ledger.checkpoint"
    origin: str
    tree_size: int
    root_hash: str
    head_hash: str
    checkpoint_time: str
    pruned_through: int
    key_id: str
    signature: str
    witnesses: list[str]
    """What took it: ``dir``, ``command``, ``url`` (one word per witness, in order)."""


PolicyEffect = Literal["allow", "deny", "ask", "quarantine"]
GatePath = Literal["loop", "resume", "direct", "review"]
"""Which entry point asked the gate: the engine loop, a resumed turn, a direct
(batch or scheduled) call, or an operator releasing a quarantined call."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PolicyDecided(Event):
    """The gate decided a tool call: capability check, then policy rules.

    ``rule`` is the rule that fired; ``rules_evaluated`` every rule looked at,
    in order. ``args_sha256`` is the digest of the call's canonical arguments
    (the arguments themselves stay in the content tier).
    """

    kind: ClassVar[str] = "policy.decision"
    decision_id: str
    tool_call_id: str
    tool_name: str
    effect: PolicyEffect
    reason_code: str
    message: str
    rule: str
    rules_evaluated: list[str]
    args_sha256: str
    actor: str
    source: str
    route: str
    mutating: bool
    capability: str
    capability_granted: bool
    path: GatePath = "loop"
    approval_request_id: str | None = None
    """The approval that let this call through (a resumed or released call)."""
    policy_digest: str | None = None
    """The policy in force (its rules, canonical: ``Policy.text``), in the content
    tier; ``None`` on decisions recorded before policies were."""


ApprovalMode = Literal["approval", "quarantine"]
ApprovalDecision = Literal["approved", "denied", "expired"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalRequested(Event):
    """A call is held: for approval (the turn pauses) or in quarantine (the turn
    goes on without it; an operator may release it later). Bound to the exact
    call: tool, canonical arguments digest, turn and actor."""

    kind: ClassVar[str] = "approval.requested"
    claim: str
    request_id: str
    mode: ApprovalMode
    decision_id: str
    tool_call_id: str
    tool_name: str
    args_sha256: str
    actor: str
    source: str
    reason_code: str
    expires_at: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalDecided(Event):
    """An approval request was decided: once (``claim`` is the request id).

    ``reason_digest`` names the decider's reason in the content tier.
    """

    kind: ClassVar[str] = "approval.decided"
    claim: str
    request_id: str
    decision: ApprovalDecision
    decided_by: str
    reason_digest: str | None
    tool_call_id: str
    tool_name: str


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnPaused(Event):
    """The turn waits for an approval. ``checkpoint_digest`` names, in the
    content tier, everything needed to resume it in any process."""

    kind: ClassVar[str] = "turn.paused"
    request_id: str
    tool_call_id: str
    tool_name: str
    checkpoint_digest: str


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnResumed(Event):
    """A paused turn was taken up again after its request was decided: once per
    request (``claim``), whichever process got there first."""

    kind: ClassVar[str] = "turn.resumed"
    claim: str
    request_id: str
    decision: ApprovalDecision
    resumed_by: str
    pid: int
    host: str


@dataclass(frozen=True, slots=True, kw_only=True)
class CapabilityChecked(Event):
    """A capability check outside a tool call's gate decision (a tool checking a
    finer capability, an operator deciding an approval)."""

    kind: ClassVar[str] = "capability.checked"
    actor: str
    capability: str
    granted: bool
    reason_code: str
    subject: str
    tool_call_id: str | None = None


ReasoningPhase = Literal["thinking", "plan", "waiting_approval", "execute", "error"]
REASONING_PHASES: tuple[str, ...] = ("thinking", "plan", "waiting_approval", "execute",
                                     "error")


@dataclass(frozen=True, slots=True, kw_only=True)
class ReasoningStepRecorded(Event):
    """One step of a turn's reasoning. ``step_number`` is 0-based and gapless
    within the turn; the text is in the content tier under ``content_digest``."""

    kind: ClassVar[str] = "reasoning.step"
    step_id: str
    step_number: int
    phase: ReasoningPhase
    content_digest: str
    tool_call_id: str | None = None
    policy_decision_id: str | None = None
    approval_request_id: str | None = None


MemoryOrigin = Literal["tool", "api", "cli"]
"""Where a memory write came from: ``tool``, a tool call (the entry names it in
``tool_call_id``, with its turn when it ran in one); ``api``, Python code calling
:class:`overt.memory.store.MemoryStore` outside any tool call; ``cli``, an ``overt``
command. ``None`` on entries recorded before origins were."""
MEMORY_ORIGINS: tuple[str, ...] = get_args(MemoryOrigin)

HookErrorConsequence = Literal["blocked", "fell_through", "ignored", "no_tools", "no_models",
                              "reopened"]


@dataclass(frozen=True, slots=True, kw_only=True)
class HookBlocked(Event):
    """A ``pre_tool_call`` implementation blocked a tool call (it was not executed)."""

    kind: ClassVar[str] = "hook.blocked"
    plugin: str
    hook: str
    tool_call_id: str
    tool_name: str
    reason_code: str


@dataclass(frozen=True, slots=True, kw_only=True)
class HookProvided(Event):
    """A plugin provided a tool call's result; the registry's tool did not run."""

    kind: ClassVar[str] = "hook.provided"
    plugin: str
    hook: str
    tool_call_id: str
    tool_name: str


@dataclass(frozen=True, slots=True, kw_only=True)
class HookDeclined(Event):
    """A ``pre_tool_call_can_provide_result`` implementation had no answer for a call
    (it returned ``None``, or a dict without ``"result"``): the next plugin, then the
    registry, answered it. Not an error."""

    kind: ClassVar[str] = "hook.declined"
    plugin: str
    hook: str
    tool_call_id: str
    tool_name: str


@dataclass(frozen=True, slots=True, kw_only=True)
class HookRequestRewritten(Event):
    """A ``pre_api_request`` implementation replaced the request sent to the model.

    Says what changed in shape (message counts, tool names), never the text.
    """

    kind: ClassVar[str] = "hook.request_rewritten"
    plugin: str
    hook: str
    iteration: int
    messages_before: int
    messages_after: int
    tools_before: list[str]
    tools_after: list[str]


@dataclass(frozen=True, slots=True, kw_only=True)
class HookToolsNarrowed(Event):
    """A ``pre_tool_list_finalized`` implementation changed the tools offered this turn."""

    kind: ClassVar[str] = "hook.tools_narrowed"
    plugin: str
    hook: str
    tools_before: list[str]
    tools_after: list[str]


@dataclass(frozen=True, slots=True, kw_only=True)
class HookReissued(Event):
    """A ``post_llm_call_can_reissue`` implementation had the model call made again."""

    kind: ClassVar[str] = "hook.reissued"
    plugin: str
    hook: str
    iteration: int
    from_model: str
    to_model: str
    reason_code: str
    context_digest: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class HookTransformed(Event):
    """A transform hook replaced text the model or the operator reads.

    ``before_digest`` and ``after_digest`` name both bodies in the content tier.
    """

    kind: ClassVar[str] = "hook.transformed"
    plugin: str
    hook: str
    tool_call_id: str | None
    before_digest: str
    after_digest: str


@dataclass(frozen=True, slots=True, kw_only=True)
class HookError(Event):
    """A hook implementation raised, timed out or answered with something unusable.

    ``consequence`` says what overt did about it: ``blocked`` the tool call
    (``pre_tool_call`` fails closed), ``fell_through`` to the next plugin,
    ``ignored`` the answer, or took ``no_tools`` / ``no_models`` from the plugin;
    ``reopened``: an MCP server's session broke and a new one was opened.
    The exception's message is content (it may quote arguments): only its
    digest is here.
    """

    kind: ClassVar[str] = "hook.error"
    plugin: str
    hook: str
    error_type: str
    consequence: HookErrorConsequence
    tool_call_id: str | None = None
    error_digest: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeCreated(Event):
    """A memory node was written (its first revision). Title and body live in the
    memory tables; here only their digests."""

    kind: ClassVar[str] = "node.created"
    node_id: str
    node_kind: str
    actor: str
    title_digest: str
    body_digest: str
    tool_call_id: str | None = None
    origin: MemoryOrigin | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeSuperseded(Event):
    """A memory node got a new revision ``node_id`` replacing ``supersedes``
    (revision ``revision`` of the chain that starts at ``root_id``)."""

    kind: ClassVar[str] = "node.superseded"
    node_id: str
    supersedes: str
    root_id: str
    revision: int
    node_kind: str
    actor: str
    title_digest: str
    body_digest: str
    tool_call_id: str | None = None
    origin: MemoryOrigin | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class LinkCreated(Event):
    """A typed link between two memory nodes (named by their first revisions)."""

    kind: ClassVar[str] = "link.created"
    link_id: str
    link_kind: str
    from_id: str
    to_id: str
    actor: str
    tool_call_id: str | None = None
    origin: MemoryOrigin | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class LinkRetracted(Event):
    """A memory link was retracted: it stays on the record, out of the graph."""

    kind: ClassVar[str] = "link.retracted"
    link_id: str
    link_kind: str
    actor: str
    tool_call_id: str | None = None
    origin: MemoryOrigin | None = None


ChannelFilter = Literal["not_direct_message", "sender_not_allowed", "bot_message",
                        "not_a_message", "no_message_id"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ChannelReceived(Event):
    """A channel took a message in: once per message (``claim``: ``slack:{event_id}``,
    ``email:{message_id}``), so a retried delivery is seen as one.

    ``filtered`` is why the message is not answered (never its text); ``None``: it
    goes to the agent. ``channel_ids`` are the channel's own ids (Slack channel, ts,
    user; email Message-ID).
    """

    kind: ClassVar[str] = "channel.received"
    claim: str
    source: str
    caller_session_id: str
    sender: str
    channel_ids: dict[str, str]
    filtered: ChannelFilter | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ChannelReplied(Event):
    """A reply was delivered where its message came from: once per message and per
    resumed approval (``claim``). ``target`` is where it went (Slack channel and
    thread, email Message-ID and References), so an answer that waited for an
    approval can be delivered to the same place later; ``reply_ids`` are the ids
    the channel gave the reply (Slack ``ts``, email Message-ID)."""

    kind: ClassVar[str] = "channel.replied"
    claim: str
    source: str
    target: dict[str, str]
    reply_ids: dict[str, str]
    awaiting_approval: str | None = None
    resumed_from: str | None = None
    """The approval request whose resumed answer this reply carries."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ChannelReplyStarted(Event):
    """A process took up sending a reply owed under ``reply_claim`` (a resumed answer),
    once per attempt (``claim``: ``{reply_claim}#{n}``, ``n`` = failed attempts + 1),
    so processes sweeping at once send it once. An attempt followed by neither
    ``channel.replied`` nor ``channel.reply_failed``: its process stopped (not resent)."""

    kind: ClassVar[str] = "channel.reply_started"
    claim: str
    reply_claim: str
    source: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ChannelReplyFailed(Event):
    """A reply could not be delivered (the channel refused or did not answer).
    ``reply_claim``: the claim the reply was owed under, when it had one (a later
    sweep tries a resumed answer again under a new attempt)."""

    kind: ClassVar[str] = "channel.reply_failed"
    source: str
    target: dict[str, str]
    error_type: str
    error_code: str | None = None
    reply_claim: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class EvalCompleted(Event):
    """An eval suite ran against a model (``overt eval``): which model, which prompt,
    which cases, and the figures, so a change of prompt or model is visible on the
    record next to what it did to accuracy and latency."""

    kind: ClassVar[str] = "eval.completed"
    model: str
    model_sha256: str | None
    prompt_sha256: str
    cases_sha256: str
    cases: int
    passed: int
    invented_figures: int
    cases_with_invented: int
    p50_ms: float
    p95_ms: float
    errors: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplayCompleted(Event):
    """Recorded turns were replayed (``overt replay --record``): how many, how many
    diverged, under which policy (``policy_digest``; ``None``: the one in force) and
    over which turns (``scope_digest``: the selection, canonical)."""

    kind: ClassVar[str] = "replay.completed"
    turns: int
    divergent_turns: int
    divergences: int
    policy_digest: str | None
    scope_digest: str
    duration_ms: float


AnyEvent = (
    RuntimeStarted | TurnStarted | InferenceRecorded | ToolCallStarted | ToolCallCompleted
    | TurnCompleted | LedgerPruned | LedgerCheckpointed | HookBlocked | HookProvided
    | HookDeclined | HookRequestRewritten | HookToolsNarrowed | HookReissued | HookTransformed
    | HookError
    | PolicyDecided | ApprovalRequested | ApprovalDecided | TurnPaused | TurnResumed
    | CapabilityChecked | ReasoningStepRecorded | NodeCreated | NodeSuperseded | LinkCreated
    | LinkRetracted | ChannelReceived | ChannelReplied | ChannelReplyStarted | ChannelReplyFailed
    | EvalCompleted | ReplayCompleted
)

EVENT_TYPES: dict[str, type[Event]] = {cls.kind: cls for cls in get_args(AnyEvent)}


_COLUMNS = {"turn_id", "session_id"}
"""Event fields that are columns of an entry, not keys of its ``data``."""


def _kind_of(value: Any) -> Any:
    """The discriminator: an event's ``kind``, or the ``kind`` key of a dict to decode."""
    return value.get("kind") if isinstance(value, dict) else getattr(value, "kind", None)


def _from_dicts(source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
    """The event class's schema, taking a dict: pydantic's strict mode would otherwise
    want an instance of the class itself. Its fields stay strict."""
    schema = handler(source)
    cast(dict[str, Any], handler.resolve_ref_schema(schema))["strict"] = False
    return schema


EVENT_UNION: Any = Annotated[
    Union[tuple(Annotated[cls, GetPydanticSchema(_from_dicts), Tag(cls.kind)]  # noqa: UP007
                for cls in get_args(AnyEvent))],
    Discriminator(_kind_of)]
"""Every event class, told apart by its ``kind``: what :func:`from_entry` validates
against, and what :func:`json_schema` describes."""

_ADAPTER: TypeAdapter[Event] = TypeAdapter(
    EVENT_UNION, config=ConfigDict(strict=True, defer_build=True))
E = TypeVar("E", bound=Event)


@overload
def from_entry(kind: str, data: Mapping[str, Any], *, turn_id: str | None = ...,
               session_id: str | None = ..., expect: None = ...) -> AnyEvent: ...


@overload
def from_entry(kind: str, data: Mapping[str, Any], *, turn_id: str | None = ...,
               session_id: str | None = ..., expect: type[E]) -> E: ...


def from_entry(kind: str, data: Mapping[str, Any], *, turn_id: str | None = None,
               session_id: str | None = None, expect: type[Event] | None = None) -> Event:
    """The typed event an entry of ``kind`` with ``data`` recorded, validated.

    Entries outlive the code that wrote them, so decoding is lenient where it can be
    and strict where it must be: a field the class gained after the entry was written
    takes its default, and a key of ``data`` the class does not have (written by a
    later version) is left out; but every field there is must have its type exactly
    (JSON's: an integer is not a string of digits, a boolean is not ``1``).
    ``expect``: the class the caller reads, checked against ``kind``.

    Raises:
        EventDecodeError: no event class has ``kind``, ``kind`` is not ``expect``'s,
            or ``data`` lacks a field the class requires or has one of another type.
    """
    if expect is not None and kind != expect.kind:
        raise EventDecodeError(f"a {kind} entry is not a {expect.kind} event", kind=kind)
    try:
        return _ADAPTER.validate_python(
            {**data, "kind": kind, "turn_id": turn_id, "session_id": session_id})
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        if errors[0]["type"] == "union_tag_invalid":
            raise EventDecodeError(f"no event class records kind {kind!r}", kind=kind) from exc
        raise EventDecodeError(
            f"a {kind} entry does not fit its event class {EVENT_TYPES[kind].__name__}: "
            + "; ".join(_problem(e) for e in errors), kind=kind) from exc


def _problem(error: ErrorDetails) -> str:
    """One field's problem: ``iteration: Input should be a valid integer (got str '5')``."""
    where = ".".join(str(part) for part in error["loc"][1:])  # [0] is the kind
    if error["type"] == "missing":
        return f"{where}: required, missing"
    got = error.get("input")
    return f"{where}: {error['msg']} (got {type(got).__name__} {repr(got)[:60]})"


def json_schema() -> dict[str, Any]:
    """A JSON Schema (2020-12) of every ledger event, for verifiers in any language:
    one ``oneOf`` branch per kind, holding an entry's ``kind`` and its ``data`` object
    (the event's fields less ``turn_id`` and ``session_id``, which are columns of the
    entry). ``overt ledger schema`` prints it."""
    # the fields' docstrings as descriptions: read from the source, which the decoder
    # does not need, so they make an adapter of their own
    adapter = TypeAdapter(EVENT_UNION, config=ConfigDict(use_attribute_docstrings=True))
    defs = adapter.json_schema()["$defs"]
    branches = []
    for kind, cls in sorted(EVENT_TYPES.items()):
        data = defs.pop(cls.__name__)
        data["properties"] = {k: v for k, v in data["properties"].items() if k not in _COLUMNS}
        data["additionalProperties"] = False
        branches.append({"type": "object", "title": kind, "required": ["kind", "data"],
                         "properties": {"kind": {"const": kind}, "data": data}})
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": "overt ledger events",
            "description": "An audit entry's kind and its data object, per kind.",
            "oneOf": branches, **({"$defs": defs} if defs else {})}
