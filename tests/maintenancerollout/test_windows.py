"""Maintenance windows: parsing with the field's path, wall-clock hours in their zone, wrapping past
midnight, both daylight-saving changes, and the next opening from any instant.

The explicit cases pin the instants of named changes (Europe/Berlin and America/New_York in 2026,
and zones that change by half an hour or at midnight). The properties compare the module with an
oracle that knows nothing of `fold`: a wall time's instant is the first minute at which the zone's
clock shows that time or later, which is the first occurrence of a repeated time and the end of a
gap for a skipped one.
"""

from __future__ import annotations

import datetime
import zoneinfo
from collections.abc import Callable, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from maintenancerollout.windows import (
    DAY_NAMES,
    Window,
    WindowError,
    closes_at,
    is_open,
    next_open,
    parse_windows,
)

UTC = datetime.UTC
MICROSECOND = datetime.timedelta(microseconds=1)
MINUTE = datetime.timedelta(minutes=1)
HOUR = datetime.timedelta(hours=1)
DAY = datetime.timedelta(days=1)


def utc(text: str) -> datetime.datetime:
    """An instant written as `2026-03-29T01:00` (UTC)."""
    return datetime.datetime.fromisoformat(text).replace(tzinfo=UTC)


def local(text: str, zone: str, *, fold: int = 0) -> datetime.datetime:
    """A wall time in `zone` as an aware UTC instant."""
    wall = datetime.datetime.fromisoformat(text).replace(tzinfo=zoneinfo.ZoneInfo(zone), fold=fold)
    return wall.astimezone(UTC)


def one(days: Sequence[str], start: str, end: str, zone: str | None = "Europe/Berlin") -> tuple[Window, ...]:
    """One window, parsed as the spec gives it (Berlin unless told, `None` for the default zone)."""
    spec: dict[str, object] = {"days": list(days), "start": start, "end": end}
    if zone is not None:
        spec["timeZone"] = zone
    return parse_windows([spec])


# --- parsing -------------------------------------------------------------------------------------


def test_absent_windows_are_none_and_leave_every_instant_open() -> None:
    assert parse_windows(None) == ()
    assert parse_windows([]) == ()
    at = utc("2026-06-01T12:00")
    assert is_open((), at) is True
    assert next_open((), at) is None
    assert closes_at((), at) is None


def test_a_window_is_parsed_into_weekdays_times_and_its_zone() -> None:
    (window,) = parse_windows(
        [
            {
                "days": ["Fri", "Mon", "Fri"],
                "start": "22:00",
                "end": "04:30",
                "timeZone": "Europe/Berlin",
                "x": 1,
            }
        ]
    )
    assert window.days == frozenset({0, 4})
    assert window.start == datetime.time(22, 0)
    assert window.end == datetime.time(4, 30)
    assert window.zone_name == "Europe/Berlin"
    assert window.zone is zoneinfo.ZoneInfo("Europe/Berlin")
    assert window.wraps


def test_the_zone_defaults_to_utc() -> None:
    (window,) = one(["Mon"], "09:00", "17:00", zone=None)
    assert window.zone_name == "UTC"
    assert window.zone is zoneinfo.ZoneInfo("UTC")
    assert not window.wraps


def test_every_day_name_is_accepted_in_weekday_order() -> None:
    (window,) = one(list(DAY_NAMES), "00:00", "00:00")
    assert window.days == frozenset(range(7))
    assert DAY_NAMES == ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


def test_windows_are_hashable_values() -> None:
    assert one(["Mon"], "01:00", "02:00") == one(["Mon"], "01:00", "02:00")
    assert len({*one(["Mon"], "01:00", "02:00"), *one(["Mon"], "01:00", "02:00")}) == 1


_MISSING = object()


