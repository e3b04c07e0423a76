"""overt: an agent runtime that keeps its agent on the record."""

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
from overt.types import IncomingMessage, Message, ResponseResult, ToolCall, Usage

__version__ = "0.1.0"

__all__ = [
    "ConfigError",
    "ExtraMissingError",
    "IncomingMessage",
    "LedgerError",
    "LedgerIntegrityError",
    "Message",
    "ModelError",
    "OvertError",
    "ResponseResult",
    "ToolCall",
    "ToolError",
    "Usage",
    "UsageError",
    "__version__",
]
