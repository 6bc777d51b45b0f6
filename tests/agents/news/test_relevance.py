"""Headline relevance before sentiment, on the real Benzinga headlines filed under AAPL: two
headlines that do not name Apple (a biotech headline, bank earnings) are left out and counted, headlines
naming Apple are scored."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pandas as pd
import pytest

from agents.analysts.views import sentiment_summary
from agents.data.market.embedded import EmbeddedProvider
from agents.data.news.scoring import company_aliases, mentions_company, sentiment
from agents.tools.catalog import run_tool
from agents.tools.registry import ToolContext
from core.settings import Settings
from tests.conftest import SHARED_DATA

pytestmark = pytest.mark.usefixtures("clean_settings")

NEWS_DIR = SHARED_DATA / "news"
BENZINGA = NEWS_DIR / "benzinga" / "analyst_ratings_processed.csv"
BIOTECH = "BioXcel Therapeutics CEO Says Wearable Devices Are Another Tool To Combat Alzheimer's Agitation"
BANKS = "JPMorgan, Wells Fargo Earnings Lower Than Expected, But Positive Tone Helps Shares"


@pytest.fixture
def news_dir() -> Path:
    if not BENZINGA.is_file():
        pytest.skip(f"shared news data not found at {BENZINGA} (only present in the workplace)")
    return NEWS_DIR


def test_the_issues_examples_are_real_rows_filed_under_aapl(news_dir: Path) -> None:
    raw = pd.read_csv(BENZINGA)
    aapl = raw[raw["stock"] == "AAPL"]
    rows = aapl[aapl["title"].isin([BIOTECH, BANKS])].set_index("title")["date"].to_dict()
    assert rows == {BANKS: "2020-04-14 09:56:00-04:00", BIOTECH: "2020-04-15 12:03:00-04:00"}
    # what a general-purpose lexicon says about them (VADER compound), were they scored for AAPL
    assert sentiment(BANKS) == pytest.approx(0.9, abs=0.01)
    assert sentiment(BIOTECH) == pytest.approx(-0.53, abs=0.01)


def test_get_news_leaves_them_out_and_counts_them(news_dir: Path) -> None:
    ctx = ToolContext(
        settings=Settings(data_news_dir=news_dir, data_news_provider="files"),
        as_of=date(2020, 4, 15),
        provider=EmbeddedProvider(),  # its profile names AAPL "Apple Inc."
    )
    env = run_tool(name="get_news", arguments={"symbols": ["AAPL"], "hours_back": 48}, ctx=ctx)
    assert env.ok and env.data
    scored = [n["headline"] for n in env.data["news"]]
    left = [x["headline"] for x in env.data["left_out_examples"]]
    assert BIOTECH in left and BANKS in left
    assert BIOTECH not in scored and BANKS not in scored
    assert all("Apple" in h or "AAPL" in h for h in scored) and len(scored) == 7
    # the window's rows under AAPL (2020-04-13 16:00 to 2020-04-15 16:00 New York, close to
    # close), split by hand: 7 name Apple, 4 do not (the two above, "Every Member Of Trump's
    # 'Great American Economic Revival' Industry Groups" and the 16:01 New York "IDC Issues PC
    # Report For Q1, ...")
    assert env.data["left_out"] == {"AAPL": 4}
    assert env.data["relevance"]["AAPL"]["names"] == ["Apple", "Apple Inc"]
    view = sentiment_summary(env.data, ref=env.tool_call_id)
    assert view["count"] == 7 and view["left_out"] == 4
    assert "4 headlines left out: they do not name the company." in view["note"]


@pytest.mark.parametrize(
    ("symbol", "name", "aliases"),
    [
        ("AAPL", "Apple Inc.", ("Apple", "Apple Inc")),
        ("MSFT", "Microsoft Corporation", ("Microsoft", "Microsoft Corporation")),
        ("XOM", "Exxon Mobil Corporation", ("Exxon", "Exxon Mobil", "Exxon Mobil Corporation")),
        ("GE", "General Electric", ("General Electric",)),  # "General" alone is no name
        ("FB", "Facebook, Inc.", ("Facebook", "Facebook Inc", "Meta Platforms")),
    ],
)
def test_aliases_from_the_providers_names(symbol: str, name: str, aliases: tuple[str, ...]) -> None:
    assert company_aliases(symbol=symbol, names=[name]) == tuple(sorted(aliases))


def test_mentions() -> None:
    apple = company_aliases(symbol="AAPL", names=["Apple Inc."])
    assert mentions_company("Apple's iPhone sales slow", symbol="AAPL", aliases=apple)
    assert mentions_company("Options on $AAPL", symbol="AAPL", aliases=())
    assert not mentions_company("Pineapple futures rise", symbol="AAPL", aliases=apple)
    # a one-letter ticker is a word too: only $A, (A) or an exchange prefix count
    agilent = company_aliases(symbol="A", names=["Agilent Technologies"])
    assert not mentions_company("A Peek Into The Markets", symbol="A", aliases=agilent)
    assert mentions_company("Agilent (A) raises guidance", symbol="A", aliases=())
    assert mentions_company("Agilent Q2 results", symbol="A", aliases=agilent)
