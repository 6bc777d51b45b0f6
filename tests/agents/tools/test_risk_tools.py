"""``risk_forecast`` and ``risk_levels``: the tools give the risk model's own numbers on the
embedded source's bars, read here straight from its file, with the backtest record's lines."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date
from typing import Any

import pandas as pd
import pytest
import redis

from agents.data.market.embedded import EmbeddedProvider
from agents.quant.risk import forecast_risk, load_record
from agents.tools.catalog import run_tool
from agents.tools.registry import ToolContext
from core.settings import Settings
from tests.agents.tools.conftest import raw_rows
from tests.support.redis_db import redis_url_for_tests

AS_OF = date(2012, 6, 1)


def _ctx(as_of: date = AS_OF) -> ToolContext:
    return ToolContext(settings=Settings(), as_of=as_of, provider=EmbeddedProvider())


def source_bars(symbol: str, as_of: date) -> pd.DataFrame:
    """The source's rows up to ``as_of`` as the risk model takes them (its whole history: the model
    reads only its last 1,000 sessions, so the tool's five years give the same forecast)."""
    rows = raw_rows(symbol).loc[: as_of.isoformat()]
    frame = pd.DataFrame(
        {
            "open": rows["Open"].to_numpy(),
            "high": rows["High"].to_numpy(),
            "low": rows["Low"].to_numpy(),
            "close": rows["Close"].to_numpy(),
            "adj_close": rows["Adj Close"].to_numpy(),
        },
        index=pd.DatetimeIndex(pd.to_datetime(rows.index)),
    )
    return frame


def test_risk_forecast_is_the_models_forecast_of_the_source_bars() -> None:
    env = run_tool(name="risk_forecast", arguments={"symbol": "aapl"}, ctx=_ctx())
    assert env.ok, env.error
    want = forecast_risk(source_bars("AAPL", AS_OF), symbol="AAPL", as_of=AS_OF, horizons=(1, 5, 20, 60))
    data = env.data
    assert data["close"] == pytest.approx(want.close, abs=1e-9)
    assert data["sigma_daily"] == pytest.approx(want.sigma_daily, rel=1e-9)
    assert [h["horizon"] for h in data["horizons"]] == [1, 5, 20, 60]
    for got, h in zip(data["horizons"], want.horizons, strict=True):
        for key in ("sigma", "var_95", "var_99", "es_975"):
            assert got[key] == pytest.approx(getattr(h, key), rel=1e-9), key
        for band, ref in zip(got["ranges"], h.ranges, strict=True):
            assert [band["low"], band["high"]] == pytest.approx([ref.low, ref.high], rel=1e-9)
    assert data["model"]["version"] == want.model.version
    assert data["bars"]["last"] == "2012-06-01" and data["bars"]["period"] == "5y"
    # the record's own sentences, stamped with the model version
    record = data["record"]
    assert record["version"] == want.model.version == load_record()["model_version"]
    stored = load_record()["horizons"]
    assert record["horizons"]["20"]["ranges"]["80"]["rate"] == stored["20"]["ranges"]["80"]["rate"]
    assert record["horizons"]["1"]["var"]["95"]["high"] == stored["1"]["var"]["95"]["high"]
    # the distribution tables are not stored (risk_levels forecasts again)
    assert all("distribution" not in h for h in data["horizons"])


def test_ranges_nest_around_the_close_and_widen_with_the_horizon() -> None:
    data = run_tool(name="risk_forecast", arguments={"symbol": "IBM"}, ctx=_ctx(date(2013, 2, 28))).data
    close, last_width = data["close"], 0.0
    for h in data["horizons"]:
        bands = {round(r["probability"] * 100): r for r in h["ranges"]}
        assert bands[95]["low"] < bands[80]["low"] < bands[50]["low"] < close
        assert close < bands[50]["high"] < bands[80]["high"] < bands[95]["high"]
        assert 0 < h["var_95"] < h["var_99"]
        width = bands[80]["high"] - bands[80]["low"]
        assert width > last_width
        last_width = width


def test_risk_levels_are_the_forecasts_probabilities_and_cite_it() -> None:
    ctx = _ctx()
    forecast = run_tool(name="risk_forecast", arguments={"symbol": "AAPL"}, ctx=ctx)
    level = 530.0
    env = run_tool(
        name="risk_levels",
        arguments={"symbol": "AAPL", "forecast_ref": forecast.tool_call_id, "levels": [level]},
        ctx=ctx,
    )
    assert env.ok, env.error
    assert forecast.tool_call_id in env.source_refs
    want = forecast_risk(source_bars("AAPL", AS_OF), symbol="AAPL", as_of=AS_OF, horizons=(1, 5, 20, 60))
    rows = {r["horizon"]: r for r in env.data["levels"][0]["horizons"]}
    for h in (5, 20, 60):
        assert rows[h]["p_below"] == pytest.approx(want.prob_below(level, h), abs=1e-9)
        assert rows[h]["p_touch"] == pytest.approx(want.prob_touch(level, h), abs=1e-9)
        assert rows[h]["p_touch"] >= rows[h]["p_below"]


