"""The social-sentiment analyst: the finance-aware lexicon, the reach weighting, the summary it
cites, the report section, the research stage's call, and weight 0 leaving the score alone."""

from __future__ import annotations

import json
import math
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from agents.analysts.social import blend, label_of, reach_weight, social_score, social_summary
from agents.data.market.embedded import EmbeddedProvider
from agents.data.social.sentiment import LM_VALENCE, analyzer, lm_words, post_sentiment
from agents.tools.registry import ToolContext
from core.parts import Recommendation, ResearchBundle
from core.settings import Settings
from core.state import FinancialAgentState
from pipeline.report import report_markdown
from pipeline.stages.recommendation import _with_social
from pipeline.stages.research import gather_context
from tests.conftest import SHARED_DATA

pytestmark = pytest.mark.usefixtures("clean_settings")

TWEETS = SHARED_DATA / "news" / "stocknet_tweets"


def _compound(x: float) -> float:
    """VADER's normalisation of a summed valence x: x / sqrt(x² + 15)."""
    return round(x / math.sqrt(x * x + 15.0), 4)


def test_lexicon_adds_finance_and_trader_words_and_keeps_vader_values() -> None:
    positive, negative = lm_words()
    assert "impairment" in negative and "profitable" in positive  # Loughran-McDonald lists
    lex = analyzer().lexicon
    assert lex["impairment"] == -LM_VALENCE  # not rated by VADER: the LM valence
    assert lex["gain"] == 2.4  # rated by VADER (vader_lexicon.txt) and LM-positive: VADER's value kept
    assert lex["bullish"] == 2.0 and lex["bearish"] == -2.0
    # hand-checked: one rated word, x / sqrt(x² + 15)
    assert post_sentiment("$AAPL bullish") == _compound(2.0) == 0.4588
    assert post_sentiment("$XOM impairment charge") == _compound(-1.5) == -0.3612
    # VADER's negation multiplies by -0.74
    assert post_sentiment("$AAPL not bullish") == _compound(-0.74 * 2.0) == -0.357
    assert post_sentiment("$AAPL http://t.co/bullish") == 0.0  # links are not read
    # the news scorer's own VADER is a separate instance: unchanged
    from agents.data.news.scoring import score_item

    assert score_item(headline="AAPL bullish", summary=None, symbol="AAPL")["sentiment"] == 0.0


def test_reach_weighted_score_by_hand() -> None:
    assert reach_weight(0) == 1.0 and reach_weight(9) == 2.0 and reach_weight(99) == 3.0
    posts = [
        {"text": "$AAPL bullish", "reach": 99, "lang": "en"},  # s = 0.4588, w = 3
        {"text": "$AAPL bearish", "reach": 0, "lang": "en"},  # s = -0.4588, w = 1
        {"text": "$AAPL sehr bullish", "reach": 10**6, "lang": "de"},  # not scored
    ]
    score, scored, weight = social_score(posts)
    assert scored == 2 and weight == 4.0
    assert score == pytest.approx((3 * 0.4588 - 0.4588) / 4)  # 0.2294
    assert label_of(score) == "BULLISH" and label_of(-0.05) == "BEARISH" and label_of(0.0) == "NEUTRAL"
    assert label_of(None) == "NO_DATA"


def test_summary_cites_its_call_and_reads_no_posts_as_no_data() -> None:
    data = {
        "posts": [
            {
                "text": "$XOM plunges",
                "created_at": "2015-03-10T14:00:00+00:00",
                "count": 2,
                "reach": 9,
                "followers": 5,
                "lang": "en",
            },
        ],
        "copies": 2,
        "distinct": 1,
        "truncated": False,
        "window": {"since": "a", "until": "b", "hours_back": 72},
    }
    view = social_summary(data, ref="get_social_posts_aaaaaaaaaaaa")
    assert view["source_refs"] == ["get_social_posts_aaaaaaaaaaaa"]
    assert view["label"] == "BEARISH" and view["score"] == _compound(-2.0) == -0.4588
    assert (view["scored"], view["copies"], view["weight"], view["negative"]) == (1, 2, 2.0, 1)
    assert view["top"][0]["weight"] == 2.0 and view["top"][0]["count"] == 2
    empty = social_summary({"posts": [], "copies": 0}, ref="get_social_posts_bbbbbbbbbbbb")
    assert empty["label"] == "NO_DATA" and empty["score"] is None and empty["top"] == []


def test_report_has_its_own_social_section() -> None:
    social = {
        **social_summary(
            {
                "posts": [
                    {
                        "text": "$T bullish",
                        "created_at": "2017-08-31T15:00:00+00:00",
                        "count": 1,
                        "reach": 0,
                        "followers": 0,
                        "lang": "en",
                    }
                ],
                "copies": 1,
            },
            ref="get_social_posts_cccccccccccc",
        ),
        "weight_in_composite": 0.0,
    }
    state = FinancialAgentState(
        analysis_id="a",
        stock_symbol="T",
        as_of=date(2017, 9, 1),
        stock_data={"status": "success", "views": {"social": social}},
    )
    md = report_markdown(state)
    assert "## Social sentiment `[get_social_posts_cccccccccccc]`" in md
    assert (
        "**BULLISH**: 1 posts scored, reach-weighted sentiment 0.4588 (weight in the composite score: 0)"
        in md
    )
    assert "## News sentiment" not in md


