"""News at ``as_of`` stops at the close that prices ``as_of`` (16:00 New York: 20:00 UTC under
daylight saving, 21:00 UTC in winter, 13:00 New York on early-close days), for every provider,
on written headlines around the close and on the real Benzinga headlines and stocknet tweets."""

from __future__ import annotations

import csv
import json
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from agents.data.market.embedded import EmbeddedProvider
from agents.data.market_calendar import close_at_or_before
from agents.tools.catalog import run_tool
from agents.tools.registry import ToolContext
from core.settings import Settings
from tests.conftest import SHARED_DATA

pytestmark = pytest.mark.usefixtures("clean_settings")

BENZINGA = SHARED_DATA / "news" / "benzinga" / "analyst_ratings_processed.csv"
TWEETS = SHARED_DATA / "news" / "stocknet_tweets" / "AAPL.jsonl"


def _ctx(as_of: date, **settings: Any) -> ToolContext:
    return ToolContext(settings=Settings(**settings), as_of=as_of, provider=EmbeddedProvider())


def _write_headlines(folder: Path, rows: list[tuple[str, str]]) -> Path:
    """A headline CSV (files provider format) of ``(UTC ISO time, headline)`` rows filed under AAPL."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "headlines.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["title", "date", "stock"])
        for stamp, title in rows:
            writer.writerow([title, stamp, "AAPL"])
    return folder


def _headlines(as_of: date, folder: Path, hours_back: int = 48) -> list[str]:
    env = run_tool(
        name="get_news",
        arguments={"symbols": ["AAPL"], "hours_back": hours_back},
        ctx=_ctx(as_of, data_news_dir=folder, data_news_provider="files"),
    )
    assert env.ok and env.data is not None
    return [n["headline"] for n in env.data["news"]]


@pytest.mark.parametrize(
    ("as_of", "close_utc"),
    [
        (date(2020, 5, 12), datetime(2020, 5, 12, 20, 0, tzinfo=UTC)),  # EDT: 16:00 = 20:00Z
        (date(2020, 1, 15), datetime(2020, 1, 15, 21, 0, tzinfo=UTC)),  # EST: 16:00 = 21:00Z
        (date(2019, 11, 29), datetime(2019, 11, 29, 18, 0, tzinfo=UTC)),  # early close 13:00 EST
        (date(2020, 5, 16), datetime(2020, 5, 15, 20, 0, tzinfo=UTC)),  # Saturday: Friday's close
        (date(2020, 3, 9), datetime(2020, 3, 9, 20, 0, tzinfo=UTC)),  # first Monday of EDT 2020
    ],
)
def test_the_cutoff_is_the_close_that_prices_as_of(tmp_path: Path, as_of: date, close_utc: datetime) -> None:
    folder = _write_headlines(tmp_path / "news", [("2001-01-02T12:00:00Z", "Apple long ago")])
    env = run_tool(
        name="get_news",
        arguments={"symbols": ["AAPL"], "hours_back": 5},
        ctx=_ctx(as_of, data_news_dir=folder, data_news_provider="files"),
    )
    assert env.ok and env.data is not None
    assert datetime.fromisoformat(env.data["window"]["until"]) == close_utc
    assert close_at_or_before(as_of) == close_utc


def test_headlines_around_the_close_summer_winter_and_early_close(tmp_path: Path) -> None:
    folder = _write_headlines(
        tmp_path / "news",
        [
            ("2020-05-12T19:59:00Z", "Apple before the summer close"),
            ("2020-05-12T20:30:00Z", "Apple after the summer close"),
            ("2020-01-15T20:30:00Z", "Apple before the winter close"),
            ("2020-01-15T21:00:00Z", "Apple at the winter close"),
            ("2020-01-15T21:05:00Z", "Apple after the winter close"),
            ("2019-11-29T17:59:00Z", "Apple before the early close"),
            ("2019-11-29T18:30:00Z", "Apple after the early close"),
            ("2020-05-15T19:00:00Z", "Apple on Friday"),
            ("2020-05-16T10:00:00Z", "Apple on Saturday"),
        ],
    )
    assert _headlines(date(2020, 5, 12), folder) == ["Apple before the summer close"]
    assert _headlines(date(2020, 1, 15), folder) == ["Apple before the winter close"]
    assert _headlines(date(2019, 11, 29), folder) == ["Apple before the early close"]
    assert _headlines(date(2020, 5, 16), folder) == ["Apple on Friday"]
    # the next session sees what came after the close (the window reaches back over it)
    assert _headlines(date(2020, 5, 13), folder, hours_back=24) == ["Apple after the summer close"]


def test_financial_news_stops_at_the_close_too(tmp_path: Path) -> None:
    folder = _write_headlines(
        tmp_path / "news",
        [("2020-05-12T19:59:00Z", "Apple iPhone before"), ("2020-05-12T20:30:00Z", "Apple iPhone after")],
    )
    env = run_tool(
        name="financial_news",
        arguments={"query": "Apple iPhone", "max_results": 5},
        ctx=_ctx(date(2020, 5, 12), data_news_dir=folder, data_news_provider="files"),
    )
    assert env.ok and env.data is not None
    assert [r["title"] for r in env.data["results"]] == ["Apple iPhone before"]


def test_rss_items_after_the_close_are_left_out(tmp_path: Path) -> None:
    feed = tmp_path / "feed.xml"
    feed.write_text(
        """<?xml version="1.0"?><rss version="2.0"><channel><title>Local</title>
