"""The watchlist digest's scorecard section, read from stored score rows (SQLite, embedded)."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest
import sqlalchemy as sa

from apps.scorecard import benchmark_spec, digest_section
from apps.watchlists import build_digest, digest_html, digest_markdown
from core.settings import get_settings
from db import backtest_repo, ledger
from db.engine import get_engine
from pipeline import service


def _score(
    analysis_id: str, symbol: str, horizon: int, signal: str, excess: float, *, entry: str = "open"
) -> dict:
    return {
        "entry": entry,
        "benchmark_spec": benchmark_spec(get_settings()),
        "analysis_id": analysis_id,
        "horizon": horizon,
        "symbol": symbol,
        "as_of": date(2016, 3, 4),
        "end_date": date(2016, 3, 11),
        "signal": signal,
        "confidence": 0.5,
        "score": 0.3,
        "forward_return": excess + 0.01,
        "benchmark_return": 0.01,
        "excess_return": excess,
        "benchmark": "SPY",
        "analyst": "deterministic scorer",
        "model": "rules (no model)",
        "prompt_version": None,
        "scored_at": datetime(2026, 11, 23, tzinfo=UTC),
    }


@pytest.mark.usefixtures("clean_settings")
def test_digest_section_reads_scores_of_the_watchlist_tickers_only() -> None:
    settings = get_settings()
    service.prepare_database(settings=settings)
    engine = get_engine(settings.service.effective_database_url)
    for aid, symbol in (("a1", "AAPL"), ("a2", "AAPL"), ("m1", "MSFT"), ("old", "AAPL")):
        ledger.create(
            engine=engine,
            analysis_id=aid,
            symbol=symbol,
            as_of="2016-03-04",
            user_query="q",
            max_iterations=1,
            state={},
        )
    rows = [
        _score("a1", "AAPL", 5, "BUY", 0.02),
        _score("a2", "AAPL", 5, "SELL", 0.01),
        _score("m1", "MSFT", 5, "BUY", -0.05),
        _score("old", "AAPL", 5, "BUY", -0.07, entry="close"),  # another entry rule: stale, left out
    ]
    assert backtest_repo.insert_scores(engine=engine, rows=rows) == 4
    assert backtest_repo.insert_scores(engine=engine, rows=rows) == 0  # keyed by (analysis, horizon)
    section = digest_section(symbols=["AAPL", "IBM"], settings=settings)
    assert section is not None and section["benchmark"] == ["SPY"]
    five = section["horizons"]["5"]
    # BUY +2 % is a hit, SELL +1 % is not; signed excess (0.02 − 0.01) / 2
    assert five["n"] == 2 and five["hit_rate"] == 0.5 and five["mean_signed_excess"] == pytest.approx(0.005)
    assert digest_section(symbols=["IBM"], settings=settings) is None
    # a watchlist's digest reads its tenant's recommendations only
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE analyses SET tenant = 'acme' WHERE id = 'a2'"))
    acme = digest_section(symbols=["AAPL"], settings=settings, tenant="acme")
    assert acme is not None and acme["horizons"]["5"]["n"] == 1 and acme["horizons"]["5"]["hit_rate"] == 0.0
    default = digest_section(symbols=["AAPL"], settings=settings, tenant="default")
    assert default is not None and default["horizons"]["5"]["n"] == 1
    assert digest_section(symbols=["AAPL"], settings=settings, tenant="globex") is None

    digest = build_digest(
        name="tech", run_date=date(2016, 3, 4), items=[], previous_date=None, previous_items=[], timeout_s=60
    )
    assert "Scorecard" not in digest_markdown(digest) and "Scorecard" not in digest_html(digest)
    digest["scorecard"] = section
    text = digest_markdown(digest)
    assert (
        "## Scorecard" in text
        # Wilson 95 % of 1/2 by hand: (0.5 + z²/4 ± z·sqrt(1/8 + z²/16)) / (1 + z²/2) = 9.5 %, 90.5 %
        and "- 5d: 2 scored, directional hit 50.0 % [9.5 %, 90.5 %], mean signed excess +0.50 % vs SPY "
        "(open entry)"
        in text
    )
    assert "<h2>Scorecard" in digest_html(digest)