def _bad(**changes: object) -> list[object]:
    """A valid window with `changes` applied (`_MISSING` removes the key)."""
    window: dict[str, object] = {
        "days": ["Mon"],
        "start": "22:00",
        "end": "04:00",
        "timeZone": "Europe/Berlin",
    }
    for key, value in changes.items():
        if value is _MISSING:
            del window[key]
        else:
            window[key] = value
    return [window]


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (_bad(start="25:00"), "spec.windows[0].start: '25:00' is not a time HH:MM (00:00..23:59)"),
        (_bad(start="24:00"), "spec.windows[0].start: '24:00' is not a time HH:MM (00:00..23:59)"),
        (_bad(end="9:00"), "spec.windows[0].end: '9:00' is not a time HH:MM (00:00..23:59)"),
        (_bad(end="09:60"), "spec.windows[0].end: '09:60' is not a time HH:MM (00:00..23:59)"),
        (_bad(end="09:00\n"), "spec.windows[0].end: '09:00\\n' is not a time HH:MM (00:00..23:59)"),
        (_bad(end="09:00:00"), "spec.windows[0].end: '09:00:00' is not a time HH:MM (00:00..23:59)"),
        (_bad(end=900), "spec.windows[0].end: 900 is not a time HH:MM (00:00..23:59)"),
        (_bad(end="٠٩:٠٠"), "spec.windows[0].end: '٠٩:٠٠' is not a time HH:MM (00:00..23:59)"),
        (_bad(start=_MISSING), "spec.windows[0].start: missing; a window needs a time HH:MM (00:00..23:59)"),
        (_bad(days=[]), "spec.windows[0].days: [] is empty; a window opens on at least one day"),
        (
            _bad(days=["Mon", "mon"]),
            "spec.windows[0].days[1]: 'mon' is not a day (Mon, Tue, Wed, Thu, Fri, Sat, Sun)",
        ),
        (_bad(days=[0]), "spec.windows[0].days[0]: 0 is not a day (Mon, Tue, Wed, Thu, Fri, Sat, Sun)"),
        (
            _bad(days="Mon"),
            "spec.windows[0].days: 'Mon' is not a list of days (Mon, Tue, Wed, Thu, Fri, Sat, Sun)",
        ),
        (
            _bad(days=_MISSING),
            "spec.windows[0].days: missing; a window needs the days it opens on (Mon, Tue, Wed, Thu, Fri, Sat, Sun)",
        ),
        (
            _bad(timeZone="Mars/Olympus_Mons"),
            "spec.windows[0].timeZone: 'Mars/Olympus_Mons' is not an IANA time zone name (such as Europe/Berlin)",
        ),
        (
            _bad(timeZone="../etc"),
            "spec.windows[0].timeZone: '../etc' is not an IANA time zone name (such as Europe/Berlin)",
        ),
        (
            _bad(timeZone="/etc/localtime"),
            "spec.windows[0].timeZone: '/etc/localtime' is not an IANA time zone name (such as Europe/Berlin)",
        ),
        (
            _bad(timeZone="Europe"),
            "spec.windows[0].timeZone: 'Europe' is not an IANA time zone name (such as Europe/Berlin)",
        ),
        (
            _bad(timeZone="zone.tab"),
            "spec.windows[0].timeZone: 'zone.tab' is not an IANA time zone name (such as Europe/Berlin)",
        ),
        (
            _bad(timeZone=""),
            "spec.windows[0].timeZone: '' is not an IANA time zone name (such as Europe/Berlin)",
        ),
        (
            _bad(timeZone="Europe/Berlin\x00"),
            "spec.windows[0].timeZone: 'Europe/Berlin\\x00' is not an IANA time zone name (such as Europe/Berlin)",
        ),
        (
            _bad(timeZone="x" * 300),
            f"spec.windows[0].timeZone: '{'x' * 300}' is not an IANA time zone name (such as Europe/Berlin)",
        ),
        (_bad(timeZone=1), "spec.windows[0].timeZone: 1 is not an IANA time zone name"),
        ({"days": ["Mon"]}, "spec.windows: {'days': ['Mon']} is not a list of windows"),
        ("Mon 22:00", "spec.windows: 'Mon 22:00' is not a list of windows"),
        (["Mon 22:00"], "spec.windows[0]: 'Mon 22:00' is not a window {days, start, end, timeZone}"),
        (
            [*_bad(), *_bad(end="4")],
            "spec.windows[1].end: '4' is not a time HH:MM (00:00..23:59)",
        ),
    ],
)
def test_an_invalid_window_is_refused_naming_the_field_and_the_value(raw: object, message: str) -> None:
    with pytest.raises(WindowError) as caught:
        parse_windows(raw)
    assert str(caught.value) == message
    assert isinstance(caught.value, ValueError)


