"""The Turns pages: every turn as a table row, one turn as a timeline, and its proof.

- ``/turns``: the table of :mod:`overt.sessions.turns_table` (channel, status,
  cost, latency, tool calls), filtered, in one of its orders (``errors`` first,
  dearest, slowest …), a page at a time by keyset (``?after=`` is the cursor the
  page before ended on). Only turns of sessions the viewer may reach are listed.
- ``/turns/{id}``: the turn's permalink, a waterfall of its model and tool calls
  (:mod:`overt.web.timeline`) with the reasoning between them; each row opens on
  what went in and came out (the request as sent, the response, the arguments, the
  result) for a viewer allowed to read content.
- ``/turns/{id}/proof.json``: "Prove this", the turn's inclusion proof against the
  newest signed checkpoint on the record, the file ``overt ledger prove`` writes
  (``overt-inclusion-proof/2``), checked by ``overt ledger check-proof``.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any

from markupsafe import Markup
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from overt.clock import period_start
from overt.engine.request_body import PartMissing, expand
from overt.errors import LedgerIntegrityError, NotFoundError, UsageError
from overt.ledger import proofs
from overt.ledger.canonical import digest_text
from overt.ledger.checkpoints import Checkpoint
from overt.ledger.signing import DASH, PublicKey
from overt.runtime import Runtime
from overt.sessions.access import NO_TURN, SessionAccess
from overt.sessions.turns_table import ORDERS, Cursor, Order, TurnRow, list_turns
from overt.web import readable
from overt.web.auth import Login
from overt.web.pages.checkpoint import newest
from overt.web.render import page, unknown_query
from overt.web.timeline import StepMark, Timeline, lay_out
from overt.web.viewer import Viewer

PAGE = 50
TABLE_QUERY = ("channel", "order", "since", "after")


@dataclass(slots=True)
class Bodies:
    """What a viewer allowed to read content is shown of a turn, by anchor."""

    message: str | None = None
    reply: str | None = None
    inputs: dict[str, Markup] = field(default_factory=dict)
    outputs: dict[str, Markup] = field(default_factory=dict)
    steps: dict[str, str | None] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)
    """A tool name the model invented (the record holds its digest), by anchor."""
    refused: set[str] = field(default_factory=set)
    """Calls the tool answered that say they failed (``"ok": false``)."""


class Turns:
    def __init__(self, runtime: Runtime, checkpoint_key: PublicKey | None = None) -> None:
        self.runtime = runtime
        self.checkpoint_key = checkpoint_key

    @property
    def access(self) -> SessionAccess:
        return SessionAccess(self.runtime.ledger, self.runtime.gate.capabilities)

    async def table(self, request: Request, viewer: Viewer, login: Login) -> Response:
        q = request.query_params
        channel, since = q.get("channel", "").strip(), q.get("since", "").strip()
        order, after = q.get("order", "newest").strip(), q.get("after", "").strip()
        problems = [p for p in [unknown_query(request, TABLE_QUERY)] if p]
        if order not in ORDERS:
            problems.append(f"order: {order!r} is not one of {', '.join(ORDERS)}")
        since_at = cursor = None
        try:
            since_at = period_start(since) if since else None
        except UsageError as exc:
            problems.append(f"since: {exc}")
        try:
            cursor = Cursor.parse(after) if after else None
        except UsageError as exc:
            problems.append(str(exc))
        rows: list[TurnRow] = []
        if not problems:
            readable_sessions = await self.access.readable(viewer.actor)
            chosen: Order = order  # type: ignore[assignment]  # checked against ORDERS
            rows = await list_turns(self.runtime.ledger, order=chosen, after=cursor,
                                    source=channel or None, sessions=readable_sessions,
                                    since=since_at, limit=PAGE + 1)
        more = len(rows) > PAGE
        rows = rows[:PAGE]
        following = Cursor(*rows[-1].key).text() if more and rows else None
        return page("turns.html", viewer, login, active="sessions", rows=rows,
                    channel=channel, order=order, since=since, orders=ORDERS,
                    problems=problems, since_bad=any(p.startswith("since:") for p in problems),
                    following=following, first_page=cursor is None,
                    status=422 if problems else 200)

    async def _timeline(self, viewer: Viewer, turn_id: str, surface: str) -> Timeline:
        await self.access.turn(viewer.actor, turn_id, surface=surface)
        line = lay_out(await self.runtime.ledger.entries(turn_id=turn_id))
        if line is None:
            raise NotFoundError(NO_TURN)
        return line

    async def turn(self, request: Request, viewer: Viewer, login: Login) -> Response:
        turn_id = request.path_params["turn_id"]
        if problem := unknown_query(request, ()):
            return page("denied.html", viewer, login, active="sessions", status=422,
                        capability=None, message=problem)
        try:
            line = await self._timeline(viewer, turn_id, "web:GET /turns/{id}")
        except NotFoundError:
            return page("denied.html", viewer, login, active="sessions", status=404,
                        capability=None, message=NO_TURN)
        found = Bodies()
        if viewer.reads_content:
            try:
                found = await self._bodies(line)
            except LedgerIntegrityError as exc:
                return page("denied.html", viewer, login, active="sessions", status=500,
                            capability=None, message=str(exc))
        tone, verdict = line.verdict(found.refused)
        return page("turn.html", viewer, login, active="sessions", line=line, tone=tone,
                    verdict=verdict, bodies=found, content=viewer.reads_content,
                    markdown=readable.markdown, axis=line.total_ms,
                    proving=self.checkpoint_key is not None)

    async def _bodies(self, line: Timeline) -> Bodies:
        ledger = self.runtime.ledger
        found = Bodies()

        async def read(digest: str | None, seq: int) -> str | None:
            return None if digest is None else await ledger.content(digest, seq=seq)

        found.message = await read(line.message_digest, line.first_seq)
        found.reply = await read(line.reply_digest, line.last_seq)
        asked: dict[str, str] = {}
        for model in line.spans:  # the names the model asked for, before the calls
            if model.kind == "model":
                request = await read(model.request_digest, model.seq)
                found.inputs[model.anchor] = readable.body(await _request(ledger, request))
                response = await read(model.response_digest, model.seq)
                found.outputs[model.anchor] = _response(response, asked)
        for row in line.rows:
            if isinstance(row, StepMark):
                found.steps[row.anchor] = await read(row.digest, row.seq)
            elif row.kind == "tool":
                if not row.known_name and row.title in asked:
                    found.names[row.anchor] = asked[row.title]
                links = row.title.startswith(("node_", "link_"))
                found.inputs[row.anchor] = readable.body(await read(row.args_digest, row.seq))
                result = await read(row.result_digest, row.seq)
                found.outputs[row.anchor] = readable.body(result, links=links)
                if row.status == "ok" and _says_failed(result):
                    found.refused.add(row.anchor)
        return found

    async def proof(self, request: Request, viewer: Viewer, login: Login) -> Response:
        """The turn's inclusion proof against the newest signed checkpoint."""
        turn_id = request.path_params["turn_id"]
        try:
            await self._timeline(viewer, turn_id, "web:GET /turns/{id}/proof.json")
        except NotFoundError:
            return PlainTextResponse(NO_TURN, status_code=404)
        key = self.checkpoint_key
        if key is None:
            return PlainTextResponse(
                "no public key is configured to prove with: set [checkpoints] private_key, "
                "with its .pub file beside it", status_code=409)
        signed = await newest(self.runtime.ledger, key)
        if signed is None or signed.verdict != "verified":
            why = "this ledger holds no signed checkpoint yet" if signed is None else \
                f"the newest checkpoint does not verify: {signed.why}"
            return PlainTextResponse(f"{why} (`overt ledger checkpoint` signs one)",
                                     status_code=409)
        cp = signed.event
        body = Checkpoint(cp.origin, cp.tree_size, base64.b64decode(cp.root_hash),
                          cp.head_hash, cp.checkpoint_time, cp.pruned_through).text()
        note = f"{body}\n{DASH} {key.name} {cp.signature}\n"
        try:
            proof = await proofs.prove(self.runtime.ledger, turn_id, note,
                                       Checkpoint.open(note, key), key)
        except (UsageError, NotFoundError) as exc:
            return PlainTextResponse(str(exc), status_code=409)
        except LedgerIntegrityError as exc:
            return PlainTextResponse(f"FAILED: {exc}", status_code=500)
        name = "".join(c if c.isalnum() or c in "-_" else "_" for c in turn_id)[:100]
        return Response(proofs.dump(proof), media_type="application/json",
                        headers={"Content-Disposition":
                                 f'attachment; filename="proof-{name}.json"'})


