"""The put credit spread section of the console's analysis page (``put_spread_view`` and
``_put_spread.html``), on records shaped as ``pipeline.plans.put_spread`` stores them: the
verdict first (the trade, or who refused it and why), the figures formatted for people
(prices to cents, thousands separators, shares as %), every citation kept; and the thousands
separators of the other option sections. The pages in a browser are
``test_console_options_browser.py``."""

from __future__ import annotations

import html as html_text
import re
from typing import Any

from apps.api.console.put_spread_view import pct, price, put_spread_view
from apps.api.console.views import templates

SCREEN = "filter_options_8d8208c5fc14"
GREEKS = "get_option_greeks_f410f4b7d5df"
PORTFOLIO = "get_portfolio_92ad380c9c11"


def _leg(contract: str, strike: float, bid: float, ask: float, delta: float) -> dict[str, Any]:
    return {
        "contract": contract,
        "strike": strike,
        "bid": bid,
        "ask": ask,
        "delta": delta,
        "iv": 0.2433,
        "open_interest": 6255,
        "volume": 1028,
    }


def _suggested() -> dict[str, Any]:
    """Sell the 620 put at 3.30, buy the 605 put at 1.59: credit 169.70 USD, max loss
    1,500 − 169.70 = 1,330.30 USD a spread; four spreads over two rungs."""
    return {
        "symbol": "AAPL",
        "status": "suggested",
        "rejected_by": None,
        "options": {
            "source_refs": ["calculate_iv_hv_1", SCREEN],
            "spread_refs": [GREEKS],
            "real_world": {"source": "risk forecast risk-81078ebf9a (HAR-RV)", "sigma_annual": 0.16},
        },
        "suggestion": _leg("AAPL140621P00620000", 620.0, 3.3, 3.35, -0.1916),
        "long": _leg("AAPL140621P00605000", 605.0, 1.51, 1.59, -0.0976),
        "spread": {
            "short": "AAPL140621P00620000",
            "long": "AAPL140621P00605000",
            "expiry": "2014-06-21",
            "last_trading_day": "2014-06-20",
            "dte": 14,
            "short_strike": 620.0,
            "long_strike": 605.0,
            "width": 15.0,
            "short_fill": 3.3,
            "long_fill": 1.59,
            "credit": 169.7,
            "income": 169.7,
            "max_loss": 1330.3,
            "return_on_risk": 0.127565,
            "excess_yield": 3.325807,
            "tbill_yield": 0.000406,
            "breakeven": 618.303,
            "pop_rn": 0.8062,
            "pop_rw": 0.8984,
            "p_max_loss_rn": 0.1067,
            "p_max_loss_rw": 0.0241,
            "p_touch_short_rn": 0.4044,
            "p_touch_short_rw": 0.1615,
        },
        "alternatives": [
            {
                "short": "AAPL140621P00615000",
                "long": "AAPL140621P00605000",
                "expiry": "2014-06-21",
                "dte": 14,
                "short_strike": 615.0,
                "long_strike": 605.0,
                "credit": 91.7,
                "max_loss": 908.3,
                "excess_yield": 2.632115,
                "pop_rn": 0.8399,
                "pop_rw": 0.932,
            }
        ],
        "sizing": {
            "contracts": 4,
            "rungs": [
                {
                    "contract": "AAPL140621P00620000",
                    "long_contract": "AAPL140621P00605000",
                    "strike": 620.0,
                    "long_strike": 605.0,
                    "expiry": "2014-06-21",
                    "contracts": 2,
                    "collateral": 3000.0,
                    "net_premium": 339.4,
                    "max_loss": 2660.6,
                },
                {
                    "contract": "AAPL140621P00615000",
                    "long_contract": "AAPL140621P00605000",
                    "strike": 615.0,
                    "long_strike": 605.0,
                    "expiry": "2014-06-21",
                    "contracts": 2,
                    "collateral": 2000.0,
                    "net_premium": 183.4,
                    "max_loss": 1816.6,
                },
            ],
            "collateral": 5000.0,
            "net_premium": 522.8,
            "max_loss": 4477.2,
            "pnl_gap": -4477.2,
            "pnl_down_2sigma": -4477.2,
            "share_of_account": 0.05,
            "binding": "gap",
            "limits": {
                "name_cap_pct": 0.2,
                "name_cap_usd": 20000.0,
                "gap_cap_pct": 0.05,
                "gap_cap_usd": 5000.0,
                "by_cash": 66,
                "by_name_cap": 13,
                "by_gap": 3,
            },
            "account_source": "the paper account (100,000.00 USD cash, 100,000.00 USD in all)",
            "per_contract": {"max_loss": 1330.3, "pnl_gap": -1330.3, "pnl_down_2sigma": -1330.3},
        },
        "reasons": [
            {
                "text": "sell the 620 put, buy the 605 put",
                "source_refs": ["calculate_iv_hv_1", SCREEN, GREEKS],
            },
            {"text": "size 4 spreads", "source_refs": [PORTFOLIO, SCREEN]},
        ],
    }


