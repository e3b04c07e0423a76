"""A ledger entry's permalink: ``/ledger/entries/{seq}``, its stored columns as
``overt ledger show`` reads them, with links to its turn and session.

It is the audit tier (ids, kinds, statuses, digests: never a body), shown to an
actor holding ``runtime.read``, as the Ledger page is.
"""

from __future__ import annotations

import json

from starlette.requests import Request
from starlette.responses import Response

from overt.ledger.reads import web
from overt.runtime import Runtime
from overt.web import readable
from overt.web.auth import Login
from overt.web.render import page
from overt.web.viewer import LEDGER, Viewer

NO_ENTRY = "no such entry (pruned, or never written)"


class EntryPage:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    async def entry(self, request: Request, viewer: Viewer, login: Login) -> Response:
        if not viewer.may(LEDGER):
            return page("denied.html", viewer, login, active="ledger", status=403,
                        capability=LEDGER)
        text = request.path_params["seq"]
        if not (text.isascii() and text.isdigit()) or len(text) > 18:
            return page("denied.html", viewer, login, active="ledger", status=404,
                        capability=None, message=f"{text!r} is not an entry number: "
                        "entries are numbered 1, 2, 3 …")
        seq = int(text)
        entry = await web.entry_at(self.runtime.ledger, seq)
        if entry is None:
            return page("denied.html", viewer, login, active="ledger", status=404,
                        capability=None, message=NO_ENTRY)

        return page("entry.html", viewer, login, active="ledger", entry=entry,
                    data=readable.body(json.dumps(entry.data, ensure_ascii=False)))
