"""The learned analyst inside the pipeline: the research stage's learned view on the real stocknet
files has the very features the ACL18 benchmark computes for the next session (point in time),
the report shows it with its model version, weight 0 leaves the recommendation alone, and the
scorecard reads its calls."""

from __future__ import annotations

from datetime import date

import numpy as np
import pandas as pd
import pytest

from agents.analysts import learned
from agents.data.market.csv_folder import CsvFolderProvider
from agents.tools.registry import ToolContext
from apps import acl18
from apps.scorecard import LEARNED_ANALYST, learned_rows
from core.parts import Recommendation
from core.settings import Settings
from core.state import FinancialAgentState
from pipeline.report import report_markdown
from pipeline.stages.recommendation import _with_learned
from pipeline.stages.research import research
from tests.conftest import SHARED_DATA

pytestmark = pytest.mark.usefixtures("clean_settings")

PRICES = SHARED_DATA / "ohlcv" / "stocknet"
TWEETS = SHARED_DATA / "news" / "stocknet_tweets"


@pytest.mark.shared_data
def test_research_view_matches_the_benchmark_features(tmp_path) -> None:  # type: ignore[no-untyped-def]
    if not (PRICES / "XOM.csv").is_file() or not (TWEETS / "XOM.jsonl").is_file():
        pytest.skip(f"stocknet data not found under {SHARED_DATA} (only present in the workplace)")
    as_of = date(2015, 9, 15)  # a Tuesday: the 5 sessions before 09-16 span exactly the tool's week
    ctx = ToolContext(
        settings=Settings(data_social_dir=TWEETS, data_news_dir=None, data_news_provider="files"),
        as_of=as_of,
        provider=CsvFolderProvider(data_dir=PRICES),
        analysis_id="a-1",
        stage="research",
    )
    state = research(state=FinancialAgentState(analysis_id="a-1", stock_symbol="XOM", as_of=as_of), ctx=ctx)
    assert state.stock_data is not None and state.stock_data.views is not None
    view = state.stock_data.views.learned
    assert view is not None and view["version"] == learned.load().version
    social = state.stock_data.views.social
    assert social is not None
    assert view["source_refs"] == [state.stock_data.history_ref, social["source_refs"][0]]
    assert view["weight_in_composite"] == 0.0
    # the benchmark's sample for the next session, 2015-09-16, from the files directly
    prices, tweets = tmp_path / "p", tmp_path / "t"
    prices.mkdir()
    tweets.mkdir()
    (prices / "XOM.csv").write_bytes((PRICES / "XOM.csv").read_bytes())
    (tweets / "XOM.jsonl").write_bytes((TWEETS / "XOM.jsonl").read_bytes())
    rows, _ = acl18.samples(prices_dir=prices, tweets_dir=tweets, split="dev")
    sample = next(s for s in rows if s.day == date(2015, 9, 16))
    assert sample.features is not None
    for name, value in view["features"].items():
        assert value == pytest.approx(sample.features[name], abs=1e-6), name
    # ret_1 by hand: ln(adj 09-15 / adj 09-14) from XOM.csv (67.829727 / 67.485283)
    assert view["features"]["ret_1"] == pytest.approx(np.log(67.829727 / 67.485283), abs=1e-6)
    md = report_markdown(state)
    assert f"model `{view['version']}`" in md and "## Learned analyst" in md


def test_weight_blends_the_learned_score_only_when_set() -> None:
    rec = Recommendation(signal="HOLD", confidence=0.3, score=0.2, components=[], rationale=[], risk_flags=[])
    view = {"score": 0.6, "label": "UP", "version": "lr-abc", "source_refs": ["get_history_x"]}
    _with_learned(rec, view=view, weight=0.5)
    assert rec.score == 0.4 and rec.signal == "BUY"  # 0.5 × 0.2 + 0.5 × 0.6; BUY at ≥ 0.25
    assert rec.components[-1]["version"] == "lr-abc" and rec.confidence == 0.3
    assert Settings().analysis.learned_weight == 0.0  # reported only, by default


def test_learned_rows_read_up_and_down_as_buy_and_sell() -> None:
    rows = pd.DataFrame(
        {
            "analysis_id": ["a", "b", "c"],
            "as_of": [date(2015, 9, 15)] * 3,
            "horizon": [5, 5, 5],
            "signal": ["HOLD"] * 3,
            "score": [0.0] * 3,
            "excess_return": [0.01, -0.02, 0.03],
            "analyst": ["deterministic scorer"] * 3,
        }
    )
    mine = learned_rows(rows, {"a": ("UP", 0.04), "b": ("DOWN", -0.02)})
    assert mine["signal"].tolist() == ["BUY", "SELL"] and mine["score"].tolist() == [0.04, -0.02]
    assert set(mine["analyst"]) == {LEARNED_ANALYST} and rows["signal"].tolist() == ["HOLD"] * 3