def test_the_field_path_is_the_callers() -> None:
    with pytest.raises(WindowError, match=r"^spec\.rollout\.windows\[0\]\.start: '7' "):
        parse_windows([{"days": ["Mon"], "start": "7", "end": "08:00"}], field="spec.rollout.windows")


def test_a_naive_instant_is_refused() -> None:
    windows = one(["Mon"], "09:00", "17:00")
    calls: tuple[Callable[[Sequence[Window], datetime.datetime], object], ...] = (
        is_open,
        next_open,
        closes_at,
    )
    for call in calls:
        with pytest.raises(ValueError, match="naive"):
            call(windows, datetime.datetime(2026, 6, 1, 12, 0))


# --- wall-clock hours in the zone ----------------------------------------------------------------


def test_a_berlin_night_window_opens_at_21z_in_winter_and_20z_in_summer() -> None:
    windows = one(["Mon", "Tue", "Wed", "Thu", "Fri"], "22:00", "04:00")
    # Monday 2026-01-05 (CET, +01:00) and Monday 2026-07-06 (CEST, +02:00).
    assert next_open(windows, utc("2026-01-05T12:00")) == utc("2026-01-05T21:00")
    assert closes_at(windows, utc("2026-01-05T21:00")) == utc("2026-01-06T03:00")
    assert next_open(windows, utc("2026-07-06T12:00")) == utc("2026-07-06T20:00")
    assert closes_at(windows, utc("2026-07-06T20:00")) == utc("2026-07-07T02:00")


def test_answers_are_utc_whatever_the_zone_of_the_question() -> None:
    windows = one(["Mon"], "22:00", "04:00")
    asked = datetime.datetime(2026, 1, 5, 8, 0, tzinfo=zoneinfo.ZoneInfo("Asia/Tokyo"))  # 2026-01-04T23:00Z
    opened = next_open(windows, asked)
    assert opened == utc("2026-01-05T21:00")
    assert opened is not None and opened.tzinfo is UTC
    inside = datetime.datetime(2026, 1, 6, 7, 0, tzinfo=zoneinfo.ZoneInfo("Asia/Tokyo"))  # 2026-01-05T22:00Z
    assert is_open(windows, inside)
    now = next_open(windows, inside)
    assert now == inside and now is not None and now.tzinfo is UTC
    closing = closes_at(windows, inside)
    assert closing == utc("2026-01-06T03:00") and closing is not None and closing.tzinfo is UTC


def test_a_window_wrapping_midnight_belongs_to_the_day_it_opens() -> None:
    windows = one(["Fri"], "22:00", "04:00")
    # 2026-06-05 is a Friday.
    assert is_open(windows, local("2026-06-06T02:00", "Europe/Berlin"))  # Saturday early: Friday's window
    assert not is_open(windows, local("2026-06-05T02:00", "Europe/Berlin"))  # Friday early: Thursday's
    assert not is_open(windows, local("2026-06-06T22:00", "Europe/Berlin"))  # Saturday night
    assert is_open(windows, local("2026-06-05T23:59", "Europe/Berlin"))
    assert next_open(windows, local("2026-06-05T02:00", "Europe/Berlin")) == local(
        "2026-06-05T22:00", "Europe/Berlin"
    )


def test_the_weekday_is_the_zones_not_utcs() -> None:
    # Monday 00:30 in Tokyo is still Sunday in UTC.
    windows = one(["Mon"], "00:00", "01:00", zone="Asia/Tokyo")
    assert next_open(windows, utc("2026-06-06T00:00")) == utc("2026-06-07T15:00")  # Sunday 15:00Z
    assert is_open(windows, utc("2026-06-07T15:30"))


