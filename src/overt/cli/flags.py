"""Command-line flag values the commands share."""

from __future__ import annotations

from overt.clock import period_start
from overt.errors import UsageError


def time_flag(value: str | None, flag: str) -> str | None:
    """A ``--since``/``--until`` value as a ledger timestamp (``None`` when not given).

    Raises:
        UsageError: not a time or an age, named with its flag.
    """
    if value is None:
        return None
    try:
        return period_start(value)
    except UsageError as exc:
        raise UsageError(f"{flag}: {exc}") from None
