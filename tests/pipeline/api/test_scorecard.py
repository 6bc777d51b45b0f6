"""``GET /scorecard`` over real HTTP: auth, 404 for an unknown backtest, the stored scores beside
the baselines (computed from the embedded AAPL bars)."""

from __future__ import annotations

from datetime import UTC, date, datetime

import httpx

from db import backtest_repo, repo
from db.engine import get_engine
from pipeline.api.auth import create_key
from pipeline.core.settings import Settings


def test_scorecard_endpoint(gateway: tuple[str, str, Settings]) -> None:
    base, reader, settings = gateway
    assert httpx.get(f"{base}/scorecard").status_code == 401
    # scores aggregate every tenant's recommendations: the admin scope only
    refused = httpx.get(f"{base}/scorecard", headers={"X-API-Key": reader})
    assert refused.status_code == 403 and "admin" in refused.json()["detail"]
    key = create_key(name="operator", settings=settings, scopes=("read", "admin"))
    empty = httpx.get(f"{base}/scorecard", headers={"X-API-Key": key})
    assert empty.status_code == 200 and empty.json()["recommendations"] == 0
    missing = httpx.get(f"{base}/scorecard", params={"backtest": "nope"}, headers={"X-API-Key": key})
    assert missing.status_code == 404 and "nope" in missing.json()["detail"]

    engine = get_engine(settings.effective_database_url)
    repo.create_analysis(
        engine=engine,
        analysis_id="a1",
        symbol="AAPL",
        as_of="2012-06-29",
        user_query="q",
        max_iterations=1,
        state={},
    )
    backtest_repo.insert_scores(
        engine=engine,
        rows=[
            {
                "analysis_id": "a1",
                "horizon": 5,
                "symbol": "AAPL",
                "as_of": date(2012, 6, 29),
                "end_date": date(2012, 7, 9),
                "signal": "BUY",
                "confidence": 0.6,
                "score": 0.4,
                "forward_return": 0.03,
                "benchmark_return": 0.01,
                "excess_return": 0.02,
                "benchmark": "equal-weighted universe (1 symbols)",
                "analyst": "deterministic scorer",
                "model": "rules (no model)",
                "prompt_version": None,
                "scored_at": datetime(2026, 11, 23, tzinfo=UTC),
            }
        ],
    )
    card = httpx.get(f"{base}/scorecard", headers={"X-API-Key": key}, timeout=60).json()
    pipeline = card["strategies"]["pipeline"]["5"]
    assert pipeline["n"] == 1 and pipeline["hit_rate"] == 1.0
    # p = 0.5 + 0.6 / 2 = 0.8 against an outperformance: (0.8 − 1)² = 0.04
    assert abs(pipeline["brier"] - 0.04) < 1e-9
    assert card["strategies"]["buy_and_hold"]["5"]["signals"]["BUY"]["mean_excess"] == 0.02
    assert set(card["strategies"]) == {
        "pipeline",
        "buy_and_hold",
        "sma_50_200",
        "macd_12_26_9",
        "rsi_14_30_70",
    }
    text = httpx.get(
        f"{base}/scorecard", params={"format": "markdown"}, headers={"X-API-Key": key}, timeout=60
    )
    assert text.headers["content-type"].startswith("text/markdown") and "| pipeline | 1 |" in text.text
