"""get_social_posts over the real stocknet tweets and small hand-written files: point in time at
the as-of close, retweets and duplicate texts collapsed with their counts, author reach, errors."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from agents.data.market.embedded import EmbeddedProvider
from agents.data.social.posts import text_key
from agents.tools.catalog import run_tool
from agents.tools.registry import ToolContext
from core.settings import Settings
from tests.conftest import SHARED_DATA

pytestmark = pytest.mark.usefixtures("clean_settings")

TWEETS = SHARED_DATA / "news" / "stocknet_tweets"


@pytest.fixture
def tweets_dir() -> Path:
    if not (TWEETS / "AAPL.jsonl").is_file():
        pytest.skip(f"shared tweet data not found at {TWEETS} (only present in the workplace)")
    return TWEETS


def _ctx(as_of: date, **settings: Any) -> ToolContext:
    return ToolContext(settings=Settings(**settings), as_of=as_of, provider=EmbeddedProvider())


def _write(folder: Path, symbol: str, rows: list[dict[str, Any]]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{symbol}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def _tweet(i: int, at: str, text: str, followers: int, retweet: bool = False) -> dict[str, Any]:
    return {
        "id": str(i),
        "created_at": at,
        "text": text,
        "lang": "en",
        "user_followers": followers,
        "retweet": retweet,
    }


def test_real_tweets_window_ends_at_the_close(tweets_dir: Path) -> None:
    # Friday 2014-01-03 (EST): the close is 21:00 UTC; 24 h back is 2014-01-02 21:00 UTC.
    ctx = _ctx(date(2014, 1, 3), data_social_dir=tweets_dir)
    env = run_tool(
        name="get_social_posts", arguments={"symbol": "aapl", "hours_back": 24, "limit": 200}, ctx=ctx
    )
    assert env.ok and env.data
    data = env.data
    assert data["window"]["until"] == "2014-01-03T21:00:00+00:00"
    assert data["window"]["since"] == "2014-01-02T21:00:00+00:00"
    raw = pd.read_json(tweets_dir / "AAPL.jsonl", lines=True, dtype={"id": str})
    stamps = pd.to_datetime(raw["created_at"], utc=True)
    inside = raw[
        (stamps >= pd.Timestamp("2014-01-02 21:00", tz="UTC"))
        & (stamps < pd.Timestamp("2014-01-03 21:00", tz="UTC"))
    ]
    assert data["copies"] == len(inside)  # every tweet of the window, retweets included
    assert sum(p["count"] for p in data["posts"]) == len(inside)
    assert data["distinct"] < data["copies"]  # this day has retweets of the same text
    for post in data["posts"]:
        assert "2014-01-02T21:00:00+00:00" <= post["created_at"] < "2014-01-03T21:00:00+00:00"
        assert not post["text"].startswith("RT @")
    # the tool call id and the file are cited
    assert env.source_refs[0] == env.tool_call_id
    assert env.source_refs[1] == f"social:{(tweets_dir / 'AAPL.jsonl').resolve()}"


def test_weekend_as_of_uses_friday_close(tweets_dir: Path) -> None:
    sat = run_tool(
        name="get_social_posts",
        arguments={"symbol": "AAPL", "hours_back": 48},
        ctx=_ctx(date(2014, 1, 4), data_social_dir=tweets_dir),
    )
    fri = run_tool(
        name="get_social_posts",
        arguments={"symbol": "AAPL", "hours_back": 48},
        ctx=_ctx(date(2014, 1, 3), data_social_dir=tweets_dir),
    )
    assert sat.data and fri.data
    assert sat.data["window"] == fri.data["window"]
    assert sat.data["posts"] == fri.data["posts"]


def test_collapse_counts_reach_and_point_in_time(tmp_path: Path) -> None:
    # 2015-03-10 (EDT): close 20:00 UTC. Window of 24 h: [2015-03-09 20:00, 2015-03-10 20:00).
    _write(
        tmp_path,
        "XOM",
        [
            _tweet(1, "2015-03-09T19:59:59Z", "$XOM oil rally", 5),  # before the window
            _tweet(2, "2015-03-10T14:00:00Z", "$XOM oil rally http://t.co/a", 100),
            _tweet(3, "2015-03-10T15:00:00Z", "RT @bob: $XOM oil rally http://…", 7, retweet=True),
            _tweet(4, "2015-03-10T16:00:00Z", "$XOM  OIL rally", 20),  # same text, other spacing/case
            _tweet(5, "2015-03-10T17:00:00Z", "$XOM dividend cut?", 3),
            _tweet(6, "2015-03-10T20:00:00Z", "RT @bob: $XOM oil rally", 1000, retweet=True),  # at the close
            _tweet(7, "2015-03-10T21:30:00Z", "$XOM after hours", 50),  # after the close
        ],
    )
    env = run_tool(
        name="get_social_posts",
        arguments={"symbol": "XOM", "hours_back": 24},
        ctx=_ctx(date(2015, 3, 10), data_social_dir=tmp_path),
    )
    assert env.ok and env.data
    posts = env.data["posts"]
    assert [p["text"] for p in posts] == ["$XOM dividend cut?", "$XOM oil rally http://t.co/a"]
    rally = posts[1]
    # ids 2, 3, 4 (1 is before the window, 6 at the close is excluded)
    assert (rally["count"], rally["retweets"], rally["followers"], rally["reach"]) == (3, 1, 100, 127)
    assert rally["created_at"] == "2015-03-10T14:00:00+00:00"
    assert rally["last_at"] == "2015-03-10T16:00:00+00:00"
    assert (env.data["copies"], env.data["distinct"], env.data["truncated"]) == (4, 2, False)
    # a day later the tweet at the close and the after-hours one are visible
    later = run_tool(
        name="get_social_posts",
        arguments={"symbol": "XOM", "hours_back": 48},
        ctx=_ctx(date(2015, 3, 11), data_social_dir=tmp_path),
    )
    assert later.data
    counts = {p["text"]: p["count"] for p in later.data["posts"]}
    # ids 2, 3, 4 and 6; id 1 (19:59:59) stays just before the window's start, 2015-03-09 20:00
    assert counts["$XOM oil rally http://t.co/a"] == 4
    assert counts["$XOM after hours"] == 1
    limited = run_tool(
        name="get_social_posts",
        arguments={"symbol": "XOM", "hours_back": 24, "limit": 1},
        ctx=_ctx(date(2015, 3, 10), data_social_dir=tmp_path),
    )
    assert limited.data and limited.data["count"] == 1 and limited.data["truncated"] is True


def test_text_key() -> None:
    assert text_key("RT @a: $AAPL up http://t.co/x") == text_key("$aapl  up http://…") == "$aapl up"
    assert text_key("http://t.co/x") == ""


def test_unknown_ticker_is_empty_not_an_error(tmp_path: Path) -> None:
    _write(tmp_path, "XOM", [])
    env = run_tool(
        name="get_social_posts",
        arguments={"symbol": "ZZZZ"},
        ctx=_ctx(date(2015, 3, 10), data_social_dir=tmp_path),
    )
    assert env.ok and env.data and env.data["posts"] == [] and env.data["copies"] == 0


def test_errors(tmp_path: Path) -> None:
    as_of = date(2015, 3, 10)
    missing = run_tool(name="get_social_posts", arguments={"symbol": "XOM"}, ctx=_ctx(as_of))
    assert missing.error and missing.error.code == "NOT_CONFIGURED"
    assert missing.retry_hint and "FINAGENT_DATA_SOCIAL_DIR" in missing.retry_hint
    not_dir = run_tool(
        name="get_social_posts",
        arguments={"symbol": "XOM"},
        ctx=_ctx(as_of, data_social_dir=tmp_path / "nope"),
    )
    assert not_dir.error and not_dir.error.code == "NOT_CONFIGURED"
    for arguments in (
        {"symbol": "XOM", "hours_back": 0},
        {"symbol": "XOM", "limit": 201},
        {"symbol": "X!"},
        {"symbol": "XOM", "x": 1},
    ):
        bad = run_tool(
            name="get_social_posts", arguments=arguments, ctx=_ctx(as_of, data_social_dir=tmp_path)
        )
        assert bad.error and bad.error.code == "INVALID_INPUT", arguments
    (tmp_path / "BAD.jsonl").write_text(
        '{"id": "1", "created_at": "not a time", "text": "x"}\n', encoding="utf-8"
    )
    broken = run_tool(
        name="get_social_posts", arguments={"symbol": "BAD"}, ctx=_ctx(as_of, data_social_dir=tmp_path)
    )
    assert broken.error and broken.error.code == "INTERNAL_ERROR"
    assert "line 1" in broken.error.message


def test_rows_land_in_tool_calls(tmp_path: Path) -> None:
    _write(tmp_path, "XOM", [_tweet(1, "2015-03-10T14:00:00Z", "$XOM up", 1)])
    ctx = _ctx(date(2015, 3, 10), data_social_dir=tmp_path)
    env = run_tool(name="get_social_posts", arguments={"symbol": "XOM"}, ctx=ctx)
    assert env.ok
    assert [r["tool_call_id"] for r in ctx.rows] == [env.tool_call_id]
    assert ctx.rows[0]["tool"] == "get_social_posts" and ctx.rows[0]["symbol"] == "XOM"
