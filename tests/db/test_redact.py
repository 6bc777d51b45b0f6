"""``db.redact.redact``: secrets never reach a row (pure function, no database)."""

from __future__ import annotations

import pytest

from db.redact import redact


def test_redacts_secret_keys_in_nested_dicts_and_lists() -> None:
    given = {
        "symbol": "AAPL",
        "api_key": "sk-1",
        "headers": {"Authorization": "Bearer abc", "APCA-API-SECRET-KEY": "s3", "Accept": "json"},
        "accounts": [{"password": "p", "name": "main"}, {"nested": [{"access_token": {"v": 1}}]}],
        "pair": ("ok", {"clientSecret": "x"}),
    }
    assert redact(given) == {
        "symbol": "AAPL",
        "api_key": "***",
        "headers": {"Authorization": "***", "APCA-API-SECRET-KEY": "***", "Accept": "json"},
        "accounts": [{"password": "***", "name": "main"}, {"nested": [{"access_token": "***"}]}],
        "pair": ("ok", {"clientSecret": "***"}),
    }
    assert given["api_key"] == "sk-1"  # the input is not modified


@pytest.mark.parametrize(
    "key",
    ["KEY", "apiKey", "x-api-key", "secret", "token", "refresh_token", "PASSWORD", "proxy-authorization"],
)
def test_secret_key_names(key: str) -> None:
    assert redact({key: "v"}) == {key: "***"}


@pytest.mark.parametrize("key", ["keywords", "max_tokens", "total_tokens", "symbol", "query"])
def test_data_keys_are_kept(key: str) -> None:
    assert redact({key: ["earnings"]}) == {key: ["earnings"]}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("HTTP 401: invalid api_key=sk-live-123&symbol=AAPL", "HTTP 401: invalid api_key=***&symbol=AAPL"),
        ('{"apiKey": "sk-live-123", "symbol": "AAPL"}', '{"apiKey": "***", "symbol": "AAPL"}'),
        ("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.x.y", "Authorization: *** ***"),
        ("sent Bearer eyJhbGciOiJIUzI1NiJ9.x.y upstream", "sent Bearer *** upstream"),
        (
            "connect postgresql://finagent:hunter2@db:5432/x failed",
            "connect postgresql://finagent:***@db:5432/x failed",
        ),
        ("redis://:hunter2@cache:6379/0", "redis://:***@cache:6379/0"),
        ("password = 'hunter2'", "password = '***'"),
        ("KeyError: 'close'", "KeyError: 'close'"),
        ("Price: $150.25, Change: +2.15", "Price: $150.25, Change: +2.15"),
        ("API key is invalid; check your key", "API key is invalid; check your key"),
    ],
)
def test_redacts_secrets_in_text(text: str, expected: str) -> None:
    assert redact(text) == expected


def test_other_values_pass_through() -> None:
    assert redact(None) is None
    assert redact(3.5) == 3.5
    assert redact([1, "a", None]) == [1, "a", None]


def test_long_text_is_linear() -> None:
    # a quadratic pattern took 12 s on 20 KB; the bound only catches that regression, not speed
    import time

    blob = "a" * 20_000 + " key" * 2_000 + " a." * 5_000
    started = time.perf_counter()
    redact(blob)
    assert time.perf_counter() - started < 2.0
