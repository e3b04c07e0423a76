"""Periods as operators say them: times at the ends of the calendar are refused or
written so that they sort as text (a trail's ``?since`` over HTTP answered 500, and
``since=0999-01-01`` matched nothing)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from overt.clock import parse_iso, period_start, to_iso
from overt.errors import UsageError


@pytest.mark.parametrize("text", ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00"])
def test_a_time_outside_the_utc_calendar_is_a_usage_error_not_an_overflow(text: str) -> None:
    with pytest.raises(UsageError, match="unknown period"):
        period_start(text)
    with pytest.raises(UsageError, match="out of range"):
        parse_iso(text)


def test_early_years_are_written_with_four_digits_so_they_sort_as_text() -> None:
    early = period_start("0999-01-01")
    assert early == "0999-01-01T00:00:00.000000Z"
    assert early < period_start("2026-01-01")  # type: ignore[operator]
    assert to_iso(datetime(50, 6, 1, tzinfo=UTC)) == "0050-06-01T00:00:00.000000Z"
    long_ago = period_start("100000w", now=datetime(2026, 1, 1, tzinfo=UTC))
    assert long_ago is not None and long_ago.startswith("0109-") and long_ago < "2026"


def test_a_time_with_an_offset_is_read_in_utc() -> None:
    assert period_start("2026-03-01T01:30:00+02:00") == "2026-02-28T23:30:00.000000Z"
    assert parse_iso("2026-03-01T01:30:00+02:00").tzinfo == UTC
