"""The one exception tree of overt.

Every exception overt raises on purpose derives from :class:`OvertError`.
Catch by type, never by message::

    OvertError
    ├── UsageError              a developer or operator used overt wrongly
    │   ├── ConfigError         a config value is missing or malformed
    │   ├── ExtraMissingError   an optional dependency (an extra) is not installed
    │   ├── PluginError         an enabled plugin cannot be found, loaded or registered
    │   └── ApprovalError       an approval cannot be decided (already decided, expired,
    │                           not the decider's to decide)
    ├── HookTimeout             a hook implementation ran past its time limit (also a
    │                           TimeoutError); recorded by the engine, never raised out of a turn
    ├── ToolError               something a model can see and recover from
    │   ├── ToolNotFound        the model named a tool that is not offered
    │   ├── ToolArgumentError   arguments failed validation (also a TypeError)
    │   └── ToolTimeout         a tool ran past its time limit
    ├── ChannelError            a channel (Slack, email) refused or did not answer
    ├── ModelError              a model could not produce a reply; ends the turn
    │   ├── ModelOutputError    the model's output could not be understood
    │   ├── ModelAssetError     the model's weights are missing or corrupt
    │   └── ModelUnavailable    this process cannot build the model a paused turn ran on
    └── LedgerError             the record cannot be written or read
        ├── LedgerIntegrityError  `verify` found an entry that does not match
        ├── MigrationError        the schema could not be brought up to date
        ├── NotFoundError         a turn, session or entry id that does not exist
        ├── LedgerConflict        a once-only record (a claim) is already on the record
        ├── LedgerUnavailable     the ledger's server is out of reach (an outage, a restart)
        └── EventDecodeError      an entry cannot be read back as its typed event

A :class:`ToolError` becomes an ``is_error`` tool result the model reads; the
turn goes on. A :class:`ModelError` ends the turn with ``ResponseResult.error``
set. A :class:`LedgerError` ends the turn too: overt never acts off the record.
"""

from __future__ import annotations


class OvertError(Exception):
    """Root of every exception overt raises on purpose."""


class UsageError(OvertError):
    """A developer or operator used overt wrongly (bad argument, bad call order)."""


class ConfigError(UsageError):
    """A configuration value is missing or malformed."""


class ExtraMissingError(UsageError):
    """An optional dependency is not installed; the message names the extra."""

    def __init__(self, extra: str, module: str) -> None:
        super().__init__(
            f"this feature needs the {module!r} package: pip install 'overt[{extra}]'"
        )
        self.extra = extra
        self.module = module


class PluginError(UsageError):
    """An enabled plugin cannot be found, loaded or registered."""


class HookTimeout(OvertError, TimeoutError):
    """A hook implementation ran past its time limit."""


class ToolError(OvertError):
    """A tool failure the model can see and recover from."""


class ToolNotFound(ToolError):
    """The model named a tool that is not registered or not offered."""


class ToolArgumentError(ToolError, TypeError):
    """The arguments of a tool call failed validation.

    Also a :class:`TypeError`: calling a function with an invented keyword is a
    ``TypeError`` in Python, and the model sees it as one.
    """


class ToolTimeout(ToolError):
    """A tool ran past its time limit."""


class ChannelError(OvertError):
    """A channel (Slack's Web API, an IMAP or SMTP server) refused or did not answer."""


class ModelError(OvertError):
    """A model could not produce a reply. Ends the turn."""


class ModelOutputError(ModelError):
    """The model's output could not be understood at all."""


class ModelAssetError(ModelError):
    """The model's weights are missing, incomplete or do not match their hash."""


class ModelUnavailable(ModelError):
    """A paused turn ran on a model this process cannot build: it is left, decided and
    not taken up, for a process that can (``model`` names it)."""

    def __init__(self, model: str, why: str) -> None:
        super().__init__(f"turn paused on model {model!r}, which this process cannot run "
                         f"({why}); the decision is recorded and a process that runs that "
                         "model will answer the turn")
        self.model = model


class LedgerError(OvertError):
    """The ledger cannot be written or read."""


class LedgerIntegrityError(LedgerError):
    """An entry of the ledger does not match the hash chain."""


class ForgedSignatureError(LedgerIntegrityError):
    """A signature that names the key does not verify: what it signed was altered
    afterwards, or the signature is forged."""


class LedgerClosed(LedgerError):
    """The ledger was closed: nothing more is read or written through this handle (a
    reader that follows it stops; a server shutting down closes it last)."""


class MigrationError(LedgerError):
    """The ledger schema could not be brought up to date."""


class NotFoundError(LedgerError):
    """No turn, session or entry with that id exists in the ledger."""


class LedgerConflict(LedgerError):
    """A once-only record is already on the record.

    Events with a ``claim`` field are once-only per (kind, claim): the ledger
    appends one only if none with the same kind and claim exists, checked in
    the same transaction that would append it. Nothing of the batch is written.
    """

    def __init__(self, kind: str, claim: str) -> None:
        super().__init__(f"{kind} {claim!r} is already on the record")
        self.kind = kind
        self.claim = claim


class LedgerUnavailable(LedgerError):
    """The ledger's server is out of reach (PostgreSQL down or restarting): nothing was
    written; the same call succeeds once it answers. The ledger logs the outage in
    proportion (:mod:`overt.ledger.outage`); callers log each one at INFO only."""


class EventDecodeError(LedgerError):
    """An entry cannot be read back as its typed event: no event class has its
    kind, it lacks a field the class requires, or it is not the kind asked for."""

    def __init__(self, message: str, *, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


class ApprovalError(UsageError):
    """An approval request cannot be decided: already decided, expired, or the
    deciding actor lacks the capability to decide it."""