def test_start_is_inclusive_and_end_exclusive() -> None:
    windows = one(["Wed"], "09:00", "17:00", zone="UTC")
    start, end = utc("2026-06-03T09:00"), utc("2026-06-03T17:00")
    assert not is_open(windows, start - MICROSECOND)
    assert is_open(windows, start)
    assert is_open(windows, end - MICROSECOND)
    assert not is_open(windows, end)
    assert next_open(windows, start - MICROSECOND) == start
    assert next_open(windows, start) == start
    assert next_open(windows, end - MICROSECOND) == end - MICROSECOND
    assert next_open(windows, end) == start + 7 * DAY
    assert closes_at(windows, start) == end
    assert closes_at(windows, end - MICROSECOND) == end
    assert closes_at(windows, end) is None
    assert closes_at(windows, start - MICROSECOND) is None


def test_equal_start_and_end_is_a_full_day() -> None:
    windows = one(["Mon"], "09:00", "09:00", zone="UTC")
    # 2026-06-01 is a Monday.
    assert next_open(windows, utc("2026-05-31T00:00")) == utc("2026-06-01T09:00")
    assert is_open(windows, utc("2026-06-02T08:59:59.999999"))
    assert not is_open(windows, utc("2026-06-02T09:00"))
    assert closes_at(windows, utc("2026-06-01T09:00")) == utc("2026-06-02T09:00")


def test_the_next_opening_can_be_almost_a_week_away() -> None:
    windows = one(["Mon"], "09:00", "10:00", zone="UTC")
    assert next_open(windows, utc("2026-06-01T10:00")) == utc("2026-06-08T09:00")
    assert next_open(windows, utc("2026-06-02T00:00")) == utc("2026-06-08T09:00")


def test_several_windows_open_at_the_earliest_and_close_at_the_latest_open_one() -> None:
    windows = parse_windows(
        [
            {"days": ["Tue"], "start": "08:00", "end": "12:00", "timeZone": "UTC"},
            {"days": ["Tue"], "start": "10:00", "end": "14:00", "timeZone": "UTC"},
            {"days": ["Tue"], "start": "14:00", "end": "15:00", "timeZone": "UTC"},
            {"days": ["Mon"], "start": "10:00", "end": "12:00", "timeZone": "Europe/Berlin"},
        ]
    )
    # 2026-06-01 is a Monday; Berlin's 10:00 is 08:00Z in June.
    assert next_open(windows, utc("2026-06-01T00:00")) == utc("2026-06-01T08:00")
    assert next_open(windows, utc("2026-06-01T10:00")) == utc("2026-06-02T08:00")
    assert closes_at(windows, utc("2026-06-02T09:00")) == utc("2026-06-02T12:00")
    assert closes_at(windows, utc("2026-06-02T11:00")) == utc("2026-06-02T14:00")
    # A window opening the instant another closes is not joined on.
    assert closes_at(windows, utc("2026-06-02T13:59")) == utc("2026-06-02T14:00")
    assert closes_at(windows, utc("2026-06-02T14:00")) == utc("2026-06-02T15:00")


# --- daylight-saving changes ---------------------------------------------------------------------

# Europe/Berlin: 2026-03-29 (Sunday) 02:00 CET becomes 03:00 CEST at 01:00Z; 2026-10-25 (Sunday)
# 03:00 CEST becomes 02:00 CET at 01:00Z. America/New_York: 2026-03-08 (Sunday) 02:00 EST becomes
# 03:00 EDT at 07:00Z; 2026-11-01 (Sunday) 02:00 EDT becomes 01:00 EST at 06:00Z.


def test_berlin_spring_forward_a_start_in_the_gap_opens_as_the_gap_ends() -> None:
    windows = one(["Sun"], "02:30", "05:00")
    assert next_open(windows, utc("2026-03-28T12:00")) == utc("2026-03-29T01:00")  # 03:00 CEST
    assert not is_open(windows, utc("2026-03-29T00:59:59.999999"))  # 01:59:59 CET
    assert is_open(windows, utc("2026-03-29T01:00"))
    assert closes_at(windows, utc("2026-03-29T01:00")) == utc("2026-03-29T03:00")
    # The instant the clocks jump is the opening itself, from before, at and after it.
    assert next_open(windows, utc("2026-03-29T00:30")) == utc("2026-03-29T01:00")
    assert next_open(windows, utc("2026-03-29T01:00")) == utc("2026-03-29T01:00")
    # The next Sunday, with no gap, it opens at its hour again.
    assert next_open(windows, utc("2026-03-29T03:00")) == local("2026-04-05T02:30", "Europe/Berlin")
    assert next_open(windows, utc("2026-03-29T03:00")) == utc("2026-04-05T00:30")