<item><title>Apple (AAPL) before the close</title><pubDate>Tue, 12 May 2020 19:59:00 GMT</pubDate></item>
<item><title>Apple (AAPL) after the close</title><pubDate>Tue, 12 May 2020 20:30:00 GMT</pubDate></item>
</channel></rss>""",
        encoding="utf-8",
    )
    env = run_tool(
        name="get_news",
        arguments={"symbols": ["AAPL"], "hours_back": 24},
        ctx=_ctx(date(2020, 5, 12), data_news_provider="rss", data_news_rss_urls=str(feed)),
    )
    assert env.ok and env.data is not None
    assert [n["headline"] for n in env.data["news"]] == ["Apple (AAPL) before the close"]


def test_real_benzinga_headlines_after_the_close_are_not_returned() -> None:
    if not BENZINGA.is_file():
        pytest.skip(f"shared news data not found at {BENZINGA} (only present in the workplace)")
    folder = BENZINGA.parent
    raw = pd.read_csv(BENZINGA)
    stamps = pd.to_datetime(raw["date"], utc=True, errors="coerce")  # a few rows have no date
    # AAPL 2020-05-12 (EDT): Benzinga rows at 20:11Z and 22:07Z came after the 16:00 close
    aapl = raw[(raw["stock"] == "AAPL") & (stamps.dt.date == date(2020, 5, 12))]
    after = set(aapl[stamps[aapl.index] >= pd.Timestamp("2020-05-12 20:00", tz="UTC")]["title"])
    before = set(aapl[stamps[aapl.index] < pd.Timestamp("2020-05-12 20:00", tz="UTC")]["title"])
    assert len(after) == 2 and before
    got = set(_headlines(date(2020, 5, 12), folder, hours_back=20))
    assert got and got <= before and not got & after
    # ABBV in winter (EST, close 21:00Z): a 20:38Z row (15:38 New York) is before the close
    env = run_tool(
        name="get_news",
        arguments={"symbols": ["ABBV"], "hours_back": 12},
        ctx=_ctx(date(2018, 12, 20), data_news_dir=folder, data_news_provider="files"),
    )
    assert env.ok and env.data is not None
    # (without a company-name list "AbbVie" does not name ABBV: the rows are counted as left out)
    stamps_got = [n["published_at"] for n in env.data["news"] + env.data["left_out_examples"]]
    assert "2018-12-20T20:38:00+00:00" in stamps_got
    # ABBV 2019-01-18: its only row of the day, 21:31Z (16:31 New York), is after the close; the
    # next session (Tuesday 2019-01-22, after Martin Luther King Day) sees it
    assert "2019-01-18T21:31:00+00:00" in set(
        stamps[raw["stock"] == "ABBV"].dt.strftime("%Y-%m-%dT%H:%M:00+00:00")
    )
    for as_of, hours, seen in ((date(2019, 1, 18), 12, False), (date(2019, 1, 22), 24 * 4, True)):
        env = run_tool(
            name="get_news",
            arguments={"symbols": ["ABBV"], "hours_back": hours},
            ctx=_ctx(as_of, data_news_dir=folder, data_news_provider="files"),
        )
        assert env.ok and env.data is not None
        shown = [n["published_at"] for n in env.data["news"] + env.data["left_out_examples"]]
        assert ("2019-01-18T21:31:00+00:00" in shown) is seen


def _tweets_as_headlines(folder: Path, day: date) -> pd.DataFrame:
    """The real AAPL tweets of ``day`` and the day before as a headline CSV (the files provider
    reads CSVs); returns them with a UTC ``t`` column."""
    rows = [json.loads(line) for line in TWEETS.read_text(encoding="utf-8").splitlines() if line.strip()]
    frame = pd.DataFrame(rows)
    frame["t"] = pd.to_datetime(frame["created_at"], utc=True)
    start = pd.Timestamp(day - timedelta(days=1), tz="UTC")
    frame = frame[(frame["t"] >= start) & (frame["t"] < start + pd.Timedelta(days=2))]
    # one row per text (retweets repeat a text; the provider keeps one per minute anyway)
    frame = frame.drop_duplicates(subset=["text"])
    _write_headlines(
        folder, [(str(t.isoformat()), str(text)) for t, text in zip(frame["t"], frame["text"], strict=True)]
    )
    return frame


@pytest.mark.parametrize(
    ("day", "close_utc", "before", "after"),
    [
        # Apple's Q3 FY2014 results came out after the close (16:00 EDT = 20:00Z) of 2014-07-22
        (
            date(2014, 7, 22),
            "2014-07-22 20:00",
            "$AAPL 10c beat from 1.22 or 1.32 earnings beat. "
            "bought weekly call for July 25 on earnings beat.",
            "$AAPL misses on revenue, beats on earnings  http://t.co/huGODwLtuE",
        ),
        # winter (EST): the close is 21:00Z; a 20:55Z tweet is before it, a 21:03Z one after
        (
            date(2014, 3, 7),
            "2014-03-07 21:00",
            "LONG 2k $AAPL $530 calls for the gapper tomorrow. $STUDY",
            "$AAPL Apple's bid to ban sales of Samsung phones is rejected - Boston Globe http://t.co/QRrtsN2z2r",
        ),
    ],
)
def test_real_stocknet_tweets_stop_at_the_close(
    tmp_path: Path, day: date, close_utc: str, before: str, after: str
) -> None:
    if not TWEETS.is_file():
        pytest.skip(f"shared tweet data not found at {TWEETS} (only present in the workplace)")
    tweets = _tweets_as_headlines(tmp_path / "news", day)
    close = pd.Timestamp(close_utc, tz="UTC")
    assert set(tweets["text"]) >= {before, after}  # both are real tweets of that day
    # the two hours before the close: few enough tweets to stay under the 50-per-symbol cap
    want = tweets[(tweets["t"] < close) & (tweets["t"] >= close - pd.Timedelta(hours=2))]
    assert 0 < len(want) < 50
    env = run_tool(
        name="get_news",
        arguments={"symbols": ["AAPL"], "hours_back": 2},
        ctx=_ctx(day, data_news_dir=tmp_path / "news", data_news_provider="files"),
    )
    assert env.ok and env.data is not None
    got = [n["headline"] for n in env.data["news"]]
    assert before in got and after not in got
    assert env.data["count"] + env.data["left_out"]["AAPL"] == len(want)
    assert all(pd.Timestamp(n["published_at"]) < close for n in env.data["news"])
