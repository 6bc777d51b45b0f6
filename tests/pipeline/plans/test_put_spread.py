"""The put credit spread (``--type put_spread``), a plan added as one table row and its own
package: offered everywhere the table is read, its options validated by its own model, its
arithmetic by hand, and the whole plan on the real AAPL 2014-06-06 and GOOG 2015-12-24 chains."""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Any

import pytest

from agents.analysts.option_plan import OptionPlanInputs
from agents.data.market.csv_folder import CsvFolderProvider
from agents.tools.catalog import run_tool
from agents.tools.registry import ToolContext
from core.plans import cli_choices, plan_spec
from core.settings import Settings
from pipeline.plan_hooks import plan_for, validate_plan_options
from pipeline.plans.put_spread.models import PutSpreadOptions
from pipeline.plans.put_spread.step import finish_spread, run_spread, spread_of
from pipeline.query import analysis_type_of
from tests.agents.options.test_economics import GOOG_2015_12_24
from tests.agents.options.test_option_plan import AAPL_0606, AAPL_EARNINGS_0606, GOOG_1224, _zones


def test_the_row_is_offered_everywhere_the_table_is_read() -> None:
    assert "put_spread" in cli_choices() and plan_spec("put_spread").result_field == "put_spread"
    assert plan_for("put_spread").options_model is PutSpreadOptions
    assert analysis_type_of("a bull put spread on AAPL") == "put_spread"
    from apps.api.schemas import AnalyzeRequest

    body = AnalyzeRequest(symbol="AAPL", analysis_type="put_spread", options={"plan": {"width": 10}})
    assert body.options is not None and body.options.plan == {"width": 10}


def test_its_options_are_its_own() -> None:
    assert validate_plan_options("put_spread", {"width": 10}) == {"width": 10.0}
    assert validate_plan_options("put_spread", {"long_delta": 0.08, "account_value": 50000}) == {
        "account_value": 50000.0,
        "long_delta": 0.08,
    }
    with pytest.raises(ValueError, match="give width or long_delta, not both"):
        validate_plan_options("put_spread", {"width": 10, "long_delta": 0.1})
    with pytest.raises(ValueError, match="cost_basis: Extra inputs are not permitted"):
        validate_plan_options("put_spread", {"cost_basis": 600})


def test_the_spread_by_hand() -> None:
    """Sell the 620 put at its bid 3.30, buy the 605 put at its ask 1.59, 0.65 USD a leg: credit
    (3.30 − 1.59) × 100 − 1.30 = 169.70; width 15, max loss 1,500 − 169.70 = 1,330.30; return on
    risk 169.70 / 1,330.30; breakeven 620 − 1.697. POP between the strikes' probabilities."""
    short = {
        "contract": "S",
        "expiry": "2014-06-21",
        "last_trading_day": "2014-06-20",
        "dte": 14,
        "strike": 620.0,
        "fill": 3.30,
        "p_assigned_rn": 0.19,
        "p_assigned_rw": 0.14,
        "expected_move": 25.77,
    }
    long = {
        "contract": "L",
        "strike": 605.0,
        "bid": 1.55,
        "ask": 1.59,
        "p_assigned_rn": 0.11,
        "p_assigned_rw": 0.05,
    }
    s = spread_of(short, long, fill="bid", fee=0.65, spot=645.57)
    assert s["credit"] == pytest.approx(169.70) and s["max_loss"] == pytest.approx(1330.30)
    assert s["return_on_risk"] == pytest.approx(169.70 / 1330.30, abs=1e-6)
    assert s["breakeven"] == pytest.approx(620 - 1.697)
    assert s["excess_yield"] == pytest.approx(169.70 / 1330.30 * 365 / 14, abs=1e-6)
    import math

    w = (math.log(620) - math.log(618.303)) / (math.log(620) - math.log(605))
    assert s["pop_rn"] == pytest.approx(1 - (0.19 + (0.11 - 0.19) * w), abs=1e-4)
    assert s["p_max_loss_rw"] == 0.05
    mid_tick = spread_of(short, long, fill="mid_minus_tick", fee=0.65, spot=645.57)
    assert mid_tick["long_fill"] == pytest.approx(1.58)  # the mid 1.57 plus a tick, under the ask


@pytest.fixture
def options_dir() -> Path:
    from tests.agents.options.conftest import OPTIONS_DIR

    if not OPTIONS_DIR.is_dir():
        pytest.skip(f"shared option chains not found at {OPTIONS_DIR} (only present in the workplace)")
    return OPTIONS_DIR