def test_berlin_spring_forward_a_start_at_the_gaps_first_minute() -> None:
    windows = one(["Sun"], "02:00", "02:00")
    assert next_open(windows, utc("2026-03-28T00:00")) == utc("2026-03-29T01:00")
    # Full day in wall time: to Monday 02:00 CEST, 23 real hours.
    assert closes_at(windows, utc("2026-03-29T01:00")) == utc("2026-03-30T00:00")


def test_berlin_spring_forward_an_end_in_the_gap_closes_as_the_gap_ends() -> None:
    windows = one(["Sun"], "01:00", "02:30")
    assert next_open(windows, utc("2026-03-28T12:00")) == utc("2026-03-29T00:00")  # 01:00 CET
    assert closes_at(windows, utc("2026-03-29T00:00")) == utc("2026-03-29T01:00")  # one real hour
    assert not is_open(windows, utc("2026-03-29T01:00"))


def test_berlin_spring_forward_a_window_inside_the_gap_does_not_open_that_day() -> None:
    windows = one(["Sun"], "02:10", "02:40")
    assert not is_open(windows, utc("2026-03-29T01:00"))
    assert next_open(windows, utc("2026-03-28T12:00")) == utc("2026-04-05T00:10")
    assert next_open(windows, utc("2026-03-29T01:00")) == utc("2026-04-05T00:10")


def test_berlin_spring_forward_a_wrapping_window_is_five_real_hours() -> None:
    windows = one(["Sat"], "22:00", "04:00")
    opened = next_open(windows, utc("2026-03-28T12:00"))
    assert opened == utc("2026-03-28T21:00")  # 22:00 CET
    assert closes_at(windows, opened) == utc("2026-03-29T02:00")  # 04:00 CEST
    assert is_open(windows, utc("2026-03-29T01:59"))
    assert not is_open(windows, utc("2026-03-29T02:00"))


def test_berlin_fall_back_a_wrapping_window_is_seven_real_hours() -> None:
    windows = one(["Sat"], "22:00", "04:00")
    opened = next_open(windows, utc("2026-10-24T12:00"))
    assert opened == utc("2026-10-24T20:00")  # 22:00 CEST
    assert closes_at(windows, opened) == utc("2026-10-25T03:00")  # 04:00 CET
    for hour in ("00:30", "01:30", "02:59"):  # through both passes of 02:00..03:00
        assert is_open(windows, utc(f"2026-10-25T{hour}"))
    assert not is_open(windows, utc("2026-10-25T03:00"))


def test_berlin_fall_back_a_repeated_time_is_its_first_occurrence() -> None:
    windows = one(["Sun"], "02:30", "03:30")
    first = local("2026-10-25T02:30", "Europe/Berlin", fold=0)
    assert first == utc("2026-10-25T00:30")  # 02:30 CEST
    assert next_open(windows, utc("2026-10-24T12:00")) == first
    assert closes_at(windows, first) == utc("2026-10-25T02:30")  # 03:30 CET: two real hours
    # A window ending on a repeated time ends at its first pass; the second pass is not in it.
    windows = one(["Sun"], "02:00", "02:30")
    assert next_open(windows, utc("2026-10-24T12:00")) == utc("2026-10-25T00:00")
    assert closes_at(windows, utc("2026-10-25T00:00")) == utc("2026-10-25T00:30")
    assert not is_open(windows, utc("2026-10-25T01:00"))  # 02:00 CET, the second pass
    assert not is_open(windows, utc("2026-10-25T01:15"))
    assert next_open(windows, utc("2026-10-25T00:30")) == utc("2026-11-01T01:00")  # CET from now on


