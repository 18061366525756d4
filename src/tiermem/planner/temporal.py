"""Temporal cues: the time windows a query refers to ("on 31 July 2023", "in August"),
and whether it asks when something happened, which a line that says when answers.

People report events a little after they happen ("I went hiking yesterday"), so a day
mentioned in a query opens a window from a few days before to two weeks after it; a month
covers the month and the week after; a bare year covers the year. Without a year, every
year the user's memories span is tried.
"""

from __future__ import annotations

import functools
import re
import string
from collections.abc import Iterable
from datetime import datetime, timedelta, timezone

MONTHS = (
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
)
_MONTH = "|".join(MONTHS) + "|" + "|".join(m[:3] for m in MONTHS if m != "may")
_DATE = re.compile(
    rf"(?:\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?)?\b({_MONTH})\b\.?"
    rf"(?:\s+(\d{{1,2}})(?:st|nd|rd|th)?\b)?,?\s*((?:19|20)\d\d)?",
    re.IGNORECASE,
)
_YEAR = re.compile(r"\b((?:19|20)\d\d)\b")
DAY_BEFORE = timedelta(days=3)
DAY_AFTER = timedelta(days=14)
MONTH_AFTER = timedelta(days=7)

Window = tuple[datetime, datetime]


def _month(name: str) -> int:
    name = name.lower().rstrip(".")
    return next(i for i, m in enumerate(MONTHS, 1) if m.startswith(name))


def time_windows(query: str, years: Iterable[int]) -> list[Window]:
    """The windows of time ``query`` mentions; empty when it names no date.

    Args:
        query: the user's question.
        years: years to try when a date has none (those the user's memories span).
    """
    known = sorted(set(years))
    windows: list[Window] = []
    for match in _DATE.finditer(query):
        day_text = match.group(1) or match.group(3)
        name = match.group(2).lower().rstrip(".")
        if not (day_text or match.group(4)) and (name == "may" or name not in MONTHS):
            continue  # "may" the verb, "mar" the word: only with a day or a year
        month = _month(name)
        candidates = [int(match.group(4))] if match.group(4) else known
        for year in candidates:
            if day_text:
                try:
                    day = datetime(year, month, int(day_text), tzinfo=timezone.utc)
                except ValueError:
                    continue
                windows.append((day - DAY_BEFORE, day + DAY_AFTER))
            else:
                start = datetime(year, month, 1, tzinfo=timezone.utc)
                end = datetime(year + month // 12, month % 12 + 1, 1, tzinfo=timezone.utc)
                windows.append((start, end + MONTH_AFTER))
    if not windows:
        for year_text in _YEAR.findall(query):
            year = int(year_text)
            start = datetime(year, 1, 1, tzinfo=timezone.utc)
            windows.append((start, datetime(year + 1, 1, 1, tzinfo=timezone.utc) + MONTH_AFTER))
    return windows


def names_a_time(query: str) -> bool:
    """Whether ``query`` mentions a date, a month or a year: when it does not,
    :func:`time_windows` is empty whatever the years (so they need not be gathered)."""
    return bool(_DATE.search(query) or _YEAR.search(query))


def within(timestamp: datetime | None, windows: list[Window]) -> bool:
    """Whether ``timestamp`` falls in any of ``windows`` (naive times read as UTC)."""
    if timestamp is None or not windows:
        return False
    if timestamp.tzinfo is None:
        timestamp = timestamp.replace(tzinfo=timezone.utc)
    return any(start <= timestamp <= end for start, end in windows)


_PAST = re.compile(
    r"\b(?:before|previously|formerly|former|used to|earlier|originally|at first|back then"
    r"|in the past|ago|old|last (?:year|month|week|time)|until|anymore|no longer|history"
    r"|changed?|did .+ (?:use to|before))\b",
    re.IGNORECASE,
)


def asks_about_past(query: str) -> bool:
    """Whether ``query`` asks how things were ("before", "used to", "previously", a date):
    then a superseded fact is as good an answer as the current one."""
    return bool(_PAST.search(query)) or bool(time_windows(query, ()))


_ASKS_WHEN = re.compile(r"\b(?:when|how long|what (?:year|month|day|date|time))\b", re.IGNORECASE)
_SPACES = str.maketrans({c: " " for c in string.punctuation + "‘’“”–—…"})
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_WHEN_WORDS = frozenset(
    (
        *("yesterday", "today", "tonight", "tomorrow", "ago", "recently", "weekend"),
        *("last", "next", "since", *_WEEKDAYS),
        *(m for m in MONTHS if m != "may"),  # "may" the verb
        *(str(year) for year in range(1900, 2100)),
    )
)
_UNITS = frozenset(
    (
        *("day", "days", "week", "weeks", "weekend", "weekends", "month", "months"),
        *("year", "years", "summer", "winter", "spring", "fall", "autumn"),
        *("morning", "evening", "night"),
    )
)
_NUMBERS = ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")
_COUNTS = frozenset(("this", "a", "few", "couple", *_NUMBERS))


@functools.lru_cache(maxsize=65536)  # the same memories come back query after query
def says_when(text: str) -> bool:
    """Whether ``text`` places something in time: "yesterday", "last week", "3 years",
    "this summer", a weekday, a month or a year (people say when in words relative to the
    day they speak, which the line's own date then fixes)."""
    tokens = text.lower().translate(_SPACES).split()
    if not _WHEN_WORDS.isdisjoint(tokens):
        return True
    if _UNITS.isdisjoint(tokens):
        return False
    for i, token in enumerate(tokens[1:], 1):
        if token in _UNITS:
            count = tokens[i - 2] if tokens[i - 1] == "of" and i > 1 else tokens[i - 1]
            if count in _COUNTS or count.isdigit():  # "3 years", "a couple of weeks"
                return True
    return False


_ORDER = re.compile(
    r"\b(?:order|sequence|chronolog\w*|timeline|progress\w*|evolv\w*|over time|history)\b"
    # "first", "after"... ask about order only as the question's point: "which came
    # first?", "before or after" ("the first sprint" or "after completing 15 problems" ask
    # for the current state); "how many days" asks for a span of time (not "how many days
    # a week")
    r"|\b(?:first|last|earlier|later)\s*(?:[?,;:]|$|or\b)|\b(?:before|after)\s+or\b"
    r"|\bhow (?:many|much) (?:days|weeks|months|years|hours|time)\b(?!\s+(?:a|an|per|each)\b)",
    re.IGNORECASE,
)
_ASKS_WHEN_PAST = re.compile(
    r"\b(?:when|how long|what (?:year|month|day|date|time))\s+(?:did|was|were|had|has|have)\b"
    r"|\bhow long ago\b",
    re.IGNORECASE,
)


def asks_order(query: str) -> bool:
    """Whether ``query`` asks about the order of things or about past time ("in what
    order", "which came first", "how has it progressed", "when did", a date): then
    memories read best oldest first. A question about the present ("when is my call?",
    "what is the deadline for the first sprint?") reads them newest first, so a
    statement that updates an earlier one comes before it."""
    return bool(_ORDER.search(query) or _ASKS_WHEN_PAST.search(query)) or asks_about_past(query)


def asks_when(query: str) -> bool:
    """Whether ``query`` asks when, or for how long, something happened."""
    return bool(_ASKS_WHEN.search(query))
