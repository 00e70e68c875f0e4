"""Maintenance windows: when a rolling maintenance may start its next node.

A window is a set of weekdays and a start and end given as wall-clock times in an IANA zone, so
that "22:00 to 04:00 in Berlin" keeps meaning those local hours in summer and in winter. The
weekday is the one on which the window *opens*: a window that wraps past midnight belongs to its
opening day, and a Friday night window is open early on Saturday but not early on Friday.

Each opening day gives one occurrence, a half-open interval of real instants `[open, close)`. Its
two ends are local wall times turned into instants one at a time, which is what makes a wrapping
window measured in wall time (22:00 to 04:00 is seven real hours on a fall-back night and five on a
spring-forward one). A local time that does not exist that day (inside a spring-forward gap) is
taken as the first instant after the gap; one that occurs twice (a fall-back day) as its first
occurrence. A window whose both ends fall into the same gap has no instant left and does not open
that day.

Everything here is pure and uses the standard library's `zoneinfo` (with the `tzdata` package
where the system has no zone files): the planner asks whether a node may start now, when the next
window opens (for `status.nextWindowTime` and its own wake-up) and when the current one closes.
"""

from __future__ import annotations

import datetime
import re
import zoneinfo
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

__all__ = ["DAY_NAMES", "Window", "WindowError", "closes_at", "is_open", "next_open", "parse_windows"]

#: The names `days` accepts, in `datetime.date.weekday()` order (0 is Monday).
DAY_NAMES: tuple[str, ...] = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")

_DAY_NUMBERS = {name: number for number, name in enumerate(DAY_NAMES)}
_TIME = re.compile(r"([01][0-9]|2[0-3]):[0-5][0-9]")
_DEFAULT_ZONE = "UTC"
_ONE_DAY = datetime.timedelta(days=1)

# The opening days, relative to an instant's local date, to look at. An occurrence open at an
# instant opened on its local date or the day before (a full-day window on a fall-back day lasts 25
# hours); one more day on each side covers zones whose local date steps back at a change. The next
# opening is at most a week away, plus a day for a window that a gap swallows on its only weekday:
# a bounded search, so that no spec can make it loop.
_OPEN_SEARCH = range(-2, 2)
_NEXT_SEARCH = range(-2, 9)


class WindowError(ValueError):
    """A window the spec cannot mean; the message starts with the field's path and names the value,
    because it is shown as is in the maintenance's `SpecValid` condition."""


@dataclass(frozen=True, slots=True)
class Window:
    """One `spec.windows` entry, validated.

    `days` are the weekdays (0 is Monday), in the window's zone, on which the window opens. An
    `end` not after `start` wraps past midnight, so `end == start` is a full day.
    """

    days: frozenset[int]
    start: datetime.time
    end: datetime.time
    zone_name: str
    zone: zoneinfo.ZoneInfo

    @property
    def wraps(self) -> bool:
        """The window closes on the day after it opens."""
        return self.end <= self.start


def parse_windows(raw: object, *, field: str = "spec.windows") -> tuple[Window, ...]:
    """The windows of a spec's `windows` list (absent or null: none, so any time is open)."""
    if raw is None:
        return ()
    if not isinstance(raw, list | tuple):
        raise WindowError(f"{field}: {raw!r} is not a list of windows")
    return tuple(_parse_window(item, field=f"{field}[{index}]") for index, item in enumerate(raw))


def _parse_window(raw: object, *, field: str) -> Window:
    if not isinstance(raw, Mapping):
        raise WindowError(f"{field}: {raw!r} is not a window {{days, start, end, timeZone}}")
    zone_name, zone = _parse_zone(raw.get("timeZone"), field=f"{field}.timeZone")
    return Window(
        days=_parse_days(raw.get("days"), field=f"{field}.days"),
        start=_parse_time(raw.get("start"), field=f"{field}.start"),
        end=_parse_time(raw.get("end"), field=f"{field}.end"),
        zone_name=zone_name,
        zone=zone,
    )


def _parse_days(raw: object, *, field: str) -> frozenset[int]:
    if raw is None:
        raise WindowError(f"{field}: missing; a window needs the days it opens on ({', '.join(DAY_NAMES)})")
    if not isinstance(raw, list | tuple):
        raise WindowError(f"{field}: {raw!r} is not a list of days ({', '.join(DAY_NAMES)})")
    if not raw:
        raise WindowError(f"{field}: [] is empty; a window opens on at least one day")
    days = set()
    for index, name in enumerate(raw):
        number = _DAY_NUMBERS.get(name) if isinstance(name, str) else None
        if number is None:
            raise WindowError(f"{field}[{index}]: {name!r} is not a day ({', '.join(DAY_NAMES)})")
        days.add(number)
    return frozenset(days)