def test_risk_levels_refuses_a_reference_that_is_no_forecast() -> None:
    ctx = _ctx()
    env = run_tool(
        name="risk_levels",
        arguments={"symbol": "AAPL", "forecast_ref": "risk_forecast_000000000000", "levels": [500.0]},
        ctx=ctx,
    )
    assert not env.ok and env.error is not None
    assert env.error.code.value == "INVALID_INPUT" and "risk_forecast_000000000000" in env.error.message


#: The keys the risk tools share forecasts under (``agents.tools.risk._shared_key``).
SHARED_PREFIX = "finagent:risk-forecast:"


@pytest.fixture
def shared_redis() -> Iterator[tuple[str, Any]]:
    """``(url, client)`` of this test process's own Redis (``tests.support.redis_db``), with no
    shared forecast in it when the test starts; skipped when no Redis can be had."""
    try:
        url = redis_url_for_tests()
        client = redis.Redis.from_url(url, socket_connect_timeout=2)
        client.ping()
    except (RuntimeError, redis.RedisError) as exc:
        pytest.skip(f"Redis not reachable: {exc}")
    for key in client.scan_iter(f"{SHARED_PREFIX}*"):
        client.delete(key)
    yield url, client
    client.close()


def _shared_keys(client: Any) -> list[bytes]:
    return list(client.scan_iter(f"{SHARED_PREFIX}*"))


def test_risk_levels_in_another_process_takes_the_shared_forecast(
    monkeypatch: pytest.MonkeyPatch, shared_redis: tuple[str, Any]
) -> None:
    import agents.quant.risk as quant_risk
    import agents.tools.risk as risk_tools

    url, client = shared_redis
    settings = Settings(service={"broker_url": url})
    ctx = ToolContext(settings=settings, as_of=AS_OF, provider=EmbeddedProvider())
    risk_tools._memo.clear()
    forecast = run_tool(name="risk_forecast", arguments={"symbol": "AAPL"}, ctx=ctx)
    assert forecast.ok and len(_shared_keys(client)) == 1
    assert 0 < client.ttl(_shared_keys(client)[0]) <= risk_tools.SHARED_TTL
    level = 530.0
    arguments = {"symbol": "AAPL", "forecast_ref": forecast.tool_call_id, "levels": [level]}
    here = run_tool(name="risk_levels", arguments=arguments, ctx=ctx)  # the process's own forecast
    # another worker process: nothing kept in memory, and fitting the model again is not allowed
    risk_tools._memo.clear()

    def refit(*args: object, **kwargs: object) -> None:
        raise AssertionError("the shared forecast was not taken")

    monkeypatch.setattr(quant_risk, "forecast_risk", refit)
    env = run_tool(name="risk_levels", arguments=arguments, ctx=ctx)
    assert env.ok, env.error
    assert forecast.tool_call_id in env.source_refs
    assert env.data == here.data  # to the last bit
    want = forecast_risk(source_bars("AAPL", AS_OF), symbol="AAPL", as_of=AS_OF, horizons=(1, 5, 20, 60))
    for row in env.data["levels"][0]["horizons"]:
        assert row["p_below"] == pytest.approx(want.prob_below(level, row["horizon"]), abs=1e-9)
        assert row["p_touch"] == pytest.approx(want.prob_touch(level, row["horizon"]), abs=1e-9)


def test_a_shared_forecast_of_other_bars_is_not_taken(shared_redis: tuple[str, Any]) -> None:
    import agents.tools.risk as risk_tools

    url, client = shared_redis
    settings = Settings(service={"broker_url": url})
    risk_tools._memo.clear()
    june = run_tool(name="risk_forecast", arguments={"symbol": "AAPL"}, ctx=ToolContext(
        settings=settings, as_of=AS_OF, provider=EmbeddedProvider()))  # fmt: skip
    risk_tools._memo.clear()
    later = date(2012, 6, 8)
    july = run_tool(name="risk_forecast", arguments={"symbol": "AAPL"}, ctx=ToolContext(
        settings=settings, as_of=later, provider=EmbeddedProvider()))  # fmt: skip
    assert len(_shared_keys(client)) == 2
    want = forecast_risk(source_bars("AAPL", later), symbol="AAPL", as_of=later, horizons=(1, 5, 20, 60))
    assert (
        july.data["close"] == pytest.approx(want.close, abs=1e-9) and july.data["close"] != june.data["close"]
    )
