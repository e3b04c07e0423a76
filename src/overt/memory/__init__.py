"""Typed-graph memory: nodes the agent writes and revises, typed links, full-text search.

Append-only: a node is never changed, only superseded by a new revision, and
every change is an event on the ledger's hash chain.
"""

from __future__ import annotations
