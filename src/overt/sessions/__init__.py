"""Sessions: conversations rebuilt from the ledger, fitted to a model's window."""

from overt.sessions.book import (
    HistoryReader,
    HistoryTurn,
    SessionInfo,
    flatten,
    list_sessions,
    session_history,
    session_info,
    title,
)
from overt.sessions.window import Fitted, estimate_tokens, fit

__all__ = ["Fitted", "HistoryReader", "HistoryTurn", "SessionInfo", "estimate_tokens", "fit",
           "flatten", "list_sessions", "session_history", "session_info", "title"]