def test_new_york_spring_forward_and_fall_back() -> None:
    # A start in the gap opens as the gap ends: 03:00 EDT.
    windows = one(["Sun"], "02:15", "06:00", zone="America/New_York")
    assert next_open(windows, utc("2026-03-07T12:00")) == utc("2026-03-08T07:00")
    assert closes_at(windows, utc("2026-03-08T07:00")) == utc("2026-03-08T10:00")
    # A night window across the fall-back: 22:00 EDT to 04:00 EST, seven real hours.
    windows = one(["Sat"], "22:00", "04:00", zone="America/New_York")
    assert next_open(windows, utc("2026-10-31T12:00")) == utc("2026-11-01T02:00")
    assert closes_at(windows, utc("2026-11-01T02:00")) == utc("2026-11-01T09:00")
    # A repeated time is its first pass: 01:30 EDT.
    windows = one(["Sun"], "01:30", "01:45", zone="America/New_York")
    assert next_open(windows, utc("2026-10-31T12:00")) == utc("2026-11-01T05:30")
    assert not is_open(windows, utc("2026-11-01T06:35"))  # 01:35 EST, the second pass


def test_a_half_hour_change_lord_howe() -> None:
    # Australia/Lord_Howe moves from +10:30 to +11:00 at 2026-10-04 02:00 local (15:30Z the day before).
    windows = one(["Sun"], "02:15", "03:00", zone="Australia/Lord_Howe")
    assert next_open(windows, utc("2026-10-03T00:00")) == utc("2026-10-03T15:30")  # 02:30 +11:00
    assert closes_at(windows, utc("2026-10-03T15:30")) == utc("2026-10-03T16:00")


def test_a_change_at_midnight_havana() -> None:
    # America/Havana skips 00:00..01:00 on 2026-03-08 (05:00Z) and repeats it on 2026-11-01.
    windows = one(["Sun"], "00:00", "02:00", zone="America/Havana")
    assert next_open(windows, utc("2026-03-07T12:00")) == utc("2026-03-08T05:00")  # 01:00 CDT
    assert next_open(windows, utc("2026-10-31T12:00")) == utc("2026-11-01T04:00")  # first 00:00, CDT
    assert closes_at(windows, utc("2026-11-01T04:00")) == utc("2026-11-01T07:00")  # 02:00 CST
    # The Saturday before the spring change closes at the end of the gap (midnight never comes).
    windows = one(["Sat"], "23:00", "00:00", zone="America/Havana")
    assert closes_at(windows, utc("2026-03-08T04:30")) == utc("2026-03-08T05:00")


def test_a_repeated_evening_santiago() -> None:
    # America/Santiago goes back from 24:00 to 23:00 on Saturday 2026-04-04 (03:00Z): the local date
    # steps back across the change, and Saturday's 23:30 comes twice.
    windows = one(["Sat"], "23:30", "23:45", zone="America/Santiago")
    assert next_open(windows, utc("2026-04-04T12:00")) == utc("2026-04-05T02:30")  # first, -03:00
    assert not is_open(windows, utc("2026-04-05T03:35"))  # the second 23:35, -04:00
    assert next_open(windows, utc("2026-04-05T03:00")) == utc("2026-04-12T03:30")


# --- properties against an oracle ----------------------------------------------------------------

ZONES = (
    "UTC",
    "Europe/Berlin",
    "America/New_York",
    "Australia/Lord_Howe",
    "America/Santiago",
    "America/Havana",
    "Pacific/Chatham",
    "Asia/Kolkata",
    "Europe/Dublin",
    "Africa/Casablanca",
)

