"""Sessions: conversations rebuilt from the ledger, fitted to a model's window."""

from overt.sessions.book import (
    HistoryReader,
    SessionInfo,
    flatten,
    list_sessions,
    session_history,
    session_info,
    title,
)
from overt.sessions.window import Fitted, HistoryTurn, estimate_tokens, fit

__all__ = ["Fitted", "HistoryReader", "HistoryTurn", "SessionInfo", "estimate_tokens", "fit",
           "flatten", "list_sessions", "session_history", "session_info", "title"]
