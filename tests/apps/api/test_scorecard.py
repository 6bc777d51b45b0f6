"""``GET /scorecard`` over real HTTP: auth, 404 for an unknown backtest, the stored scores beside
the baselines (computed from the embedded AAPL bars), and each tenant sees only its own
recommendations and backtests; the cross-tenant view needs the ``operator`` scope."""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any

import httpx
import sqlalchemy as sa

from apps.api.auth import create_key
from apps.scorecard import benchmark_spec
from core.settings import Settings
from db import backtest_repo, ledger
from db.engine import get_engine


def test_scorecard_endpoint(gateway: tuple[str, str, Settings]) -> None:
    base, key, settings = gateway  # a key of the default tenant with the default scopes
    assert httpx.get(f"{base}/scorecard").status_code == 401
    empty = httpx.get(f"{base}/scorecard", headers={"X-API-Key": key})
    assert empty.status_code == 200 and empty.json()["recommendations"] == 0
    missing = httpx.get(f"{base}/scorecard", params={"backtest": "nope"}, headers={"X-API-Key": key})
    assert missing.status_code == 404 and "nope" in missing.json()["detail"]

    engine = get_engine(settings.service.effective_database_url)
    ledger.create(
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
                # the basis the endpoint scores on: a row of another basis is stale, left out
                "entry": "open",
                "benchmark_spec": benchmark_spec(settings),
            }
        ],
    )
    card = httpx.get(f"{base}/scorecard", headers={"X-API-Key": key}, timeout=60).json()
    pipeline = card["strategies"]["pipeline"]["5"]
    assert pipeline["n"] == 1 and pipeline["hit_rate"] == 1.0
    assert (pipeline["directional"]["successes"], pipeline["directional"]["n"]) == (1, 1)
    assert card["entry"] == "open" and card["stale"] == 0
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


def _scored(settings: Settings, *, analysis_id: str, tenant: str, signal: str, model: str) -> None:
    """A finished analysis of ``tenant`` with one stored 5-day score by ``model``."""
    engine = get_engine(settings.service.effective_database_url)
    ledger.create(
        engine=engine,
        analysis_id=analysis_id,
        symbol="AAPL",
        as_of="2012-06-29",
        user_query="q",
        max_iterations=1,
        state={},
    )
    with engine.begin() as conn:
        conn.execute(
            sa.text("UPDATE analyses SET tenant = :t WHERE id = :id"), {"t": tenant, "id": analysis_id}
        )
    backtest_repo.insert_scores(
        engine=engine,
        rows=[
            {
                "analysis_id": analysis_id,
                "horizon": 5,
                "symbol": "AAPL",
                "as_of": date(2012, 6, 29),
                "end_date": date(2012, 7, 9),
                "signal": signal,
                "confidence": 0.6,
                "score": 0.4,
                "forward_return": 0.03,
                "benchmark_return": 0.01,
                "excess_return": 0.02,
                "benchmark": "equal-weighted universe (1 symbols)",
                "analyst": "LLM synthesis",
                "model": model,
                "prompt_version": f"prompt-of-{tenant}",
                "scored_at": datetime(2026, 11, 23, tzinfo=UTC),
                # the basis the endpoint scores on: a row of another basis is stale, left out
                "entry": "open",
                "benchmark_spec": benchmark_spec(settings),
            }
        ],
    )


def test_each_tenant_sees_its_own_scorecard_and_the_operator_all(gateway: tuple[str, str, Settings]) -> None:
    base, _, settings = gateway
    _scored(settings, analysis_id="ops-1", tenant="default", signal="BUY", model="operator-model")
    _scored(settings, analysis_id="acme-1", tenant="acme", signal="SELL", model="acme-model")
    engine = get_engine(settings.service.effective_database_url)
    backtest_repo.create_backtest(
        engine=engine,
        name="ops-grid",
        symbols=["AAPL"],
        start_date=date(2012, 6, 29),
        end_date=date(2012, 6, 29),
        every="5d",
        analysis_type="full",
    )
    backtest_repo.add_item(
        engine=engine,
        backtest_name="ops-grid",
        symbol="AAPL",
        as_of=date(2012, 6, 29),
        requested_date=date(2012, 6, 29),
        status="enqueued",
        analysis_id="ops-1",
    )
    acme = create_key(name="acme-admin", tenant="acme", scopes=("read", "admin"), settings=settings)
    operator = create_key(name="ops", scopes=("read", "operator"), settings=settings)

    def get(key: str, **params: Any) -> httpx.Response:
        return httpx.get(f"{base}/scorecard", params=params, headers={"X-API-Key": key}, timeout=60)

    mine = get(acme)
    assert mine.status_code == 200, mine.text
    card = mine.json()
    assert card["recommendations"] == 1 and card["selection"]["tenant"] == "acme"
    signals = card["strategies"]["pipeline"]["5"]["signals"]
    assert {name: m["n"] for name, m in signals.items()} == {"BUY": 0, "HOLD": 0, "SELL": 1}
    assert set(card["breakdown"]["model"]) == {"acme-model"}
    assert "operator-model" not in mine.text and "prompt-of-default" not in mine.text
    # the operator's backtest is not acme's: answered exactly as an unknown one
    theirs, unknown = get(acme, backtest="ops-grid"), get(acme, backtest="no-such-grid")
    assert theirs.status_code == unknown.status_code == 404
    assert theirs.json()["detail"] == "no backtest named 'ops-grid'"
    # the cross-tenant view needs the operator scope, even for an admin key
    refused = get(acme, all_tenants="true")
    assert refused.status_code == 403 and "'operator' scope" in refused.json()["detail"]
    every = get(operator, all_tenants="true").json()
    assert every["recommendations"] == 2 and every["selection"]["tenant"] is None
    assert set(every["breakdown"]["model"]) == {"acme-model", "operator-model"}
    # without the flag, the operator's key sees its own tenant only (and its backtest)
    own = get(operator, backtest="ops-grid").json()
    assert own["recommendations"] == 1 and set(own["breakdown"]["model"]) == {"operator-model"}
