"""The Answer card of a csp or covered-call analysis (``option_plan_view.option_verdict`` through
``views.options_view``): the option plan's full verdict from the stored report record, never the
headline shortened for lists with "…"; prices to cents with thousands separators, the account's
share in %, the calls it rests on cited. Records shaped as ``pipeline.plans.option`` stores them."""

from __future__ import annotations

from typing import Any

from apps.api.console.option_plan_view import option_verdict
from apps.api.console.views import options_view

IV_HV = "calculate_iv_hv_0c1f2e3d4a5b"
SCREEN = "filter_options_8d8208c5fc14"
CALLS = "filter_calls_77aa01bc3de4"
PORTFOLIO = "get_portfolio_92ad380c9c11"
NBSP = "\u00a0"


def _sized_csp() -> dict[str, Any]:
    """Two AAPL 587.50 puts expiring 2014-07-03 (24 DTE), sold at 4.30: 430.00 USD less 1.40 of
    fees = 428.60 USD a contract, 857.20 USD for two; collateral 2 × 58,750 = 117,500.00 USD of a
    500,000 USD account = 23.5 %."""
    return {
        "strategy": "cash-secured put",
        "symbol": "AAPL",
        "as_of": "2014-06-09",
        "right": "put",
        "options": {"source_refs": [IV_HV, SCREEN], "spot": 645.57},
        "status": "suggested",
        "rejected_by": None,
        "reasons": [
            {"text": "strike 587.50 below the support at 592.10", "source_refs": [SCREEN]},
            {"text": "2 contracts fit the per-name cap", "source_refs": [PORTFOLIO, SCREEN]},
        ],
        "suggestion": {
            "contract": "AAPL140703P00587500",
            "expiry": "2014-07-03",
            "last_trading_day": "2014-07-03",
            "dte": 24,
            "strike": 587.5,
            "bid": 4.25,
            "ask": 4.35,
            "mid": 4.3,
            "volume": 212,
            "open_interest": 1437,
            "delta": -0.1904,
            "iv": 0.2211,
            "fill": 4.3,
            "net_premium": 428.6,
            "income": 428.6,
            "excess_yield": 0.1105,
            "pop_rn": 0.8712,
            "pop_rw": 0.9301,
            "collateral": 58750.0,
        },
        "alternatives": [],
        "sizing": {
            "contracts": 2,
            "rungs": [
                {
                    "contract": "AAPL140703P00587500",
                    "expiry": "2014-07-03",
                    "strike": 587.5,
                    "contracts": 2,
                    "collateral": 117500.0,
                    "net_premium": 857.2,
                    "max_loss": 116642.8,
                    "pnl_gap": -10214.96,
                    "pnl_down_2sigma": -1566.03,
                }
            ],
            "collateral": 117500.0,
            "net_premium": 857.2,
            "max_loss": 116642.8,
            "pnl_gap": -10214.96,
            "pnl_down_2sigma": -1566.03,
            "share_of_account": 0.235,
            "binding": "name_cap",
            "account_source": "a what-if account of 500,000.00 USD, all cash",
        },
    }


def test_a_sized_csp_answers_with_the_whole_trade() -> None:
    view = option_verdict(_sized_csp(), kind="csp")
    assert view["verdict"] == (
        "Sell 2 cash-secured puts on AAPL: the 587.50 put AAPL140703P00587500, expiry 2014-07-03 "
        "(24 DTE), sold at 4.30 for a premium of 428.60 USD a contract (857.20 USD in all); "
        f"collateral 117,500.00 USD, 23.5{NBSP}% of the account."
    )
    assert "…" not in view["verdict"]
    # the options analyst's calls, then the portfolio call the size rests on
    assert view["verdict_refs"] == [IV_HV, SCREEN, PORTFOLIO]
    # the options section carries the same answer (the Answer card reads it there)
    section = options_view(_sized_csp(), None, None, kind="csp")
    assert section["verdict"] == view["verdict"] and section["verdict_refs"] == view["verdict_refs"]


def test_a_long_refusal_is_kept_whole_in_one_sentence() -> None:
    reason = (
        "one AAPL140703P00587500 put needs 58,750.00 USD of collateral, over the 20% per-name cap "
        "of a 100,000.00 USD account (20,000.00 USD), and no cheaper put passes the screen's floors "
        "on open interest, spread and yield over the T-bill."
    )
    record = _sized_csp()
    record.update(
        status="rejected",
        rejected_by="sizing",
        reasons=[{"text": reason, "source_refs": [PORTFOLIO, SCREEN]}],
    )
    view = option_verdict(record, kind="csp")
    assert len(reason) > 160  # longer than the stored headline keeps
    assert view["verdict"] == f"No cash-secured put on AAPL: rejected by the sizing analyst: {reason}"
    assert "…" not in view["verdict"] and view["verdict"].count(".") == reason.count(".")
    assert view["verdict_refs"] == [PORTFOLIO, SCREEN]


