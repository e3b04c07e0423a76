"""overt: an agent runtime that keeps its agent on the record."""

from overt.config import Config
from overt.engine.answer_stream import AnswerDelta, AnswerReset
from overt.errors import (
    ConfigError,
    ExtraMissingError,
    LedgerError,
    LedgerIntegrityError,
    ModelError,
    OvertError,
    ToolError,
    UsageError,
)
from overt.ledger import open_ledger
from overt.models.fake import FunctionModel, ScriptedModel
from overt.runtime import Runtime
from overt.tools.base import ToolContext, tool
from overt.types import IncomingMessage, Message, ResponseResult, ToolCall, TurnError, Usage
from overt.version import __version__

__all__ = [
    "AnswerDelta",
    "AnswerReset",
    "Config",
    "ConfigError",
    "ExtraMissingError",
    "FunctionModel",
    "IncomingMessage",
    "LedgerError",
    "LedgerIntegrityError",
    "Message",
    "ModelError",
    "OvertError",
    "ResponseResult",
    "Runtime",
    "ScriptedModel",
    "ToolCall",
    "ToolContext",
    "ToolError",
    "TurnError",
    "Usage",
    "UsageError",
    "__version__",
    "open_ledger",
    "tool",
]
