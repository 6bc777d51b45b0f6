"""The market clock's "today" on the embedded data (ends 2013-03-01), through the CLI as a user
runs it: a watchlist run without --date, trade_execute without --as-of, and the report header."""

from __future__ import annotations

import json
from pathlib import Path

from tests.integration.conftest import Service, _base_env


def test_trade_execute_and_portfolio_default_to_the_datas_last_day(tmp_path: Path) -> None:
    cli = Service(env=_base_env(tmp_path), tmp=tmp_path)  # embedded: SQLite in tmp_path/state
    order = {"trades": [{"symbol": "AAPL", "action": "buy", "quantity": 1, "order_type": "market"}]}
    proc = cli.cli("tool", "trade_execute", json.dumps(order))
    assert proc.returncode == 0, proc.stdout + proc.stderr[-2000:]
    assert "as of 2013-03-01: data ends 2013-03-01 (embedded)" in proc.stderr
    (trade,) = json.loads(proc.stdout)["data"]["execution"]["trades"]
    # filled at the 2013-03-01 close of bokeh_sampledata's AAPL row (430.47), 1 USD minimum fee
    assert (trade["status"], trade["price"], trade["fees"]) == ("filled", 430.47, 1.0)
    portfolio = cli.cli("tool", "get_portfolio", "{}")
    assert portfolio.returncode == 0 and "as of 2013-03-01" in portfolio.stderr


def test_watchlist_run_without_a_date_analyses_the_datas_last_day(tmp_path: Path) -> None:
    cli = Service(env=_base_env(tmp_path), tmp=tmp_path)
    assert cli.cli("watchlist", "add", "mega", "AAPL", "MSFT").returncode == 0
    proc = cli.cli("watchlist", "run", "mega", "--format", "json", timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    digest = json.loads(proc.stdout)
    assert digest["run_date"] == "2013-03-01"
    assert digest["counts"]["ok"] == 2 and digest["counts"]["failed"] == 0
    assert [t["as_of"] for t in digest["tickers"]] == ["2013-03-01", "2013-03-01"]
    assert digest["market_clock"]["note"] == "data ends 2013-03-01 (embedded)"
    markdown = cli.cli("watchlist", "run", "mega", "--date", "2013-03-01").stdout
    assert "Market clock: data ends 2013-03-01 (embedded)." in markdown


def test_report_header_says_when_the_data_ends(tmp_path: Path) -> None:
    cli = Service(env=_base_env(tmp_path), tmp=tmp_path)
    out = cli.analyze_json("IBM", "--as-of", "2012-06-29")
    assert out["market_clock"]["day"] == "2013-03-01"
    report = cli.cli("show", out["analysis_id"]).stdout
    assert report.splitlines()[2] == "Data ends 2013-03-01 (embedded); analysed as of 2012-06-29."


def test_a_live_only_tool_defaults_to_today_and_the_others_to_the_data() -> None:
    from datetime import UTC, date, datetime

    from apps.direct_tools import default_clock
    from core.settings import Settings

    settings = Settings(data_provider="embedded")
    live = default_clock(arguments={"ticker": "AAPL"}, settings=settings, name="get_stock_price")
    assert (live.basis, live.day) == ("live", datetime.now(UTC).date())  # Alpaca snapshots are live
    data = default_clock(arguments={"symbols": ["MSFT"]}, settings=settings, name="get_quotes")
    assert (data.basis, data.day) == ("data_end", date(2013, 3, 1))