def test_a_covered_call_ladder_names_its_rungs_and_the_shares_covered() -> None:
    """Three AAPL calls over two strikes on 300 shares, no account share (a call's collateral is
    the shares themselves)."""
    record = {
        "symbol": "AAPL",
        "right": "call",
        "status": "suggested",
        "options": {"source_refs": [CALLS]},
        "reasons": [{"text": "above the resistance", "source_refs": [CALLS]}],
        "suggestion": {"contract": "AAPL140621C00650000", "expiry": "2014-06-21", "dte": 15,
                       "strike": 650.0, "fill": 2.05, "net_premium": 203.6},
        "sizing": {
            "contracts": 3,
            "rungs": [
                {"contract": "AAPL140621C00650000", "expiry": "2014-06-21", "strike": 650.0, "contracts": 2},
                {"contract": "AAPL140621C00655000", "expiry": "2014-06-21", "strike": 655.0, "contracts": 1},
            ],
            "net_premium": 1362.4,
            "share_of_account": 0.6,
        },
    }  # fmt: skip
    verdict = option_verdict(record, kind="covered_call")["verdict"]
    assert verdict == (
        "Sell 3 covered calls on AAPL in a ladder of 2 × AAPL140621C00650000 (650.00, 2014-06-21), "
        "1 × AAPL140621C00655000 (655.00, 2014-06-21), for a premium of 1,362.40 USD in all; the "
        "first rung, the 650.00 call AAPL140621C00650000, expiry 2014-06-21 (15 DTE), sold at 2.05 "
        "for 203.60 USD a contract; covering 300 shares."
    )


def test_a_refusal_before_any_contract_names_the_symbol_of_the_analysis() -> None:
    record = {"status": "rejected", "rejected_by": "options", "reasons": [
        {"text": "IV 0.1731 below HV(20) 0.2053", "source_refs": [IV_HV]}]}  # fmt: skip
    view = option_verdict(record, kind="covered_call", symbol="GOOG")
    assert view == {
        "verdict": "No covered call on GOOG: rejected by the options analyst: IV 0.1731 below HV(20) 0.2053.",
        "verdict_refs": [IV_HV],
    }


def test_the_answer_card_shows_the_full_verdict_with_linked_citations_not_the_headline() -> None:
    from types import SimpleNamespace

    from apps.api.console.views import templates

    shortened = "Cash-secured put: sell 2 AAPL140703P00587500: strike 587.5, last trading day 2014-07-…"
    a = SimpleNamespace(symbol="AAPL", as_of="2014-06-09", analysis_id="a1", user_query=None,
                        status="done", error=None, headline=shortened, signal="HOLD", p_outperform=None,
                        probability_text=None, details=None, chart_url=None, progress=None)  # fmt: skip
    html = templates.get_template("analysis.html").render(
        a=a, report={}, options=options_view(_sized_csp(), None, None, kind="csp"), spread_plan=None,
        cited={SCREEN}, steps=SimpleNamespace(passes=1), finished=True, events=[], terminal=[],
    )  # fmt: skip
    card = html[html.index('id="h-headline"') : html.index('id="h-rationale"')]
    assert ">Answer</h2>" in card and shortened not in card and "…" not in card
    assert "Sell 2 cash-secured puts on AAPL: the 587.50 put AAPL140703P00587500" in card
    assert f"117,500.00{NBSP}USD, 23.5{NBSP}% of the account." in card
    # a call with a timeline row is a link to it, one without is plain text
    assert f'<a class="cite" href="#call-{SCREEN}">[{SCREEN}]</a>' in card
    assert f'<span class="cite">[{PORTFOLIO}]</span>' in card
    assert f'<span class="cite">[{IV_HV}]</span>' in card