def _render(view: dict[str, Any], cited: set[str]) -> str:
    return templates.get_template("_put_spread.html").render(spread_plan=view, cited=cited)


def _text(html: str) -> str:
    """The text a browser shows of ``html``: tags out, entities read ("&nbsp;" a no-break
    space), runs of other white space as one space."""
    return re.sub(r"[ \t\r\n]+", " ", html_text.unescape(re.sub(r"<[^>]+>", " ", html)))


def test_figures_read_as_people_write_them() -> None:
    assert price(1234.5) == "1,234.50" and price(90.1365) == "90.14"
    assert price(1330.3) == "1,330.30" and price(618.303) == "618.30" and price(-4477.2) == "-4,477.20"
    assert pct(0.8984) == "89.8\u00a0%" and pct(0.2, 0) == "20\u00a0%" and pct(3.325807) == "332.6\u00a0%"
    assert price(None) == "–" and pct("x") == "–"


def test_a_sized_spread_shows_the_trade_first_then_its_numbers_and_sources() -> None:
    view = put_spread_view(_suggested())
    # the whole decision: both rungs and the totals of the sizing (not the first rung's per spread)
    assert view["verdict"] == (
        "Sell 4 put credit spreads on AAPL, expiry 2014-06-21 (14 DTE): 2 × the 620.00 / 605.00 put "
        "spread, 2 × the 615.00 / 605.00 put spread, for a credit of 522.80 USD and a max loss of "
        "4,477.20 USD in all (margin 5,000.00 USD)."
    )
    z = view["sizing"]
    assert (z["credit"], z["max_loss"], z["margin"]) == ("522.80", "4,477.20", "5,000.00")
    assert view["verdict_refs"] == ["calculate_iv_hv_1", SCREEN, GREEKS]
    s = view["spread"]
    assert (s["short_strike"], s["long_strike"], s["width"]) == ("620.00", "605.00", "15.00")
    assert (s["credit"], s["max_loss"], s["breakeven"]) == ("169.70", "1,330.30", "618.30")
    assert s["last_trading_day"] == "2014-06-20" and s["dte"] == 14
    assert view["probabilities"][0][1:] == ("80.6\u00a0%", "89.8\u00a0%")  # POP risk-neutral / real-world
    assert view["probabilities"][1][1:] == ("10.7\u00a0%", "2.4\u00a0%")  # max loss
    assert view["real_world"].startswith("risk forecast")
    z = view["sizing"]
    assert z["contracts"] == 4 and z["margin"] == "5,000.00" and z["share_of_account"] == "5.0\u00a0%"
    assert z["gap_cap"] == "5\u00a0% of the account (5,000.00 USD)" and z["binding"] == "the gap-loss cap"
    assert z["refs"] == [PORTFOLIO] and len(z["rungs"]) == 2
    assert [leg["role"] for leg in view["legs"]] == ["sell", "buy"]
    assert view["alternatives"][0]["pop_pair"] == "84.0\u00a0% / 93.2\u00a0%"

    html = _render(view, cited={SCREEN, PORTFOLIO})
    assert "{{" not in html and "{%" not in html and "None" not in html
    text = _text(html)
    # the verdict comes before any figure of the section
    assert text.index("Sell 4 put credit spreads") < text.index("Strikes (short / long)")
    assert "620.00 / 605.00 (width 15.00)" in text and "1,330.30\u00a0USD a spread" in text
    assert "2014-06-21 (last trading day 2014-06-20, 14 DTE)" in text
    assert "4,477.20\u00a0USD" in text and "20\u00a0% of the account (20,000.00 USD)" in text
    # a cited call with a timeline row is a link to it, one without is plain text
    assert f'<a class="cite" href="#call-{SCREEN}">[{SCREEN}]</a>' in html
    assert f'<a class="cite" href="#call-{PORTFOLIO}">[{PORTFOLIO}]</a>' in html
    assert f'<span class="cite">[{GREEKS}]</span>' in html
    assert "The ladder of spreads" in html and "Alternative spreads" in html


def test_a_refusal_is_one_sentence_with_its_citations_and_the_weighed_spread() -> None:
    record = _suggested()
    reason = "no spread fits: one AAPL140621P00620000 / AAPL140621P00605000 spread: its 1,500.00 USD of margin is over the 20% per-name cap"  # noqa: E501
    record.update(
        status="rejected", rejected_by="sizing", reasons=[{"text": reason, "source_refs": [PORTFOLIO]}]
    )
    record["sizing"].update(contracts=0, rungs=[], collateral=0.0, binding="name_cap")
    view = put_spread_view(record)
    assert view["verdict"] == f"No put credit spread on AAPL: rejected by the sizing analyst: {reason}."
    assert view["verdict_refs"] == [PORTFOLIO]
    html = _render(view, cited={PORTFOLIO})
    text = _text(html)
    assert "The spread it weighed (not traded)" in text
    assert "1,500.00\u00a0USD a spread" in text  # one spread's margin, not the 0 placed
    assert "the per-name cap" in text and "Rejection reasons" in text
    assert "{{" not in html and "None" not in html


