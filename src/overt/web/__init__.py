"""The operator's cockpit: the record read, approved and watched live in a browser.

Served by ``overt serve`` at ``/`` beside the API (:func:`cockpit_routes`),
server-rendered (Jinja2, autoescaped) with htmx and its SSE extension shipped
in the package: no CDN, no build step. Needs the ``server`` extra.

Pages: Live (:mod:`.live`), Approvals, Sessions, Usage, Memory, Ledger
(:mod:`.pages`); logging in and CSRF (:mod:`.auth`), the signed login cookie
(:mod:`.cookie`); who sees what (:mod:`.viewer`).
"""

from overt.web.app import cockpit_routes

__all__ = ["cockpit_routes"]
