"""The sentiment analyst's readings (``agents.analysts.readings.sentiment_readings``) on real
Benzinga headlines: what they say agrees with the sentiment view's own counts, and every number
they print is a value of the ``get_news`` output, so a model that copies one stays grounded."""

from __future__ import annotations

import copy
import re
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from agents.analysts.grounding import extract_numbers, unverified_numbers
from agents.analysts.readings import sentiment_readings
from agents.analysts.views import sentiment_summary
from agents.data.market.embedded import EmbeddedProvider
from agents.data.news.scoring import TAGS
from agents.tools.catalog import run_tool
from agents.tools.registry import ToolContext
from core.settings import Settings
from tests.conftest import SHARED_DATA

pytestmark = pytest.mark.usefixtures("clean_settings")

BENZINGA = SHARED_DATA / "news" / "benzinga" / "analyst_ratings_processed.csv"
#: The S&P 500 names there make "AbbVie" name ABBV (``agents.tools.news``: company aliases).
FUNDAMENTALS = SHARED_DATA / "fundamentals"


@pytest.fixture
def news_dir() -> Path:
    if not BENZINGA.is_file():
        pytest.skip(f"shared news data not found at {BENZINGA} (only present in the workplace)")
    return BENZINGA.parent.parent


def _news(news_dir: Path, symbol: str, as_of: date) -> dict[str, Any]:
    ctx = ToolContext(
        settings=Settings(
            _env_file=None,
            data_news_dir=news_dir,
            data_news_provider="files",
            data_fundamentals_dir=FUNDAMENTALS,
        ),
        as_of=as_of,
        provider=EmbeddedProvider(),
    )
    env = run_tool(name="get_news", arguments={"symbols": [symbol], "hours_back": 24 * 7}, ctx=ctx)
    assert env.ok and env.data, env.error
    return env.data


@pytest.mark.parametrize(("symbol", "as_of"), [("AAPL", date(2020, 6, 9)), ("ABBV", date(2015, 6, 1))])
def test_sentiment_readings_agree_with_the_view_and_print_only_the_outputs_numbers(
    news_dir: Path, symbol: str, as_of: date
) -> None:
    data = _news(news_dir, symbol, as_of)
    items = data["news"]
    assert len(items) >= 5
    readings = sentiment_readings(data)
    view = sentiment_summary(data, ref=None)

    assert readings[0] == f"{len(items)} headlines in the window name the company."
    tagged = [t for t in TAGS if view["tags"].get(t)]
    assert any(f"tagged {', '.join(tagged)} by" in r for r in readings) == bool(tagged)
    # the highest-impact headline (newest among equals), its tone by the view's thresholds
    top = max(items, key=lambda n: (n["impact_score"], n["published_at"]))
    tone = "positive" if top["sentiment"] >= 0.05 else "negative" if top["sentiment"] <= -0.05 else "neutral"
    line = next(r for r in readings if r.startswith("The highest-impact headline"))
    assert line.startswith(f"The highest-impact headline reads {tone} (VADER ")
    assert float(re.search(r"VADER (-?[\d.]+)\)", line).group(1)) == top["sentiment"]  # type: ignore[union-attr]
    assert (top["headline"] in line) == (not re.search(r"\d", top["headline"]))
    # the balance in words, by the view's own counts
    positive, negative = view["positive"], view["negative"]
    expected = (
        "more headlines read positive than negative"
        if positive > negative
        else "more headlines read negative than positive"
        if negative > positive
        else "as many headlines read positive as negative"
        if positive
        else "none of the headlines reads positive or negative"
    )
    assert expected in readings[-1]
    # every number printed is a value of the output (the grounding check accepts a copy)
    assert all(unverified_numbers(r, [data]) == [] for r in readings), readings
    assert sum(len(extract_numbers(r)) for r in readings) >= 2


def test_a_title_without_digits_is_quoted_and_no_headlines_give_no_readings(news_dir: Path) -> None:
    data = copy.deepcopy(_news(news_dir, "ABBV", date(2015, 6, 1)))
    for item in data["news"]:
        item["headline"] = f"AbbVie story {'x' * len(item['headline'] or '')}"[:40]
    top = max(data["news"], key=lambda n: (n["impact_score"], n["published_at"]))
    top["headline"] = "AbbVie Presents Positive Results at ASCO"
    line = next(r for r in sentiment_readings(data) if r.startswith("The highest-impact"))
    assert line.endswith(': "AbbVie Presents Positive Results at ASCO".')
    assert sentiment_readings({"news": [], "count": 0}) == []
    assert sentiment_readings(None) == []