def _ctx(tmp_path: Path, stocknet: Path, options: Path, as_of: date) -> ToolContext:
    return ToolContext(
        settings=Settings(service_state_dir=tmp_path / "state", options_dir=options),
        as_of=as_of,
        provider=CsvFolderProvider(data_dir=stocknet),
    )


def _plan(ctx: ToolContext, opts: PutSpreadOptions, **kw: Any) -> dict[str, Any]:
    inputs = OptionPlanInputs(
        as_of=ctx.as_of,
        right="put",
        technical_ref="t",
        earnings_ref="e",
        run=lambda n, a: run_tool(name=n, arguments=a, ctx=ctx),
        screen={"min_excess_yield": 0.0},
        **kw,
    )
    record = run_spread(inputs, opts, fill="bid", fee=0.65, min_excess=0.06).value
    return finish_spread(inputs, record).value


def test_aapl_spreads_fit_where_the_put_does_not(
    tmp_path: Path, stocknet_dir: Path, options_dir: Path
) -> None:
    """AAPL 2014-06-06: one cash-secured 620 put needs 62,000 USD (62 % of the account); a spread
    on it with the 0.10-delta put bought risks its width: sized within the 5 % gap-loss cap
    (5,000 USD of the 100,000 account), every rung before the earnings cutoff."""
    ctx = _ctx(tmp_path, stocknet_dir, options_dir, date(2014, 6, 6))
    record = _plan(
        ctx,
        PutSpreadOptions(),
        symbol="AAPL",
        technical=AAPL_0606,
        chart=_zones(support=[(622.5, 628.9)]),
        earnings=AAPL_EARNINGS_0606,
    )
    assert record["status"] == "suggested", record["reasons"]
    s, sizing = record["spread"], record["sizing"]
    assert s["short"] == "AAPL140621P00620000" and s["long_strike"] < s["short_strike"]
    assert s["max_loss"] == pytest.approx(s["width"] * 100 - s["credit"])
    assert 0.05 <= abs(record["long"]["delta"]) <= 0.15
    assert sizing["contracts"] >= 1 and -sizing["pnl_gap"] <= 5_000 + 1e-6
    assert sizing["collateral"] == pytest.approx(sum(r["collateral"] for r in sizing["rungs"]))
    assert all(r["expiry"] < "2014-07-15" for r in sizing["rungs"])
    assert any(r["text"].startswith("size ") and "spreads" in r["text"] for r in record["reasons"])
    # the spread's reason prints money to cents and probabilities as %, as its section does
    why = next(r["text"] for r in record["reasons"] if r["text"].startswith("sell "))
    assert f"max loss {s['max_loss']:,.2f} USD" in why and f"breakeven {s['breakeven']:.2f};" in why
    assert f"POP {100 * s['pop_rn']:.1f} % risk-neutral" in why and "at 3.30, buy" in why
    narrow = _plan(
        ctx,
        PutSpreadOptions(width=10),
        symbol="AAPL",
        technical=AAPL_0606,
        chart=_zones(support=[(622.5, 628.9)]),
        earnings=AAPL_EARNINGS_0606,
    )
    assert narrow["spread"]["width"] == 10 and narrow["spread"]["long"] == "AAPL140621P00610000"


def test_goog_says_in_one_sentence_why_no_spread(
    tmp_path: Path, stocknet_dir: Path, options_dir: Path
) -> None:
    """GOOG 2015-12-24: the one short put the screen passes (the 2016-01-15 725) has no long put
    below it liquid enough (the 700 put quotes 1.75/1.95 with volume 3)."""
    ctx = _ctx(tmp_path, stocknet_dir, options_dir, date(2015, 12, 24))
    record = _plan(
        ctx,
        PutSpreadOptions(),
        symbol="GOOG",
        technical=GOOG_1224,
        chart=_zones(support=[(736.75, 743.01)]),
        earnings=GOOG_2015_12_24,
    )
    assert (record["status"], record["rejected_by"]) == ("rejected", "spread")
    (why,) = record["reasons"]
    assert why["text"].startswith("the only short put that passes the screen has no long put below it")
    assert "GOOG160115P00725000 / GOOG160115P00700000 (1.75/1.95, OI 770, volume 3" in why["text"]
    assert any(r.startswith("get_option_greeks_") for r in why["source_refs"])
