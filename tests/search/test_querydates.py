"""Dates named in queries, and which dated memory files they match."""

from __future__ import annotations

import datetime as dt

import pytest

from memoryd.indexer.search.querydates import DateSpec, file_date, matching_paths, query_dates


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("What did I paint on October 13, 2023?", [DateSpec(2023, 10, 13)]),
        ("what happened on 1st February, 2023", [DateSpec(2023, 2, 1)]),
        ("notes from 2023-10-13 and 2024/1/5", [DateSpec(2023, 10, 13), DateSpec(2024, 1, 5)]),
        ("the setback in Oct 2023", [DateSpec(2023, 10)]),
        ("When did she go camping in June?", [DateSpec(None, 6)]),
        ("trips in 2022", [DateSpec(2022, None)]),
        ("2023年10月13日我们去了哪里", [DateSpec(2023, 10, 13)]),
        ("去年12月25号的晚会", [DateSpec(None, 12, 25)]),
        ("2023年5月的考试", [DateSpec(2023, 5)]),
        ("我十岁那年", []),
        ("I may go if we march together", []),
        ("Back in May I moved", [DateSpec(None, 5)]),
        ("Jan said hello", []),
        ("call 555-1234 about 1234 items", []),
    ],
)
def test_query_dates(query: str, expected: list[DateSpec]) -> None:
    assert query_dates(query) == expected


def test_a_full_date_is_not_also_read_as_its_month_and_year() -> None:
    assert query_dates("March 3, 2021") == [DateSpec(2021, 3, 3)]


def test_matching() -> None:
    day = dt.date(2023, 5, 27)
    assert DateSpec(2023, 5, 23).matches(day)  # notes are often written a few days after the event
    assert not DateSpec(2023, 5, 10).matches(day)
    assert DateSpec(2023, 5).matches(day) and not DateSpec(2022, 5).matches(day)
    assert DateSpec(None, 5).matches(day) and DateSpec(2023, None).matches(day)
    assert DateSpec(None, 5, 27).matches(day) and not DateSpec(None, 5, 26).matches(day)
    assert not DateSpec(2023, 2, 30).matches(day)  # no such day: never matches, never raises


def test_file_dates_come_from_the_name() -> None:
    assert file_date("memory/2023-05-27.md") == dt.date(2023, 5, 27)
    assert file_date("2023-05-27/notes.md") is None
    assert file_date("MEMORY.md") is None and file_date("memory/2023-13-40.md") is None
    paths = {"memory/2023-05-27.md", "memory/2023-06-01.md", "MEMORY.md"}
    assert matching_paths([DateSpec(2023, 5)], paths) == {"memory/2023-05-27.md"}
    assert matching_paths([], paths) == set()