def _rec(score: float) -> Recommendation:
    return Recommendation(
        signal="HOLD", confidence=0.3, score=score, components=[], rationale=[], risk_flags=[]
    )


def test_weight_blends_only_when_set() -> None:
    assert blend(score=0.2, social=-0.4, weight=0.0) == 0.2
    assert blend(score=0.2, social=0.8, weight=0.25) == 0.35  # 0.75 × 0.2 + 0.25 × 0.8
    with pytest.raises(ValueError, match="outside"):
        blend(score=0.0, social=0.0, weight=1.5)
    rec = _rec(0.2)
    _with_social(
        rec, social={"score": 0.8, "label": "BULLISH", "source_refs": ["get_social_posts_x"]}, weight=0.25
    )
    assert rec.score == 0.35 and rec.signal == "BUY"  # the scorer's BUY threshold is 0.25
    assert rec.components[-1]["source_refs"] == ["get_social_posts_x"] and rec.confidence == 0.3
    assert Settings().analysis.social_weight == 0.0  # reported only, by default


def test_research_calls_get_social_posts_when_configured(tmp_path: Path) -> None:
    rows = [
        {
            "id": "1",
            "created_at": "2015-03-09T15:00:00Z",
            "text": "$XOM bullish",
            "lang": "en",
            "user_followers": 99,
            "retweet": False,
        },
        {
            "id": "2",
            "created_at": "2015-03-09T16:00:00Z",
            "text": "RT @a: $XOM bullish",
            "lang": "en",
            "user_followers": 0,
            "retweet": True,
        },
        {
            "id": "3",
            "created_at": "2015-03-10T21:00:00Z",
            "text": "$XOM bearish",
            "lang": "en",
            "user_followers": 5,
            "retweet": False,
        },  # after the 2015-03-10 close (20:00 UTC)
    ]
    (tmp_path / "XOM.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    as_of = date(2015, 3, 10)
    settings: dict[str, Any] = {
        "data_social_dir": tmp_path,
        "data_news_dir": None,
        "data_news_provider": "files",
    }
    state = FinancialAgentState(
        analysis_id="a-1", stock_symbol="XOM", as_of=as_of, stock_data=ResearchBundle(status="success")
    )
    ctx = ToolContext(
        settings=Settings(**settings),
        as_of=as_of,
        provider=EmbeddedProvider(),
        analysis_id="a-1",
        stage="research",
    )
    gather_context(state=state, ctx=ctx)
    assert "get_social_posts" in [h.tool for h in state.tool_history]
    assert state.stock_data and state.stock_data.views and state.stock_data.views.social
    social = state.stock_data.views.social
    # one post (ids 1 and 2 collapsed, reach 99 → w = 3), the bearish one is after the close
    assert (social["scored"], social["copies"], social["weight"], social["label"]) == (1, 2, 3.0, "BULLISH")
    assert social["score"] == 0.4588 and social["weight_in_composite"] == 0.0
    assert social["source_refs"][0] in state.source_refs


def test_unconfigured_research_makes_no_social_call() -> None:
    state = FinancialAgentState(
        analysis_id="a-1",
        stock_symbol="XOM",
        as_of=date(2015, 3, 10),
        stock_data=ResearchBundle(status="success"),
    )
    ctx = ToolContext(
        settings=Settings(data_news_dir=None), as_of=date(2015, 3, 10), provider=EmbeddedProvider()
    )
    gather_context(state=state, ctx=ctx)
    assert "get_social_posts" not in [h.tool for h in state.tool_history]
    assert state.stock_data and (state.stock_data.views is None or state.stock_data.views.social is None)


def test_real_tweets_give_a_reading(tmp_path: Path) -> None:
    if not (TWEETS / "AAPL.jsonl").is_file():
        pytest.skip(f"shared tweet data not found at {TWEETS} (only present in the workplace)")
    from agents.tools.catalog import run_tool

    ctx = ToolContext(
        settings=Settings(data_social_dir=TWEETS), as_of=date(2014, 1, 3), provider=EmbeddedProvider()
    )
    env = run_tool(
        name="get_social_posts", arguments={"symbol": "AAPL", "hours_back": 24, "limit": 200}, ctx=ctx
    )
    assert env.ok and env.data
    view = social_summary(env.data, ref=env.tool_call_id)
    english = [p for p in env.data["posts"] if p["lang"] == "en"]
    assert view["scored"] == len(english) > 0
    assert view["positive"] + view["negative"] + view["neutral"] == len(english)
    assert -1.0 <= view["score"] <= 1.0