# The 2026 changes of those zones (UTC): both Berlin's and New York's, a half-hour one (Lord Howe),
# ones at midnight (Santiago steps back into Saturday, Havana skips and repeats 00:00), Chatham's
# at 02:45 local, Dublin's "negative" summer time and Casablanca's Ramadan change.
CHANGES = tuple(
    (zone, utc(instant))
    for zone, instant in (
        ("Europe/Berlin", "2026-03-29T01:00"),
        ("Europe/Berlin", "2026-10-25T01:00"),
        ("America/New_York", "2026-03-08T07:00"),
        ("America/New_York", "2026-11-01T06:00"),
        ("Australia/Lord_Howe", "2026-04-04T15:00"),
        ("Australia/Lord_Howe", "2026-10-03T15:30"),
        ("America/Santiago", "2026-04-05T03:00"),
        ("America/Santiago", "2026-09-06T04:00"),
        ("America/Havana", "2026-03-08T05:00"),
        ("America/Havana", "2026-11-01T05:00"),
        ("Pacific/Chatham", "2026-04-04T14:00"),
        ("Pacific/Chatham", "2026-09-26T14:00"),
        ("Europe/Dublin", "2026-03-29T01:00"),
        ("Europe/Dublin", "2026-10-25T01:00"),
        ("Africa/Casablanca", "2026-02-15T02:00"),
        ("Africa/Casablanca", "2026-03-22T02:00"),
    )
)


def oracle_instant(day: datetime.date, time: datetime.time, zone: zoneinfo.ZoneInfo) -> datetime.datetime:
    """The first whole minute at which the zone's clock shows `day time` or later."""
    wall = datetime.datetime.combine(day, time)
    as_utc = wall.replace(tzinfo=UTC)
    offsets = [(as_utc + k * HOUR).astimezone(zone).utcoffset() for k in range(-36, 37, 3)]
    known = [offset for offset in offsets if offset is not None]
    t = as_utc - max(known) - HOUR
    while t.astimezone(zone).replace(tzinfo=None) < wall:
        t += MINUTE
    return t


def oracle_occurrences(
    windows: Sequence[Window], at: datetime.datetime, days: range
) -> list[tuple[datetime.datetime, datetime.datetime]]:
    found = []
    for window in windows:
        today = at.astimezone(window.zone).date()
        for delta in days:
            day = today + delta * DAY
            if day.weekday() in window.days:
                close_day = day + DAY if window.end <= window.start else day
                found.append(
                    (
                        oracle_instant(day, window.start, window.zone),
                        oracle_instant(close_day, window.end, window.zone),
                    )
                )
    return found


def oracle_is_open(windows: Sequence[Window], at: datetime.datetime) -> bool:
    return any(o <= at < c for o, c in oracle_occurrences(windows, at, range(-3, 3)))


def oracle_next_open(windows: Sequence[Window], at: datetime.datetime) -> datetime.datetime | None:
    if oracle_is_open(windows, at):
        return at
    return min((o for o, c in oracle_occurrences(windows, at, range(-3, 16)) if at < o < c), default=None)


Case = tuple[list[dict[str, object]], datetime.datetime]


def _hhmm(minutes: int) -> str:
    return f"{minutes // 60 % 24:02d}:{minutes % 60:02d}"


@st.composite
def any_case(draw: st.DrawFn) -> Case:
    """Windows in any of the zones, and any instant in the years the zone data plans ahead."""
    specs: list[dict[str, object]] = []
    for _ in range(draw(st.integers(1, 3))):
        specs.append(
            {
                "days": draw(st.lists(st.sampled_from(DAY_NAMES), min_size=1, max_size=7)),
                "start": _hhmm(draw(st.integers(0, 24 * 60 - 1))),
                "end": _hhmm(draw(st.integers(0, 24 * 60 - 1))),
                "timeZone": draw(st.sampled_from(ZONES)),
            }
        )
    at = draw(
        st.datetimes(
            min_value=datetime.datetime(2000, 1, 1),
            max_value=datetime.datetime(2037, 12, 31),
            timezones=st.just(UTC),
        )
    )
    return specs, at