def _parse_time(raw: object, *, field: str) -> datetime.time:
    if raw is None:
        raise WindowError(f"{field}: missing; a window needs a time HH:MM (00:00..23:59)")
    # fullmatch, not match with "$": "$" would let a trailing newline through.
    if not isinstance(raw, str) or _TIME.fullmatch(raw) is None:
        raise WindowError(f"{field}: {raw!r} is not a time HH:MM (00:00..23:59)")
    return datetime.time(int(raw[:2]), int(raw[3:]))


def _parse_zone(raw: object, *, field: str) -> tuple[str, zoneinfo.ZoneInfo]:
    name = _DEFAULT_ZONE if raw is None else raw
    if not isinstance(name, str):
        raise WindowError(f"{field}: {name!r} is not an IANA time zone name")
    try:
        return name, zoneinfo.ZoneInfo(name)
    # Not only ZoneInfoNotFoundError: a key like "../etc" is a ValueError, one naming a directory of
    # the zone database ("Europe") an IsADirectoryError, a non-zone file in it ("zone.tab") a
    # ValueError, an overlong one an OSError.
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        raise WindowError(
            f"{field}: {name!r} is not an IANA time zone name (such as Europe/Berlin)"
        ) from None


def is_open(windows: Sequence[Window], at: datetime.datetime) -> bool:
    """Whether a node may start at `at`; without windows it always may."""
    at = _utc(at)
    if not windows:
        return True
    return any(opened <= at < closed for opened, closed in _occurrences_around(windows, at, _OPEN_SEARCH))


def next_open(windows: Sequence[Window], at: datetime.datetime) -> datetime.datetime | None:
    """`at` itself (in UTC) when a window is open then, else the earliest later instant one opens;
    None without windows (nothing to wait for)."""
    at = _utc(at)
    if not windows:
        return None
    earliest: datetime.datetime | None = None
    for opened, closed in _occurrences_around(windows, at, _NEXT_SEARCH):
        if opened <= at < closed:
            return at
        if opened > at and (earliest is None or opened < earliest):
            earliest = opened
    return earliest


def closes_at(windows: Sequence[Window], at: datetime.datetime) -> datetime.datetime | None:
    """When the occurrences open at `at` close (the latest of them), None when none is open.

    Windows that open later are not joined on, even one opening the instant another closes: the
    answer is when the windows open now stop, which is when the planner looks again.
    """
    at = _utc(at)
    ends = [
        closed for opened, closed in _occurrences_around(windows, at, _OPEN_SEARCH) if opened <= at < closed
    ]
    return max(ends, default=None)


def _occurrences_around(
    windows: Sequence[Window], at: datetime.datetime, days: range
) -> Iterator[tuple[datetime.datetime, datetime.datetime]]:
    """Each window's non-empty occurrences that open on the days `days` around `at`'s local date."""
    for window in windows:
        local_day = at.astimezone(window.zone).date()
        for delta in days:
            day = local_day + datetime.timedelta(days=delta)
            if day.weekday() not in window.days:
                continue
            opened = _instant(day, window.start, window.zone)
            closed = _instant(day + _ONE_DAY if window.wraps else day, window.end, window.zone)
            if opened < closed:
                yield opened, closed


def _instant(day: datetime.date, time: datetime.time, zone: zoneinfo.ZoneInfo) -> datetime.datetime:
    """The UTC instant of a wall time in `zone`: a time that occurs twice is its first occurrence
    (fold 0), one in a spring-forward gap the first instant after the gap."""
    wall = datetime.datetime.combine(day, time)
    first = wall.replace(tzinfo=zone).astimezone(datetime.UTC)
    if first.astimezone(zone).replace(tzinfo=None) == wall:
        return first
    # In a gap, fold 0 reads the wall time with the offset from before the change and lands after it,
    # fold 1 with the offset from after and lands before: the change lies between the two.
    before = wall.replace(tzinfo=zone, fold=1).astimezone(datetime.UTC)
    return _change_between(before, first, zone)


def _change_between(
    low: datetime.datetime, high: datetime.datetime, zone: zoneinfo.ZoneInfo
) -> datetime.datetime:
    """The first instant in `(low, high]` with `high`'s UTC offset. zoneinfo keeps its transitions to
    itself, so the change is found by bisection; the zone database puts changes on whole seconds, as
    both ends are (whole minutes less a whole-second offset)."""
    offset = high.astimezone(zone).utcoffset()
    one_second = datetime.timedelta(seconds=1)
    while high - low > one_second:
        middle = low + one_second * ((high - low) // one_second // 2)
        if middle.astimezone(zone).utcoffset() == offset:
            high = middle
        else:
            low = middle
    return high


def _utc(at: datetime.datetime) -> datetime.datetime:
    """`at` in UTC. A naive time is refused: read as the host's local time it would move the windows
    by the host's offset without a word."""
    if at.tzinfo is None or at.utcoffset() is None:
        raise ValueError(f"{at!r} is a naive time; windows are compared with aware (UTC) instants")
    return at.astimezone(datetime.UTC)
