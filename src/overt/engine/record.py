"""A turn's events waiting for the next commit, who hears of them once committed, and
how model-chosen values are made fit for the audit tier."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence

from overt.events import Event, HookError
from overt.hooks.calls import Impl
from overt.ledger.base import Ledger
from overt.ledger.canonical import canonical_json, digest_text
from overt.ledger.chain import clean_text

log = logging.getLogger("overt.hooks")


class Recorder:
    """Events waiting for the next commit, and the content they reference.

    After a commit, each event goes to the engine's observers and to the
    ``on_event`` hook implementations, in order: they only ever see what is
    on the record.
    """

    def __init__(self, ledger: Ledger, observers: Sequence[Callable[[Event], None]],
                 on_event: tuple[Impl, ...] = ()) -> None:
        self.ledger = ledger
        self.observers = observers
        self.on_event = on_event
        self.events: list[Event] = []
        self.contents: dict[str, str] = {}

    def add(self, event: Event, **contents: str) -> None:
        self.events.append(event)
        for digest, body in contents.items():
            self.contents[digest] = body

    def content(self, body: str) -> str:
        """Keep ``body`` for the content tier; its digest."""
        body = clean_text(body)
        digest = digest_text(body)
        self.contents[digest] = body
        return digest

    async def flush(self) -> None:
        """Commit what is waiting (raises :class:`LedgerError` if it cannot be)."""
        if not self.events and not self.contents:
            return
        events, contents = self.events, self.contents
        self.events, self.contents = [], {}
        await self.ledger.record(events, contents)
        for event in events:
            for observer in self.observers:
                observer(event)
            for impl in self.on_event:
                try:
                    answer = impl.function(event) if impl.argnames else impl.function()
                    if impl.is_async:
                        await answer
                except Exception as exc:  # noqa: BLE001  an observer's failure is recorded
                    self._failed(impl, event, exc)

    def _failed(self, impl: Impl, event: Event, exc: Exception) -> None:
        log.warning("plugin %s: on_event raised %s on %s", impl.plugin, type(exc).__name__,
                    event.kind)
        if isinstance(event, HookError):
            return  # only logged: a broken observer must not feed itself
        self.add(HookError(
            turn_id=event.turn_id, session_id=event.session_id, plugin=impl.plugin,
            hook="on_event", error_type=type(exc).__name__, consequence="ignored",
            error_digest=self.content(f"{type(exc).__name__}: {exc}")))


def jsonable(value: object) -> object:
    """``value`` if it is JSON as it is, else its repr (malformed model output)."""
    try:
        canonical_json(value)
    except (TypeError, ValueError):
        return repr(value)
    return value


_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f]")


def audit_name(name: str) -> str:
    """A model-chosen tool name as the audit tier records it: printable, at most 128 chars.

    Registered names are already plain; this guards the record and the log line
    against an invented name carrying control characters or a whole paragraph.
    """
    if name.isidentifier() and len(name) <= 128:
        return name  # the usual case: a plain name, nothing to clean
    cleaned = _UNPRINTABLE.sub("?", name)
    return cleaned if len(cleaned) <= 128 else cleaned[:127] + "…"


def canonical_or_repr(value: object) -> str:
    """``value`` as canonical JSON, or its repr as a JSON string."""
    try:
        return canonical_json(value)
    except (TypeError, ValueError):
        return canonical_json(repr(value))