@st.composite
def near_a_change(draw: st.DrawFn) -> Case:
    """A window in a zone that changes its clocks, opening or closing within two hours of the change
    on the day of it, and an instant within two days of it (often the hours before it, often a
    boundary of the window give or take 1 µs)."""
    zone_name, change = draw(st.sampled_from(CHANGES))
    zone = zoneinfo.ZoneInfo(zone_name)
    wall = (change - MINUTE).astimezone(zone)
    near = st.integers(-120, 120).map(lambda minutes: _hhmm(wall.hour * 60 + wall.minute + minutes))
    anytime = st.integers(0, 24 * 60 - 1).map(_hhmm)
    start, end = draw(st.sampled_from([(near, anytime), (anytime, near), (near, near)]))
    days = {DAY_NAMES[wall.weekday()], DAY_NAMES[change.astimezone(zone).weekday()]}
    days |= set(draw(st.lists(st.sampled_from(DAY_NAMES), max_size=3)))
    specs: list[dict[str, object]] = [
        {"days": sorted(days), "start": draw(start), "end": draw(end), "timeZone": zone_name}
    ]
    specs += draw(any_case())[0][: draw(st.integers(0, 2))]
    at = change + draw(st.one_of(st.integers(-6 * 60, 60), st.integers(-2 * 24 * 60, 2 * 24 * 60))) * MINUTE
    windows = parse_windows(specs)
    if draw(st.booleans()):
        # To a boundary of the window: where it opens or closes around `at`.
        opened = next_open(windows, at)
        assert opened is not None
        at = draw(st.sampled_from([opened, closes_at(windows, opened) or opened]))
    return specs, at + draw(st.sampled_from([0, 0, -1, 1])) * MICROSECOND


cases = st.one_of(any_case(), near_a_change())


@settings(max_examples=300, deadline=None)
@given(case=cases)
def test_is_open_and_next_open_agree_with_the_oracle(case: Case) -> None:
    specs, at = case
    windows = parse_windows(specs)
    assert is_open(windows, at) == oracle_is_open(windows, at)
    assert next_open(windows, at) == oracle_next_open(windows, at)


@settings(max_examples=300, deadline=None)
@given(case=cases, fraction=st.floats(0, 1, exclude_max=True))
def test_next_open_is_the_first_open_instant(case: Case, fraction: float) -> None:
    specs, at = case
    windows = parse_windows(specs)
    opened = next_open(windows, at)
    assert opened is not None
    assert opened.tzinfo is UTC
    assert at <= opened <= at + 9 * DAY
    assert (opened == at) == is_open(windows, at)
    assert is_open(windows, opened)
    if opened > at:
        assert not is_open(windows, opened - MICROSECOND)
        span = (opened - at) // MICROSECOND
        assert not is_open(windows, at + MICROSECOND * min(int(span * fraction), span - 1))
        assert closes_at(windows, at) is None
    assert next_open(windows, opened) == opened


@settings(max_examples=300, deadline=None)
@given(case=cases)
def test_closes_at_is_the_end_of_an_open_window(case: Case) -> None:
    specs, at = case
    windows = parse_windows(specs)
    opened = next_open(windows, at)
    assert opened is not None
    closing = closes_at(windows, opened)
    assert closing is not None
    assert closing.tzinfo is UTC
    assert opened < closing <= opened + 25 * HOUR + 30 * MINUTE  # a full day, plus the longest fall-back
    assert is_open(windows, closing - MICROSECOND)
    # Not necessarily equal: a window that opened meanwhile may still be open then.
    assert (later := closes_at(windows, closing - MICROSECOND)) is not None and later >= closing
    open_ends = [c for o, c in oracle_occurrences(windows, opened, range(-3, 3)) if o <= opened < c]
    assert closing == max(open_ends)


@settings(max_examples=200, deadline=None)
@given(case=cases)
def test_a_window_opens_at_its_local_hour_or_as_a_gap_ends(case: Case) -> None:
    specs, at = case
    (window,) = parse_windows(specs[:1])
    opened = next_open((window,), at)
    assert opened is not None
    if opened == at:
        return
    wall = opened.astimezone(window.zone)
    assert wall.weekday() in window.days
    if wall.time() == window.start:
        assert wall.fold == 0  # a repeated time opens at its first pass
    else:
        # Its start did not exist that day: the clock has just jumped over it.
        before = (opened - MICROSECOND).astimezone(window.zone)
        skipped = datetime.datetime.combine(wall.date(), window.start)
        assert before.utcoffset() != wall.utcoffset()
        assert before.replace(tzinfo=None) < skipped < wall.replace(tzinfo=None)
