"""The social-sentiment view of stored reports, as the scorecard reads it (SQLite and PostgreSQL),
and the social analyst's rows in the scorecard's breakdown by analyst."""

from __future__ import annotations

import uuid
from datetime import date

import numpy as np
import pandas as pd
import pytest
from sqlalchemy import Engine

from apps.scorecard import SOCIAL_ANALYST, metrics, social_rows
from db import backtest_repo, ledger
from tests.support.rows import finish_row


def _analysis(engine: Engine, report_json: dict[str, object]) -> str:
    analysis_id = str(uuid.uuid4())
    assert ledger.create(
        engine=engine,
        analysis_id=analysis_id,
        symbol="AAPL",
        as_of=date(2014, 1, 3),
        user_query="Analyse AAPL",
        max_iterations=1,
        state={"analysis_id": analysis_id, "stock_symbol": "AAPL"},
    )
    finish_row(
        engine,
        analysis_id,
        state={},
        report="# Report",
        report_json=report_json,
        signal="HOLD",
        confidence=0.5,
    )
    return analysis_id


def test_social_views_reads_label_and_score(engine: Engine) -> None:
    with_view = _analysis(
        engine, {"signal": "HOLD", "views": {"social": {"label": "BEARISH", "score": -0.4588, "posts": 3}}}
    )
    no_data = _analysis(engine, {"signal": "HOLD", "views": {"social": {"label": "NO_DATA", "score": None}}})
    without = _analysis(engine, {"signal": "HOLD", "views": {"sentiment": {"label": "NEUTRAL"}}})
    got = backtest_repo.social_views(engine=engine, analysis_ids=[with_view, no_data, without])
    assert got == {with_view: ("BEARISH", -0.4588), no_data: ("NO_DATA", None)}


def test_social_rows_score_the_analyst_on_the_pipelines_grid() -> None:
    rows = pd.DataFrame(
        {
            "analysis_id": ["a", "b", "c", "d"],
            "as_of": [date(2014, 1, 3)] * 2 + [date(2014, 1, 10)] * 2,
            "horizon": [5, 5, 5, 5],
            "signal": ["HOLD", "HOLD", "BUY", "HOLD"],
            "confidence": [0.2, 0.2, 0.6, 0.2],
            "score": [0.0, 0.1, 0.5, 0.0],
            "excess_return": [0.02, -0.03, 0.01, 0.04],
            "p_outperform": [np.nan] * 4,
            "analyst": ["deterministic scorer"] * 4,
        }
    )
    social = {"a": ("BULLISH", 0.3), "b": ("BEARISH", -0.2), "c": ("NO_DATA", None)}
    mine = social_rows(rows, social)
    assert mine["analysis_id"].tolist() == ["a", "b"]  # c has no reading, d no view
    assert mine["signal"].tolist() == ["BUY", "SELL"] and mine["score"].tolist() == [0.3, -0.2]
    assert set(mine["analyst"]) == {SOCIAL_ANALYST}
    m = metrics(mine, horizon=5, step=5)
    # BUY on +2 % and SELL on -3 %: both calls right; signed excess (0.02 + 0.03) / 2
    assert m["n"] == 2 and m["hit_rate"] == 1.0
    assert m["mean_signed_excess"] == 0.025
    assert rows["signal"].tolist() == ["HOLD", "HOLD", "BUY", "HOLD"]  # the pipeline's rows untouched


def test_learned_views_read_label_and_score(engine: Engine) -> None:
    with_view = _analysis(engine, {"signal": "HOLD", "views": {"learned": {"label": "UP", "score": 0.0421}}})
    without = _analysis(engine, {"signal": "HOLD", "views": {"social": {"label": "BULLISH", "score": 0.2}}})
    got = backtest_repo.report_views(engine=engine, analysis_ids=[with_view, without], view="learned")
    assert got == {with_view: ("UP", 0.0421)}
    with pytest.raises(ValueError, match="view"):
        backtest_repo.report_views(engine=engine, analysis_ids=[with_view], view="state")
