"""Periods as operators say them: times at the ends of the calendar are refused or
written so that they sort as text (a trail's ``?since`` over HTTP answered 500, and
``since=0999-01-01`` matched nothing)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from overt.clock import EARLIEST, LATEST, parse_iso, period_start, to_iso
from overt.errors import UsageError


def test_a_time_past_either_end_of_the_utc_calendar_bounds_the_record_at_that_end(
        ) -> None:
    # a real time (0001-01-01T00:00 at +01:00 is in year 0 in UTC): an overflow before
    assert period_start("0001-01-01T00:00:00+01:00") == EARLIEST
    assert period_start("9999-12-31T23:59:59-01:00") == LATEST
    with pytest.raises(UsageError, match="out of range"):
        parse_iso("0001-01-01T00:00:00+01:00")


def test_rfc_3339_lower_case_letters_and_only_ascii_digits_are_read() -> None:
    assert period_start("2026-01-02t03:04:05z") == "2026-01-02T03:04:05.000000Z"
    with pytest.raises(UsageError, match="unknown period"):
        period_start("\u0663d")  # an Arabic-Indic 3: not a duration


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


def test_yesterday_is_the_calendar_day_before_today_midnight_to_midnight() -> None:
    from overt.clock import period_bounds

    now = datetime(2026, 3, 1, 0, 30, tzinfo=UTC)  # just past midnight, after a short month
    assert period_bounds("yesterday", now) == ("2026-02-28T00:00:00.000000Z",
                                               "2026-03-01T00:00:00.000000Z")
    assert period_bounds("24h", now) == ("2026-02-28T00:30:00.000000Z", None)
    assert period_bounds(" Yesterday ", now)[1] == "2026-03-01T00:00:00.000000Z"
    with pytest.raises(UsageError):
        period_bounds("the day before", now)
