"""The gateway's field rules: each pattern stated in the OpenAPI document is exactly the rule the
check applies (property tests over the pattern and over arbitrary text), and the edge checks of
``apps.api.edge`` find NUL characters, lone surrogates, repeated keys and non-finite numbers
wherever they are in a body."""

from __future__ import annotations

import json
import re
from datetime import date

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from apps import watchlists
from apps.api.edge import body_errors, encodable, text_problem
from apps.api.fields import MaxIterations, RunDateKey, Schedule, Ticker, TimeZone
from core.dates import DATE_PATTERN, EARLIEST_DATE
from core.tickers import TICKER_PATTERN

PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
#: Text a fuzzer would send: any character, with the alphabet of the patterns well represented.
TEXT = st.text(st.one_of(st.characters(), st.sampled_from("AZaz09.-/*, :\n\t")), max_size=40)


def _accepts(adapter: TypeAdapter, value: object) -> bool:
    try:
        adapter.validate_python(value)
    except ValidationError:
        return False
    return True


@PROPERTY
@given(st.from_regex(TICKER_PATTERN, fullmatch=True))
def test_every_ticker_the_pattern_allows_is_accepted_upper_cased(text: str) -> None:
    assert TypeAdapter(Ticker).validate_python(text) == text.upper()


@PROPERTY
@given(TEXT)
def test_a_ticker_is_accepted_exactly_when_it_matches_the_pattern(text: str) -> None:
    assert _accepts(TypeAdapter(Ticker), text) == bool(re.fullmatch(TICKER_PATTERN, text))


@PROPERTY
@given(TEXT)
def test_a_schedule_is_accepted_exactly_when_it_matches_the_pattern(text: str) -> None:
    assert _accepts(TypeAdapter(Schedule), text) == bool(re.fullmatch(watchlists.SCHEDULE_PATTERN, text))


def test_time_zones_are_the_loadable_iana_names_without_the_host_alias() -> None:
    adapter = TypeAdapter(TimeZone)
    assert "America/New_York" in watchlists.TIME_ZONES and "UTC" in watchlists.TIME_ZONES
    for zone in watchlists.TIME_ZONES:
        watchlists.parse_timezone(zone)
    for bad in ["localtime", "Factory", "Mars/Olympus", "A" * 100_000, "../../etc/passwd", ""]:
        assert not _accepts(adapter, bad), bad
    # a name too long for the file system was an OSError, answered 503 "database unreachable"
    with pytest.raises(watchlists.WatchlistError, match="unknown time zone"):
        watchlists.parse_timezone("A" * 100_000)


@PROPERTY
@given(st.dates(min_value=EARLIEST_DATE))
def test_every_date_from_1900_matches_the_pattern_and_parses(day: date) -> None:
    assert re.fullmatch(DATE_PATTERN, day.isoformat())
    assert TypeAdapter(RunDateKey).validate_python(day.isoformat()) == day


@PROPERTY
@given(TEXT)
def test_a_date_text_is_accepted_only_when_it_matches_the_pattern(text: str) -> None:
    if _accepts(TypeAdapter(RunDateKey), text):
        assert re.fullmatch(DATE_PATTERN, text)


@pytest.mark.parametrize(
    ("value", "valid"),
    [
        (3, True),
        (3.0, True),
        (10, True),
        ("3", False),
        (True, False),
        (3.5, False),
        (0, False),
        (11, False),
        (1e300, False),
    ],
)
def test_max_iterations_is_a_json_integer_from_1_to_10(value: object, valid: bool) -> None:
    assert _accepts(TypeAdapter(MaxIterations), value) is valid


def _loc(body: bytes) -> list[tuple]:
    return [tuple(e["loc"]) for e in body_errors(body, "application/json")]


def test_repeated_keys_are_found_at_any_depth() -> None:
    assert _loc(b'{"symbol": "AAPL;DROP TABLE x", "symbol": "IBM"}') == [("body", "symbol")]
    assert _loc(b'{"options": {"max_iterations": 1, "max_iterations": 9}}') == [
        ("body", "options", "max_iterations")
    ]
    assert _loc(b'{"tickers": [{"a": 1, "a": 1}]}') == [("body", "tickers", 0, "a")]


@pytest.mark.parametrize("number", [b"NaN", b"Infinity", b"-Infinity", b"1e400", b"-1e400"])
def test_non_finite_numbers_are_found(number: bytes) -> None:
    errors = body_errors(b'{"options": {"max_iterations": ' + number + b"}}", "application/json")
    assert [(e["type"], tuple(e["loc"])) for e in errors] == [
        ("json_number", ("body", "options", "max_iterations"))
    ]
    json.dumps(errors, allow_nan=False)  # the error itself can be written


def test_nul_and_lone_surrogates_are_found_in_values_and_keys() -> None:
    body = b'{"name": "a\\u0000b", "tickers": ["AAPL", "\\ud800"], "\\udfff": 1}'
    errors = body_errors(body, "application/json")
    assert {(e["type"], tuple(e["loc"])) for e in errors} == {
        ("string_nul", ("body", "name")),
        ("string_surrogate", ("body", "tickers", 1)),
        ("string_surrogate", ("body", "\\udfff")),
    }
    json.dumps(errors).encode("utf-8")  # every echoed input is encodable
    # a surrogate pair escaped in JSON is one character (U+1F600), not a lone surrogate
    assert body_errors('{"q": "\U0001f600 \\ud83d\\ude00"}'.encode(), "application/json") == []
    assert text_problem("\U0001f600") is None


def test_bodies_that_are_not_json_are_left_to_fastapi() -> None:
    assert body_errors(b"{not json", "application/json") == []
    assert body_errors(b'{"a": 1, "a": 2}', "text/plain") == []
    assert body_errors(b"[" * 100_000 + b"]" * 100_000, "application/json") == []  # too deep to parse
    assert body_errors(b'{"a": 1, "a": 2}', "application/merge-patch+json") != []


def test_encodable_escapes_surrogates_and_spells_non_finite_numbers() -> None:
    value = {"detail": "bad \ud800", "errors": [{"input": float("inf")}, (float("nan"), 1)]}
    out = encodable(value)
    assert out == {"detail": "bad \\ud800", "errors": [{"input": "inf"}, ["nan", 1]]}
    json.dumps(out, allow_nan=False).encode("utf-8")
