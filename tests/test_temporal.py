"""Temporal cues: the windows of time a question names, and whether a memory falls in them."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tiermem.planner.temporal import (
    DAY_AFTER,
    DAY_BEFORE,
    MONTH_AFTER,
    asks_order,
    asks_when,
    says_when,
    time_windows,
    within,
)


def utc(year: int, month: int, day: int) -> datetime:
    return datetime(year, month, day, tzinfo=timezone.utc)


@pytest.mark.parametrize(
    "query",
    [
        "What did Ana do on 8 May 2023?",
        "What did Ana do on 8th May 2023?",
        "What did Ana do on the 8th of May, 2023?",
        "What did Ana do on May 8, 2023?",
        "What did Ana do on May 8th 2023?",
        "what did ana do on 8 may 2023",
    ],
)
def test_a_day_opens_a_window_around_it(query: str) -> None:
    assert time_windows(query, []) == [(utc(2023, 5, 8) - DAY_BEFORE, utc(2023, 5, 8) + DAY_AFTER)]


def test_day_window_bounds() -> None:
    windows = time_windows("on 8 May 2023", [])
    assert within(utc(2023, 5, 5), windows) and not within(utc(2023, 5, 4), windows)
    assert within(utc(2023, 5, 22), windows) and not within(
        utc(2023, 5, 22) + timedelta(seconds=1), windows
    )


def test_a_month_covers_the_month_and_the_week_after() -> None:
    (window,) = time_windows("What happened in August 2023?", [])
    assert window == (utc(2023, 8, 1), utc(2023, 9, 1) + MONTH_AFTER)
    assert time_windows("in Aug. 2023", []) == [window]
    (december,) = time_windows("plans for December 2022", [])
    assert december == (utc(2022, 12, 1), utc(2023, 1, 1) + MONTH_AFTER)  # the year rolls over


def test_without_a_year_every_known_year_is_tried() -> None:
    windows = time_windows("what did we do in July?", [2022, 2023, 2022])
    assert windows == [
        (utc(2022, 7, 1), utc(2022, 8, 1) + MONTH_AFTER),
        (utc(2023, 7, 1), utc(2023, 8, 1) + MONTH_AFTER),
    ]
    assert time_windows("what did we do in July?", []) == []  # no memories, no years
    assert len(time_windows("on July 4th", [2020, 2021])) == 2


def test_a_bare_year_covers_the_year() -> None:
    assert time_windows("Where did I live in 2019?", [2023]) == [
        (utc(2019, 1, 1), utc(2020, 1, 1) + MONTH_AFTER)
    ]
    assert time_windows("years 1999 and 2001", []) == [
        (utc(1999, 1, 1), utc(2000, 1, 1) + MONTH_AFTER),
        (utc(2001, 1, 1), utc(2002, 1, 1) + MONTH_AFTER),
    ]


@pytest.mark.parametrize(
    "query",
    [
        "May I ask what you did?",
        "you may want to check that",
        "I may go, maybe",
        "what's in the jan?",
        "no dates here at all",
        "",
        "room 2023b and 12345",
    ],
)
def test_no_date_no_window(query: str) -> None:
    assert time_windows(query, [2023]) == []


def test_may_the_month_with_a_day_or_a_year() -> None:
    assert time_windows("May I ask about 3 May?", [2023]) == [
        (utc(2023, 5, 3) - DAY_BEFORE, utc(2023, 5, 3) + DAY_AFTER)
    ]
    assert time_windows("in May 2021", []) == [(utc(2021, 5, 1), utc(2021, 6, 1) + MONTH_AFTER)]


@pytest.mark.parametrize(
    "query", ["on 31 February 2023", "on 30 Feb 2023", "on 32 May 2023", "on 0 May 2023"]
)
def test_invalid_days_are_skipped(query: str) -> None:
    windows = time_windows(query, [2023])
    assert all(start.day != 31 or start.month != 2 for start, _ in windows)
    for start, end in windows:
        assert start < end


def test_february_29_only_in_leap_years() -> None:
    assert time_windows("on February 29", [2023]) == []
    assert time_windows("on February 29", [2023, 2024]) == [
        (utc(2024, 2, 29) - DAY_BEFORE, utc(2024, 2, 29) + DAY_AFTER)
    ]


def test_several_dates_give_several_windows() -> None:
    windows = time_windows("between 1 March 2023 and 20 April 2023", [])
    assert [w[0] + DAY_BEFORE for w in windows] == [utc(2023, 3, 1), utc(2023, 4, 20)]


def test_within() -> None:
    windows = time_windows("8 May 2023", [])
    assert within(datetime(2023, 5, 9, 10, 30), windows)  # naive: read as UTC
    assert within(datetime(2023, 5, 9, 10, 30, tzinfo=timezone(timedelta(hours=-7))), windows)
    assert not within(None, windows)
    assert not within(utc(2023, 5, 9), [])
    assert not within(utc(2024, 5, 9), windows)


@given(st.text(max_size=200), st.lists(st.integers(1900, 2099), max_size=5))
def test_never_raises_and_windows_are_ordered(query: str, years: list[int]) -> None:
    for start, end in time_windows(query, years):
        assert start < end and start.tzinfo is not None


@pytest.mark.parametrize(
    ("query", "asks"),
    [
        ("When did Jon go to the fair?", True),
        ("How long has she had her friends?", True),
        ("what year did they move?", True),
        ("What did Melanie paint?", False),
        ("Whenever works", False),
    ],
)
def test_asks_when(query: str, asks: bool) -> None:
    assert asks_when(query) is asks


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("Jon: Yesterday, I went to a fair to show off my studio.", True),
        ("I've had them for 3 years now!", True),
        ("I'm going to make it this weekend - can't wait!", True),
        ("We moved here a few months ago", True),
        ("a couple of weeks", True),
        ("We met in March.", True),
        ("Back in 2019 it was different", True),
        ("See you on Friday", True),
        ("I love this cake, it's so good", False),
        ("You may like it", False),  # "may" the verb, not the month
        ("Room 2019x is the one", False),
        ("Some years are like that", False),
    ],
)
def test_says_when(text: str, says: bool) -> None:
    assert says_when(text) is says


@pytest.mark.parametrize(
    ("query", "asks"),
    [
        ("In what order did I bring up each step?", True),
        ("Which came first, the trip or the move?", True),
        ("What did I do first?", True),
        ("Did I go to Paris before or after Rome?", True),
        ("How has my running progressed?", True),
        ("When did Jon go to the fair?", True),
        ("How many days passed between the two deadlines?", True),
        ("What was my job before?", True),
        ("What did I say on 5 May 2023?", True),
        # about the present: the newest statement first
        ("When is my call with the creative director scheduled?", False),
        ("What is the deadline for the first sprint?", False),
        ("What is my accuracy after completing 15 problems?", False),
        ("What time should I plan to join the meeting?", False),
        ("How many days a week do I work remotely?", False),
    ],
)
def test_asks_order(query: str, asks: bool) -> None:
    assert asks_order(query) is asks
