"""get_portfolio, trade_simulate and trade_execute on the real embedded data, on both backends.

Expected prices, volumes and risk metrics are recomputed here from the source file's own rows
(``raw_rows``) with plain numpy, never by calling the code under test or empyrical.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from datetime import date, timedelta
from typing import Any

import numpy as np
import pandas as pd
import pytest

from agents.broker.paper import Book
from agents.data.market.embedded import EmbeddedProvider
from agents.quant.risk import forecast_risk
from agents.tools.catalog import run_tool
from agents.tools.registry import ToolContext
from db.engine import get_engine
from db.trading_repo import list_orders, read_book
from tests.agents.tools.conftest import raw_rows

AS_OF = date(2013, 3, 1)  # a Friday session, the last day of the embedded data
LOOSE = {"broker_max_position_weight": 1.0, "broker_max_order_notional": 1e9}

MakeCtx = Callable[..., ToolContext]


def _close(symbol: str, day: str) -> float:
    return float(raw_rows(symbol)["Close"].loc[day])


def _book(ctx: ToolContext, user: str) -> Book:
    book = read_book(engine=get_engine(ctx.settings.service.effective_database_url), user_id=user)
    assert book is not None
    return book


def _run(ctx: ToolContext, name: str, **arguments: Any) -> Any:
    return run_tool(name=name, arguments=arguments, ctx=ctx)


def test_portfolio_of_a_new_account_is_the_starting_cash(make_ctx: MakeCtx, user: str) -> None:
    env = _run(make_ctx(AS_OF), "get_portfolio", user_id=user)
    assert env.ok, env.error
    assert env.data["portfolio"] == {
        "positions": [],
        "cash": 100_000.0,
        "total_value": 100_000.0,
        "currency": "USD",
    }
    assert env.data["account_exists"] is False


def test_market_buy_fills_at_the_close_and_the_portfolio_values_it_later(
    make_ctx: MakeCtx, user: str
) -> None:
    # given a market buy of 100 IBM on 2013-02-01
    env = _run(
        make_ctx(date(2013, 2, 1)),
        "trade_execute",
        user_id=user,
        trades=[{"symbol": "IBM", "action": "buy", "quantity": 100}],
    )
    assert env.ok, env.error
    trade = env.data["execution"]["trades"][0]
    close = _close("IBM", "2013-02-01")
    # then it fills at that close with the 1 USD minimum fee (100 x 0.005 = 0.50)
    assert (trade["status"], trade["quantity"], trade["price"], trade["fees"]) == ("filled", 100, close, 1.0)
    assert trade["total_cost"] == pytest.approx(100 * close + 1.0)
    assert env.data["order_time"] == "2013-02-01T20:59:00+00:00"  # 15:59 New York, EST
    # when the portfolio is read on 2013-03-01
    port = _run(make_ctx(AS_OF), "get_portfolio", user_id=user).data["portfolio"]
    value = 100 * _close("IBM", "2013-03-01")
    cash = 100_000 - 100 * close - 1.0
    # then the position is valued at the 2013-03-01 close and weights are fractions of the total
    assert port["cash"] == pytest.approx(cash)
    assert port["positions"] == [
        {
            "symbol": "IBM",
            "quantity": 100,
            "avg_price": close,
            "current_price": _close("IBM", "2013-03-01"),
            "market_value": pytest.approx(value),
            "weight": pytest.approx(value / (value + cash), abs=1e-6),
            "price_date": "2013-03-01",
        }
    ]
    assert port["total_value"] == pytest.approx(value + cash)


def test_limit_orders_fill_only_when_marketable_at_the_close(make_ctx: MakeCtx, user: str) -> None:
    close = _close("MSFT", "2013-03-01")  # 27.95
    trades = [
        {"symbol": "MSFT", "action": "buy", "quantity": 100, "order_type": "limit", "price": close + 0.5},
        {"symbol": "MSFT", "action": "buy", "quantity": 100, "order_type": "limit", "price": close - 0.01},
    ]
    env = _run(make_ctx(AS_OF), "trade_execute", user_id=user, trades=trades)
    assert env.ok, env.error
    filled, rejected = env.data["execution"]["trades"]
    assert (filled["status"], filled["price"]) == ("filled", close)  # at the close, better than the limit
    assert rejected["status"] == "rejected" and rejected["reason"].startswith("LIMIT_NOT_MARKETABLE")
    assert rejected["fees"] == 0 and rejected["total_cost"] == 0


def test_a_rejected_limit_order_alone_is_an_error_envelope(make_ctx: MakeCtx, user: str) -> None:
    close = _close("MSFT", "2013-03-01")  # 27.95
    ctx = make_ctx(AS_OF)
    # given a buy limit one cent under the close (not marketable at the close)
    limit = {"symbol": "MSFT", "action": "buy", "quantity": 100, "order_type": "limit", "price": close - 0.01}
    env = _run(ctx, "trade_execute", user_id=user, trades=[limit])
    # then the call failed, saying why, and nothing was bought (the order stays recorded)
    assert not env.ok and env.error.code == "ORDER_REJECTED"
    assert "LIMIT_NOT_MARKETABLE" in env.error.message and "(order " in env.error.message
    assert env.to_public().keys() == {"tool_call_id", "error", "retry_hint"}
    orders = list_orders(engine=get_engine(ctx.settings.service.effective_database_url), user_id=user)
    assert [(o["status"], o["filled_quantity"]) for o in orders] == [("rejected", 0)]
    # and a simulation of the same order (a price makes it a limit order) says the same
    sim_limit = {"symbol": "MSFT", "action": "buy", "quantity": 100, "price": close - 0.01}
    sim = _run(ctx, "trade_simulate", user_id=user, trades=[sim_limit])
    assert not sim.ok and sim.error.code == "ORDER_REJECTED"


def test_stop_orders_trigger_on_the_close(make_ctx: MakeCtx, user: str) -> None:
    close = _close("AAPL", "2013-03-01")
    ctx = make_ctx(AS_OF, **LOOSE)
    _run(ctx, "trade_execute", user_id=user, trades=[{"symbol": "AAPL", "action": "buy", "quantity": 20}])
    stops = [
        {"symbol": "AAPL", "action": "sell", "quantity": 5, "order_type": "stop", "stop_price": close + 1},
        {"symbol": "AAPL", "action": "sell", "quantity": 5, "order_type": "stop", "stop_price": close - 1},
    ]
    trades = _run(ctx, "trade_execute", user_id=user, trades=stops).data["execution"]["trades"]
    assert [t["status"] for t in trades] == ["filled", "rejected"]
    assert trades[1]["reason"].startswith("STOP_NOT_TRIGGERED")
    assert _book(ctx, user).positions["AAPL"].quantity == 15


def test_volume_cap_gives_a_partial_fill(make_ctx: MakeCtx, user: str) -> None:
    volume = float(raw_rows("IBM")["Volume"].loc["2013-03-01"])
    fraction = 50 / volume * 1.0001  # room for 50 shares of the day's volume
    ctx = make_ctx(AS_OF, broker_max_volume_fraction=fraction)
    env = _run(
        ctx, "trade_execute", user_id=user, trades=[{"symbol": "IBM", "action": "buy", "quantity": 80}]
    )
    trade = env.data["execution"]["trades"][0]
    assert (trade["status"], trade["quantity"], trade["requested_quantity"]) == (
        "partial",
        math.floor(fraction * volume),
        80,
    )
    assert trade["reason"].startswith("NO_LIQUIDITY")
    orders = list_orders(engine=get_engine(ctx.settings.service.effective_database_url), user_id=user)
    assert orders[0]["filled_quantity"] == 50 and orders[0]["fills"][0]["quantity"] == 50


def test_insufficient_funds_is_the_envelope_error_and_the_order_is_kept(make_ctx: MakeCtx, user: str) -> None:
    ctx = make_ctx(AS_OF, **LOOSE)
    env = _run(
        ctx, "trade_execute", user_id=user, trades=[{"symbol": "AAPL", "action": "buy", "quantity": 300}]
    )
    assert env.error is not None and env.error.code.value == "INSUFFICIENT_FUNDS"
    assert env.retry_hint
    engine = get_engine(ctx.settings.service.effective_database_url)
    (order,) = list_orders(engine=engine, user_id=user)
    assert (
        order["status"] == "rejected"
        and order["reason"].startswith("INSUFFICIENT_FUNDS")
        and order["fills"] == []
    )
    assert _book(ctx, user).cash == 100_000.0


@pytest.mark.parametrize(
    ("settings", "trade", "fragment"),
    [
        (
            {"broker_max_order_notional": 10_000.0},
            {"symbol": "IBM", "action": "buy", "quantity": 100},
            "max_order_notional",
        ),
        ({}, {"symbol": "IBM", "action": "buy", "quantity": 200}, "max_position_weight"),  # 40.6 % > 25 %
        ({}, {"symbol": "AAPL", "action": "sell", "quantity": 1}, "no short positions"),
    ],
)
def test_risk_limit_exceeded(
    make_ctx: MakeCtx, user: str, settings: dict[str, Any], trade: dict[str, Any], fragment: str
) -> None:
    env = _run(make_ctx(AS_OF, **settings), "trade_execute", user_id=user, trades=[trade])
    assert env.error is not None and env.error.code.value == "RISK_LIMIT_EXCEEDED"
    assert fragment in env.error.message


@pytest.mark.parametrize(
    ("day", "reopens"),
    [
        (date(2012, 10, 29), "2012-10-31"),  # Hurricane Sandy: NYSE closed two days
        (date(2013, 2, 23), "2013-02-25"),  # a Saturday
        (date(2012, 12, 25), "2012-12-26"),  # Christmas
    ],
)
def test_market_closed_on_non_sessions(make_ctx: MakeCtx, user: str, day: date, reopens: str) -> None:
    ctx = make_ctx(day)
    env = _run(ctx, "trade_execute", user_id=user, trades=[{"symbol": "IBM", "action": "buy", "quantity": 1}])
    assert env.error is not None and env.error.code.value == "MARKET_CLOSED"
    assert env.retry_hint and reopens in env.retry_hint
    assert read_book(engine=get_engine(ctx.settings.service.effective_database_url), user_id=user) is None


def test_client_order_id_makes_execute_idempotent(make_ctx: MakeCtx, user: str) -> None:
    ctx = make_ctx(AS_OF)
    trade = {"symbol": "MSFT", "action": "buy", "quantity": 100, "client_order_id": "rebalance-1"}
    first = _run(ctx, "trade_execute", user_id=user, trades=[trade])
    again = _run(ctx, "trade_execute", user_id=user, trades=[trade])
    a, b = first.data["execution"]["trades"][0], again.data["execution"]["trades"][0]
    assert a["order_id"] == b["order_id"] and (a["replayed"], b["replayed"]) == (False, True)
    assert {k: a[k] for k in ("status", "quantity", "price", "fees")} == {
        k: b[k] for k in ("status", "quantity", "price", "fees")
    }
    engine = get_engine(ctx.settings.service.effective_database_url)
    (order,) = list_orders(engine=engine, user_id=user)
    assert len(order["fills"]) == 1
    assert _book(ctx, user).cash == pytest.approx(100_000 - 100 * _close("MSFT", "2013-03-01") - 1)
    # the same key for another order is refused, not silently replayed
    other = _run(ctx, "trade_execute", user_id=user, trades=[{**trade, "quantity": 5}])
    assert (
        other.error is not None
        and other.error.code.value == "INVALID_INPUT"
        and "rebalance-1" in other.error.message
    )


def test_concurrent_repeats_fill_once(make_ctx: MakeCtx, user: str) -> None:
    trade = {"symbol": "IBM", "action": "buy", "quantity": 10, "client_order_id": "race"}
    barrier = threading.Barrier(4)
    envelopes: list[Any] = []

    def go() -> None:
        ctx = make_ctx(AS_OF)
        barrier.wait(timeout=10)
        envelopes.append(_run(ctx, "trade_execute", user_id=user, trades=[trade]))

    threads = [threading.Thread(target=go) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert len(envelopes) == 4 and all(e.ok for e in envelopes), [e.error for e in envelopes]
    assert len({e.data["execution"]["trades"][0]["order_id"] for e in envelopes}) == 1
    assert sorted(e.data["execution"]["trades"][0]["replayed"] for e in envelopes) == [
        False,
        True,
        True,
        True,
    ]
    engine = get_engine(make_ctx(AS_OF).settings.service.effective_database_url)
    (order,) = list_orders(engine=engine, user_id=user)
    assert len(order["fills"]) == 1 and _book(make_ctx(AS_OF), user).positions["IBM"].quantity == 10


def test_orders_cannot_go_back_in_time(make_ctx: MakeCtx, user: str) -> None:
    _run(
        make_ctx(AS_OF),
        "trade_execute",
        user_id=user,
        trades=[{"symbol": "IBM", "action": "buy", "quantity": 1}],
    )
    env = _run(
        make_ctx(date(2013, 2, 1)),
        "trade_execute",
        user_id=user,
        trades=[{"symbol": "IBM", "action": "buy", "quantity": 1}],
    )
    assert (
        env.error is not None
        and env.error.code.value == "INVALID_INPUT"
        and "back in time" in env.error.message
    )


def test_simulate_writes_nothing_and_reports_fills(make_ctx: MakeCtx, user: str) -> None:
    ctx = make_ctx(AS_OF)
    env = _run(
        ctx,
        "trade_simulate",
        user_id=user,
        trades=[
            {"symbol": "IBM", "action": "buy", "quantity": 50},
            {"symbol": "MSFT", "action": "buy", "quantity": 100, "price": 27.0},
        ],
    )
    assert env.ok, env.error
    sim = env.data["simulation"]
    ibm, msft = sim["trades"]
    assert (ibm["status"], ibm["price"], ibm["fees"]) == ("filled", _close("IBM", "2013-03-01"), 1.0)
    assert msft["status"] == "rejected" and msft["reason"].startswith("LIMIT_NOT_MARKETABLE")
    assert sim["portfolio_after"]["cash"] == pytest.approx(100_000 - 50 * _close("IBM", "2013-03-01") - 1.0)
    assert set(sim["risk_metrics"]) >= {"var_95_1d", "max_drawdown", "sharpe_ratio"}
    assert read_book(engine=get_engine(ctx.settings.service.effective_database_url), user_id=user) is None


def test_simulate_risk_metrics_checked_by_hand_on_a_short_real_series(make_ctx: MakeCtx, user: str) -> None:
    # given a 10,000 USD account buying 10 AAPL and 100 MSFT on 2013-03-01, metrics over 10 returns
    rf = 0.05
    ctx = make_ctx(
        AS_OF, broker_starting_cash=10_000.0, broker_risk_window_bars=10, broker_risk_free_rate=rf, **LOOSE
    )
    trades = [
        {"symbol": "AAPL", "action": "buy", "quantity": 10},
        {"symbol": "MSFT", "action": "buy", "quantity": 100},
    ]
    metrics = _run(ctx, "trade_simulate", user_id=user, trades=trades).data["simulation"]["risk_metrics"]
    # then: V_t = cash + sum q * adj_close_t * (close_T / adj_close_T), from the source's rows
    cash = 10_000 - 10 * _close("AAPL", "2013-03-01") - 1.0 - 100 * _close("MSFT", "2013-03-01") - 1.0
    values = np.full(11, cash)
    for symbol, qty in (("AAPL", 10), ("MSFT", 100)):
        rows = raw_rows(symbol).loc[:"2013-03-01"].tail(11)
        scale = rows["Close"].iloc[-1] / rows["Adj Close"].iloc[-1]
        values = values + qty * rows["Adj Close"].to_numpy() * scale
    r = values[1:] / values[:-1] - 1
    var = np.percentile(r, 5)  # linear interpolation between order statistics
    drawdown = np.min(values / np.maximum.accumulate(values) - 1)
    rf_d = (1 + rf) ** (1 / 252) - 1
    sharpe = np.mean(r - rf_d) / np.std(r - rf_d, ddof=1) * np.sqrt(252)
    assert metrics["window"]["returns"] == 10 and metrics["window"]["first_date"] == "2013-02-14"
    # the historical VaR of the window, a loss as a positive fraction
    assert (
        metrics["historical_var_95_1d"] == pytest.approx(-var, abs=1e-6)
        and metrics["historical_var_95_1d"] > 0
    )
    assert metrics["max_drawdown"] == pytest.approx(drawdown, abs=1e-6) and metrics["max_drawdown"] <= 0
    assert metrics["sharpe_ratio"] == pytest.approx(sharpe, abs=1e-5)


def test_simulated_var_is_the_risk_models_forecast_of_the_portfolio_values(
    make_ctx: MakeCtx, user: str
) -> None:
    # given a 10,000 USD account buying 10 AAPL and 100 MSFT on 2013-03-01
    ctx = make_ctx(AS_OF, broker_starting_cash=10_000.0, **LOOSE)
    trades = [
        {"symbol": "AAPL", "action": "buy", "quantity": 10},
        {"symbol": "MSFT", "action": "buy", "quantity": 100},
    ]
    metrics = _run(ctx, "trade_simulate", user_id=user, trades=trades).data["simulation"]["risk_metrics"]
    # then var_95_1d is the risk model's 1-session VaR(95 %) of the daily values of the holdings
    # (the last 1,001, from the source's rows), a loss as a positive fraction of today's value
    cash = 10_000 - 10 * _close("AAPL", "2013-03-01") - 1.0 - 100 * _close("MSFT", "2013-03-01") - 1.0
    joined = pd.concat(
        {s: raw_rows(s).loc[:"2013-03-01"]["Adj Close"] for s in ("AAPL", "MSFT")}, axis=1, join="inner"
    ).dropna()
    values = pd.Series(cash, index=joined.index)
    for symbol, qty in (("AAPL", 10), ("MSFT", 100)):
        rows = raw_rows(symbol)
        scale = rows["Close"].loc["2013-03-01"] / rows["Adj Close"].loc["2013-03-01"]
        values = values + qty * joined[symbol] * scale
    values = values.tail(1001)
    frame = pd.DataFrame({"close": values.to_numpy()}, index=pd.DatetimeIndex(pd.to_datetime(values.index)))
    want = forecast_risk(frame, as_of=date(2013, 3, 1), earnings=None, horizons=(1,)).horizon(1).var_95
    assert metrics["var_95_1d"] == pytest.approx(want, abs=1e-6) and metrics["var_95_1d"] > 0
    assert metrics["var_95_1d_usd"] == pytest.approx(want * values.iloc[-1], abs=0.01)
    assert "positive" in metrics["var_convention"] and metrics["var_model"].startswith("risk forecast risk-")


def test_all_cash_portfolio_has_null_metrics_with_reasons(make_ctx: MakeCtx, user: str) -> None:
    ctx = make_ctx(AS_OF)
    _run(ctx, "trade_execute", user_id=user, trades=[{"symbol": "IBM", "action": "buy", "quantity": 10}])
    env = _run(
        ctx, "trade_simulate", user_id=user, trades=[{"symbol": "IBM", "action": "sell", "quantity": 10}]
    )
    metrics = env.data["simulation"]["risk_metrics"]
    assert metrics["var_95_1d"] is None and metrics["sharpe_ratio"] is None
    assert metrics["null_reasons"]["sharpe_ratio"] == "no position to measure"
    assert env.data["simulation"]["portfolio_after"]["positions"] == []


def test_input_validation(make_ctx: MakeCtx, user: str) -> None:
    ctx = make_ctx(AS_OF)
    bad: list[dict[str, Any]] = [
        {"trades": [{"symbol": "IBM", "action": "buy", "quantity": 1, "order_type": "limit"}]},
        {"trades": [{"symbol": "IBM", "action": "buy", "quantity": 1, "stop_price": 5.0}]},
        {"trades": [{"symbol": "IBM", "action": "hold", "quantity": 1}]},
        {"trades": [{"symbol": "IBM", "action": "buy", "quantity": 0}]},
        {"trades": [{"symbol": "IBM", "action": "buy", "quantity": 1, "client_order_id": "x"}] * 2},
        {"trades": []},
    ]
    for arguments in bad:
        env = run_tool(name="trade_execute", arguments={**arguments, "user_id": user}, ctx=ctx)
        assert env.error is not None and env.error.code.value == "INVALID_INPUT", arguments
    unknown = _run(
        ctx, "trade_execute", user_id=user, trades=[{"symbol": "ZZZZ", "action": "buy", "quantity": 1}]
    )
    assert unknown.error is not None and unknown.error.code.value == "INVALID_SYMBOL"


def test_portfolio_and_simulation_are_point_in_time(make_ctx: MakeCtx, user: str) -> None:
    # given a buy of IBM on 2013-02-01, then on 2013-03-01 a partial sell and a MSFT buy
    feb, mar = make_ctx(date(2013, 2, 1)), make_ctx(AS_OF)
    _run(feb, "trade_execute", user_id=user, trades=[{"symbol": "IBM", "action": "buy", "quantity": 100}])
    later = [
        {"symbol": "IBM", "action": "sell", "quantity": 40},
        {"symbol": "MSFT", "action": "buy", "quantity": 200},
    ]
    _run(mar, "trade_execute", user_id=user, trades=later)
    # when the portfolio is read as of 2013-02-15
    port = _run(make_ctx(date(2013, 2, 15)), "get_portfolio", user_id=user).data["portfolio"]
    # then the 2013-03-01 orders are not in it, and IBM is valued at the 2013-02-15 close
    assert [(p["symbol"], p["quantity"], p["price_date"]) for p in port["positions"]] == [
        ("IBM", 100, "2013-02-15")
    ]
    assert port["cash"] == pytest.approx(100_000 - 100 * _close("IBM", "2013-02-01") - 1.0)
    sim = _run(
        make_ctx(date(2013, 2, 15)),
        "trade_simulate",
        user_id=user,
        trades=[{"symbol": "IBM", "action": "sell", "quantity": 100}],
    )
    assert sim.ok and sim.data["simulation"]["trades"][0]["status"] == "filled"  # 100 held then, 60 now
    now = _run(mar, "get_portfolio", user_id=user).data["portfolio"]
    assert [(p["symbol"], p["quantity"]) for p in now["positions"]] == [("IBM", 60), ("MSFT", 200)]
    orders = list_orders(engine=get_engine(mar.settings.service.effective_database_url), user_id=user)
    assert [(o["seq"], o["symbol"], o["action"]) for o in orders] == [
        (1, "IBM", "buy"),
        (2, "IBM", "sell"),
        (3, "MSFT", "buy"),
    ]


def test_redelivered_analysis_call_does_not_fill_twice(make_ctx: MakeCtx, user: str) -> None:
    # given the same trade_execute call made by a task and by its redelivered copy (no client id)
    trade = [{"symbol": "IBM", "action": "buy", "quantity": 10}]
    envelopes = []
    for _ in range(2):
        ctx = make_ctx(AS_OF)
        ctx.analysis_id, ctx.stage = f"an-{user}", "recommending"
        envelopes.append(_run(ctx, "trade_execute", user_id=user, trades=trade))
    first, second = (e.data["execution"]["trades"][0] for e in envelopes)
    # then the copy finds the original order through the derived client order id
    assert first["client_order_id"].startswith("auto-") and first["order_id"] == second["order_id"]
    assert (first["replayed"], second["replayed"]) == (False, True)
    assert _book(ctx, user).positions["IBM"].quantity == 10
    # and a Celery retry (another id_seed, same call) replays too: a retry must not trade again
    retry = make_ctx(AS_OF)
    retry.analysis_id, retry.stage, retry.id_seed = f"an-{user}", "recommending", "retry-1"
    assert (
        _run(retry, "trade_execute", user_id=user, trades=trade).data["execution"]["trades"][0]["replayed"]
        is True
    )
    # while another stage's call is a new order
    other = make_ctx(AS_OF)
    other.analysis_id, other.stage = f"an-{user}", "reviewing"
    assert (
        _run(other, "trade_execute", user_id=user, trades=trade).data["execution"]["trades"][0]["replayed"]
        is False
    )
    assert _book(ctx, user).positions["IBM"].quantity == 20


class _LaggingProvider(EmbeddedProvider):
    """The embedded data without the requested end day's bar (a feed that has not caught up)."""

    def bars(self, *, symbol: str, start: date | None, end: date) -> pd.DataFrame:
        return super().bars(symbol=symbol, start=start, end=end - timedelta(days=1))


def test_no_bar_on_the_session_and_dates_beyond_the_calendar(make_ctx: MakeCtx, user: str) -> None:
    trade = [{"symbol": "IBM", "action": "buy", "quantity": 1}]
    lagging = make_ctx(AS_OF)
    lagging.provider = _LaggingProvider()
    env = _run(lagging, "trade_execute", user_id=user, trades=trade)
    assert env.error is not None and env.error.code.value == "NO_DATA" and "2013-02-28" in env.error.message
    beyond = _run(make_ctx(date(2040, 1, 3)), "trade_execute", user_id=user, trades=trade)
    assert beyond.error is not None and beyond.error.code.value == "DATE_OUT_OF_RANGE"
    assert "XNYS calendar" in beyond.error.message