async def _request(ledger: Any, body: str | None) -> str | None:
    """A stored request body as the request that was sent (its parts read back)."""
    if body is None:
        return None
    try:
        return json.dumps(await expand(body, ledger.content), ensure_ascii=False)
    except (PartMissing, ValueError, KeyError):
        return body  # shown as stored: the parts it names are gone


def _response(body: str | None, asked: dict[str, str]) -> Markup:
    """A model's response: its text as Markdown and the calls it asked for by name
    (their arguments are on the calls' own rows, not repeated; its reasoning is the
    steps between the rows)."""
    if body is None:
        return readable.body(None)
    try:
        value = json.loads(body)
    except ValueError:
        return readable.plain(body)
    calls = value.get("tool_calls") or [] if isinstance(value, dict) else []
    for c in calls:  # a name the model invented is recorded as its digest
        if isinstance(c, dict) and isinstance(c.get("name"), str):
            asked[digest_text(c["name"])] = c["name"]
    text = value.get("text") if isinstance(value, dict) else None
    parts = [readable.markdown(text)] if text else []
    if calls:
        parts.append(Markup('<p class="asked">asked for {}</p>').format(
            ", ".join(str(c.get("name", "?")) for c in calls if isinstance(c, dict))))
    return Markup("").join(parts) or Markup('<p class="muted">(no text)</p>')


def _says_failed(result: str | None) -> bool:
    """A tool's result that answers ``{"ok": false, ...}`` (a memory tool that found
    nothing, a refusal): the call ran, but did not do what was asked."""
    if not result or not result.startswith("{"):
        return False
    try:
        value = json.loads(result)
    except ValueError:
        return False
    return isinstance(value, dict) and value.get("ok") is False