def test_a_refusal_before_any_spread_shows_only_the_verdict_and_reasons() -> None:
    record = {
        "symbol": "AAPL",
        "status": "rejected",
        "rejected_by": "options",
        "options": {"source_refs": [SCREEN]},
        "reasons": [{"text": "no put passes the screen.", "source_refs": [SCREEN]}],
    }
    view = put_spread_view(record)
    assert (
        view["verdict"]
        == "No put credit spread on AAPL: rejected by the options analyst: no put passes the screen."
    )
    assert view["spread"] is None and view["sizing"] is None and view["legs"] == []
    html = _render(view, cited=set())
    assert "The spread" not in html and "Probabilities" not in html and "Size against" not in html
    assert f'<span class="cite">[{SCREEN}]</span>' in html and "{{" not in html and "None" not in html


def test_the_other_option_sections_write_thousands_separators_too() -> None:
    """A GOOG-sized put in the csp section: strike, income and open interest with separators."""
    from apps.api.console.views import options_view

    contract = {"contract": "GOOG160115P01600000", "expiry": "2016-01-15", "dte": 22, "strike": 1600.0,
                "bid": 15.0, "ask": 15.2, "delta": -0.2, "iv": 0.3, "pop": 0.8, "open_interest": 6255,
                "fill": 15.0, "net_premium": 1499.35}  # fmt: skip
    record = {"status": "suggested", "suggestion": contract, "alternatives": [], "options": {}}
    html = templates.get_template("_options.html").render(
        options=options_view(record, None, None), cited=set()
    )
    text = _text(html)
    assert "strike 1,600.00" in text and "1,499.35" in text and "6,255" in text
    assert "-0.200" in text and "30.0\u00a0%" in text  # other formats as before


def test_the_spread_section_shows_the_short_puts_screen_as_the_csp_section_does(tmp_path: Any) -> None:
    """The real AAPL 2014-06-06 record (4 spreads over the 620 / 605 and 615 / 605 pairs) with the
    real ``filter_options`` screen its short puts came from (the shared Lean chain): the section
    lists the best passing short put of each expiry and the rows the screen returned, its rules
    and failure counts, cited; without a stored screen it says so."""
    import json
    from datetime import date
    from pathlib import Path

    import pytest

    from agents.data.market.csv_folder import CsvFolderProvider
    from agents.tools.catalog import run_tool
    from agents.tools.registry import ToolContext
    from core.settings import Settings
    from tests.conftest import SHARED_DATA

    options, stocknet = SHARED_DATA / "options", SHARED_DATA / "ohlcv" / "stocknet"
    if not options.is_dir() or not stocknet.is_dir():
        pytest.skip("shared option chains not found (only present in the workplace)")
    fixture = (
        Path(__file__).parents[2]
        / "pipeline"
        / "plans"
        / "fixtures"
        / "put_spread_record_AAPL_2014-06-06.json"
    )
    record = json.loads(fixture.read_text())
    ctx = ToolContext(
        settings=Settings(service_state_dir=tmp_path / "state", options_dir=options),
        as_of=date(2014, 6, 6),
        provider=CsvFolderProvider(data_dir=stocknet),
    )
    env = run_tool(
        name="filter_options", arguments={"symbol": "AAPL", "limit": 10, "max_strike": 622.5}, ctx=ctx
    )
    assert env.ok and env.data and env.data["passing"], env.error
    screen = env.data
    view = put_spread_view(record, screen=screen, screen_ref=SCREEN)
    html = _render(view, cited={SCREEN})
    section = html.split('class="put-spread-screen"')[1]
    text = _text(section)
    assert "Ladder: the best passing short put of each expiry" in text
    # the ladder: the first passing put of each expiry (the screen ranks best first), strike to cents
    best: dict[str, dict[str, Any]] = {}
    for row in screen["passing"]:
        best.setdefault(row["expiry"], row)
    ladder = section.split("<caption>Best put per expiry")[1].split("</table>")[0]
    assert ladder.count("<tr><td><code>") == len(best)
    for row in best.values():
        assert f"<code>{row['contract']}</code>" in ladder and f">{row['strike']:,.2f}<" in ladder
    # the short put the spread sells is among the rows the screen returned
    assert f"<code>{record['spread']['short']}</code>" in section
    assert f"{screen['passing_count']} of {screen['screened']} puts pass the screen" in text, text
    assert f'<a class="cite" href="#call-{SCREEN}">[{SCREEN}]</a>' in section
    for miss in screen["nearest_misses"]:
        assert miss["contract"] in section and "fails: " + ", ".join(miss["failed"]) in text
    # no stored screen: said, not an empty table
    bare = _render(put_spread_view(record), cited=set()).split('class="put-spread-screen"')[1]
    assert "No stored screen (<code>filter_options</code>) result: no ladder or chain slice." in bare