def test_the_analyses_list_never_shows_half_a_number_or_phrase() -> None:
    from apps.api.console.views import list_answer

    whole = (
        "Put credit spread: sell 4 spreads across 2 strike pairs: 2 × AAPL140621P00620000 / "
        "AAPL140621P00605000, 2 × AAPL140621P00615000 / AAPL140621P00605000: credit 522.80 USD, "
        "max loss 4,477.20 USD and margin 5,000.00 USD in all"
    )
    assert list_answer(whole) == whole  # today's stored headline: whole, the page wraps it
    # a headline stored while they were cut at 160 characters, in the middle of "(14 DTE)"
    cut = (
        "Put credit spread: sell 4 spreads: 2 × AAPL140621P00620000 / AAPL140621P00605000, "
        "2 × AAPL140621P00615000 / AAPL140621P00605000: last trading day 2014-06-20 (1…"
    )
    shown = list_answer(cut)
    assert shown == (
        "Put credit spread: sell 4 spreads: 2 × AAPL140621P00620000 / AAPL140621P00605000, "
        "2 × AAPL140621P00615000 / AAPL140621P00605000 …"
    )
    assert list_answer(None) is None and list_answer("BUY: p 0.56 (20d)") == "BUY: p 0.56 (20d)"


def test_the_options_section_prints_prices_to_cents_with_thousands_separators() -> None:
    from apps.api.console.views import templates

    record = _sized_csp()
    record["suggestion"].update(strike=1234.5, bid=12.3, ask=12.456)
    html = templates.get_template("_options.html").render(
        options=options_view(record, None, None, kind="csp"), cited=set()
    )
    assert "strike 1,234.50," in html
    assert ">12.30 / 12.46<" in html  # bid / ask, the ask rounded to the cent
    assert ">-0.190<" in html  # delta keeps its three decimals


def test_a_csp_ladders_card_states_the_whole_position_then_the_first_rung() -> None:
    """The real AAPL 2014-06-09 ladder (tests/pipeline/plans/fixtures): the card's bold line said
    "Sell 2 AAPL140627P00090710 (a ladder: ...)", two of the first rung's contract; it now names
    every rung and the totals the headline states (57.35 + 80.35 = 137.70 USD of premium,
    9,071 + 9,000 = 18,071 USD of collateral), then labels the first rung's own strike."""
    import json
    from pathlib import Path

    from apps.api.console.views import templates

    fixture = (
        Path(__file__).parents[2] / "pipeline" / "plans" / "fixtures" / "csp_record_AAPL_2014-06-09.json"
    )
    record = json.loads(fixture.read_text())
    html = templates.get_template("_options.html").render(
        options=options_view(record, None, None, kind="csp"), cited=set()
    )
    signal = html.split('id="options-position">')[1].split("</p>")[0]
    assert signal == (
        "Sell 2 puts across 2 strikes: 1 × <code>AAPL140627P00090710</code>, 1 × "
        f"<code>AAPL140711P00090000</code>; net premium 137.70{NBSP}USD in all; collateral "
        f"18,071.00{NBSP}USD, 18.1{NBSP}% of the account"
    )
    assert "<p>The first rung, <code>AAPL140627P00090710</code>: put, strike 90.71, expiry 2014-06-27" in html


def test_a_number_never_wraps_away_from_its_unit() -> None:
    """Between a number and its unit (%, USD, DTE) a no-break space; other spaces as they were."""
    from apps.api.console.put_spread_view import keep_units

    assert keep_units("up +22.56 % in 20 sessions, 428.60 USD a contract (24 DTE)") == (
        f"up +22.56{NBSP}% in 20 sessions, 428.60{NBSP}USD a contract (24{NBSP}DTE)"
    )
    assert keep_units("95 %, USD 12 and USDT 3") == f"95{NBSP}%, USD 12 and USDT 3"
    assert keep_units(None) == "" and keep_units(12) == "12"


def test_the_direction_card_keeps_each_percentage_whole() -> None:
    """A stock analysis's Answer card: the direction's text and the calibration sentence, as the
    report writes them with a plain space, print "+22.56 %" with a no-break space."""
    from types import SimpleNamespace

    from apps.api.console.views import templates

    a = SimpleNamespace(symbol="AAPL", as_of="2014-06-09", analysis_id="a1", user_query=None,
                        status="done", error=None, headline="BUY", signal="BUY", p_outperform=None,
                        probability_text="such calls were right 61.20 % of the time", details=None,
                        chart_url=None, progress=None)  # fmt: skip
    direction = {"text": "the close is +22.56 % above its 200-day SMA", "evidence": False}
    html = templates.get_template("analysis.html").render(
        a=a, report={"direction": direction}, options=None, spread_plan=None, cited=set(),
        steps=SimpleNamespace(passes=1), finished=True, events=[], terminal=[],
    )  # fmt: skip
    card = html[html.index('id="h-headline"') : html.index('id="h-rationale"')]
    assert f"+22.56{NBSP}% above" in card and f"61.20{NBSP}% of the time" in card
    assert "22.56 %" not in card and "61.20 %" not in card
