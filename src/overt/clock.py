"""Timestamps as the ledger writes them, and periods as operators say them."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime, timedelta

from overt.errors import UsageError

_second_prefix: tuple[int, str] = (-1, "")


def now_iso() -> str:
    """Now in UTC as ``YYYY-MM-DDTHH:MM:SS.ffffffZ`` (sorts as text).

    The part up to the second is formatted once per second: this runs for every
    ledger record.
    """
    global _second_prefix
    ns = time.time_ns()
    second, micros = divmod(ns // 1000, 1_000_000)
    if _second_prefix[0] != second:
        _second_prefix = (second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second)))
    return f"{_second_prefix[1]}.{micros:06d}Z"


def ms_since(started: float) -> float:
    """Milliseconds since ``started`` (a ``time.perf_counter()`` reading), to the microsecond."""
    return round((time.perf_counter() - started) * 1000, 3)


def iso_after(seconds: float) -> str:
    """``seconds`` from now, in the ledger's format."""
    return to_iso(datetime.now(UTC) + timedelta(seconds=seconds))


def to_iso(moment: datetime) -> str:
    """``moment`` (aware, or naive meaning UTC) in the ledger's format: the year
    with four digits (``strftime("%Y")`` writes year 999 as ``999``, which sorts
    after ``2026`` as text).

    Raises:
        OverflowError: ``moment`` in UTC falls before year 1 or after year 9999.
    """
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    utc = moment.astimezone(UTC)
    return f"{utc.year:04d}-" + utc.strftime("%m-%dT%H:%M:%S.%fZ")


def parse_iso(text: str) -> datetime:
    """Parse a ledger timestamp (or any ISO 8601 date or time) as an aware UTC datetime.

    Raises:
        UsageError: ``text`` is not an ISO 8601 date or time.
    """
    moment = _parsed(text)
    try:  # 0001-01-01T00:00+01:00 is before year 1 in UTC
        return moment.astimezone(UTC)
    except OverflowError:
        raise UsageError(f"{text!r} is out of range in UTC (years 1 to 9999)") from None


def _parsed(text: str) -> datetime:
    """``text`` as an aware datetime, in the offset it names (UTC when it names none).
    RFC 3339's lower-case ``t`` and ``z`` are read as ``T`` and ``Z``.

    Raises:
        UsageError: ``text`` is not an ISO 8601 date or time.
    """
    try:
        moment = datetime.fromisoformat(text.strip().upper().replace("Z", "+00:00"))
    except ValueError as exc:
        raise UsageError(f"not an ISO 8601 time: {text!r}") from exc
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


EARLIEST = "0001-01-01T00:00:00.000000Z"
LATEST = "9999-12-31T23:59:59.999999Z"


_DURATION = re.compile(r"^([0-9]+)\s*(s|m|h|d|w)$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def period_bounds(period: str, now: datetime | None = None) -> tuple[str | None, str | None]:
    """The start and the end (``None``: now) of a period, as ledger timestamps.

    ``yesterday`` is the calendar day before today (UTC), midnight to midnight: not
    the last 24 hours (``24h``). Any other ``period`` is one of :func:`period_start`'s,
    ending now.

    Raises:
        UsageError: ``period`` is none of those.
    """
    if period.strip().lower() == "yesterday":
        midnight = (now or datetime.now(UTC)).replace(hour=0, minute=0, second=0,
                                                      microsecond=0)
        return to_iso(midnight - timedelta(days=1)), to_iso(midnight)
    return period_start(period, now), None


def period_start(period: str, now: datetime | None = None) -> str | None:
    """The start of a period, as a ledger timestamp; ``None`` for ``"all"``.

    ``period`` is ``today`` (since midnight UTC), ``all``, a duration back from
    now (``90s``, ``15m``, ``24h``, ``7d``, ``2w``) or an ISO 8601 time.

    Raises:
        UsageError: ``period`` is none of those.
    """
    now = now or datetime.now(UTC)
    text = period.strip().lower()
    if text == "all":
        return None
    if text == "today":
        return to_iso(now.replace(hour=0, minute=0, second=0, microsecond=0))
    match = _DURATION.match(text)
    if match:
        digits, unit = match.group(1), match.group(2)
        try:
            amount = int(digits) if len(digits) <= 18 else -1  # int() of 4,300+ digits raises
            if amount < 0:
                raise OverflowError(digits)
            return to_iso(now - timedelta(**{_UNITS[unit]: amount}))
        except (OverflowError, ValueError):  # past year 1, or past what timedelta holds
            raise UsageError(
                f"duration {period.strip()[:40]!r} reaches back before year 1: use a smaller "
                "one or an ISO 8601 time") from None
    try:
        moment = _parsed(period)
    except UsageError:
        raise UsageError(
            f"unknown period {period!r}: use today, all, a duration like 24h or 7d, "
            "or an ISO 8601 time"
        ) from None
    try:
        return to_iso(moment)
    except OverflowError:  # a true time, before year 1 or after 9999 once in UTC: it
        return EARLIEST if moment.year == 1 else LATEST  # bounds the record as either end
