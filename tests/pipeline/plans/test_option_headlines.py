"""The option plans' verdicts and sections as a user reads them: money to cents with thousands
separators, and a headline that states the whole decision its section sizes (every rung of a
ladder, the totals) with no figure the section does not print. Records are real ones, stored by
embedded runs on the Lean AAPL chains (fixtures/): a cash-secured put over two strikes (AAPL
2014-06-09), a put credit spread of 4 spreads over two strike pairs and one covered call (AAPL
2014-06-06)."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest

from core.display import usd
from pipeline.plans.option import report as option_report
from pipeline.plans.put_spread import report as spread_report
from pipeline.report_format import money

FIXTURES = Path(__file__).parent / "fixtures"
#: A number as a reader sees one: not part of a contract symbol or a citation id.
NUMBER = re.compile(r"(?<![\w.])[-−]?\d[\d,]*(?:\.\d+)?(?![\w])")


def _record(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / f"{name}.json").read_text())
    return data


def _numbers(text: str) -> set[str]:
    return {m.group(0).lstrip("-−") for m in NUMBER.finditer(text)}


def _headline(module: Any, record: dict[str, Any]) -> str:
    """The verdict of a suggested record (a str: these records have one)."""
    line = module.headline(record)
    assert isinstance(line, str)
    return line


def _row(section: list[str], label: str) -> list[str]:
    """The cells of the table row whose first cell is ``label``."""
    for line in section:
        cells = [c.strip() for c in line.strip("|").split("|")]
        if line.startswith("|") and cells[0] == label:
            return cells
    raise AssertionError(f"no row {label!r} in the section")


def test_money_prints_usd_to_cents_with_thousands_separators() -> None:
    assert money(1234.5) == "1,234.50"
    assert money(-4477.2) == "-4,477.20"
    assert money(670) == "670.00" and money(90.1365) == "90.14"
    assert money(-0.001) == "0.00"  # no "-0.00" loss
    assert money(2.675) == usd(2.675)  # the product's one rounding rule, the one grounding reads
    assert money(float("nan")) == "n/a" and money(float("inf")) == "n/a"
    assert money(None) == "n/a" and money(True) == "n/a" and money("x", missing="–") == "–"
    assert money("12.5") == "n/a"  # a string is not a number


CASES = [
    ("csp_record_AAPL_2014-06-09", option_report),
    ("covered_call_record_AAPL_2014-06-06", option_report),
    ("put_spread_record_AAPL_2014-06-06", spread_report),
]


@pytest.mark.parametrize(("name", "module"), CASES, ids=[c[0] for c in CASES])
def test_every_number_in_a_headline_is_printed_in_its_section(name: str, module: Any) -> None:
    record = _record(name)
    headline = _headline(module, record)
    section = "\n".join(module.section(record))
    missing = _numbers(headline) - _numbers(section)
    assert not missing, f"{missing} in the headline but not in the section:\n{headline}"


def test_a_spread_ladder_headline_states_every_rung_and_the_totals() -> None:
    record = _record("put_spread_record_AAPL_2014-06-06")
    rungs = record["sizing"]["rungs"]
    assert len(rungs) == 2 and sum(r["contracts"] for r in rungs) == 4
    headline = _headline(spread_report, record)
    assert headline.startswith("**Put credit spread: sell 4 spreads across 2 strike pairs: ")
    assert all(f"{r['contracts']} × {r['contract']} / {r['long_contract']}" in headline for r in rungs)
    # the totals are the rungs' sums, and the sizing table prints the same in its "in all" column
    credit, max_loss, margin = (sum(r[k] for r in rungs) for k in ("net_premium", "max_loss", "collateral"))
    assert (credit, max_loss, margin) == pytest.approx((522.8, 4477.2, 5000.0))
    assert "credit 522.80 USD, max loss 4,477.20 USD and margin 5,000.00 USD in all" in headline
    section = spread_report.section(record)
    assert _row(section, "credit")[2] == "522.80" and _row(section, "max loss")[2] == "4,477.20"
    assert _row(section, "margin (width × 100)")[2] == "5,000.00"
    # the first rung's own figures are labelled as such, to cents
    assert "the first rung, the 620.00 / 605.00 spread" in headline
    assert "credit 169.70 USD on a width of 15.00, max loss 1,330.30 USD a spread" in headline
    # and the ladder's rungs are in the section, not only in the headline
    assert "| 2 | AAPL140621P00615000 / AAPL140621P00605000 | 615.00 / 605.00 |" in "\n".join(section)


def test_a_single_rung_of_several_spreads_states_the_totals_and_each() -> None:
    record = copy.deepcopy(_record("put_spread_record_AAPL_2014-06-06"))
    first = record["sizing"]["rungs"][0]
    record["sizing"].update(
        rungs=[first],
        contracts=2,
        net_premium=first["net_premium"],
        max_loss=first["max_loss"],
        collateral=first["collateral"],
    )
    headline = _headline(spread_report, record)
    assert headline.startswith("**Put credit spread: sell 2 AAPL140621P00620000 / AAPL140621P00605000**")
    totals = "credit 339.40 USD, max loss 2,660.60 USD and margin 3,000.00 USD in all"
    assert f"{totals}; each, the 620.00 / 605.00 spread" in headline


def test_a_csp_ladder_headline_states_every_rung_and_the_totals() -> None:
    record = _record("csp_record_AAPL_2014-06-09")
    rungs = record["sizing"]["rungs"]
    headline = _headline(option_report, record)
    assert headline.startswith(
        "**Cash-secured put: sell 2 puts across 2 strikes: 1 × AAPL140627P00090710, 1 × AAPL140711P00090000**"
    )
    assert sum(r["net_premium"] for r in rungs) == pytest.approx(137.7)
    assert "net premium 137.70 USD in all; collateral 18,071.00 USD, 18.1 % of the account" in headline
    assert "the first rung, AAPL140627P00090710: strike 90.71" in headline
    section = option_report.section(record)
    assert _row(section, "net premium")[1:] == ["57.35", "137.70"]
    assert _row(section, "collateral")[1:] == ["9,071.00", "18,071.00"]


def _bold(section: list[str]) -> str:
    """The section's bold "Sell ..." line."""
    return next(line for line in section if line.startswith("**Sell "))


def test_a_csp_ladders_bold_line_states_the_whole_position_as_its_headline_does() -> None:
    """The section's bold line named the first rung's strike and expiry alone under "Sell 2 puts
    across 2 strikes": it now states the totals the headline and the sizing table state (the
    two rungs' net premiums 57.35 + 80.35 = 137.70, collateral 9,071 + 9,000 = 18,071 USD)
    before the first rung's own figures."""
    record = _record("csp_record_AAPL_2014-06-09")
    line = _bold(option_report.section(record))
    whole = "net premium 137.70 USD in all; collateral 18,071.00 USD, 18.1 % of the account"
    assert line.startswith(
        "**Sell 2 puts across 2 strikes: 1 × AAPL140627P00090710, 1 × AAPL140711P00090000**: "
        f"{whole}; the first rung, AAPL140627P00090710: put, strike 90.71, expiry 2014-06-27 "
        "(last trading day 2014-06-27, 18 DTE)"
    ), line
    assert whole in _headline(option_report, record)


def test_a_spread_ladders_bold_line_states_the_whole_position_as_its_headline_does() -> None:
    record = _record("put_spread_record_AAPL_2014-06-06")
    line = _bold(spread_report.section(record))
    whole = "credit 522.80 USD, max loss 4,477.20 USD and margin 5,000.00 USD in all"
    assert line.startswith(
        "**Sell 4 spreads across 2 strike pairs: 2 × AAPL140621P00620000 / AAPL140621P00605000, "
        f"2 × AAPL140621P00615000 / AAPL140621P00605000**: {whole}; the first rung, the 620.00 / "
        "605.00 spread, expiry 2014-06-21 (last trading day 2014-06-20, 14 DTE)"
    ), line
    assert whole in _headline(spread_report, record)


def test_one_contract_keeps_its_bold_line() -> None:
    record = _record("covered_call_record_AAPL_2014-06-06")
    assert record["sizing"]["contracts"] == 1
    line = _bold(option_report.section(record))
    s = record["suggestion"]
    assert line.startswith(
        f"**Sell 1 {s['contract']}**: call, strike {s['strike']:,.2f}, expiry {s['expiry']} (last trading "
        f"day {s['last_trading_day']}, {s['dte']} DTE) `["
    ), line


def test_option_prices_print_to_cents_and_other_figures_keep_their_precision() -> None:
    section = option_report.section(_record("csp_record_AAPL_2014-06-09"))
    assert _row(section, "bid / ask / mid (spread)")[1] == "0.58 / 0.62 / 0.60 (0.04, 6.7 %)"
    assert _row(section, "breakeven at expiry")[1] == "90.14"  # 90.1365 a share
    assert _row(section, "±1σ move to expiry, real-world / IV vs strike distance")[1] == (
        "±3.87 / ±4.31 vs 2.99 (0.7735σ)"
    )
    # delta and IV keep theirs; theta a contract is money
    assert _row(section, "IV (from the mid) / delta / theta a day (per contract)")[1] == (
        "20.7 % / -0.2331 / 3.66 USD earned"
    )
    text = "\n".join(section)
    assert "Priced at spot 93.70 (" in text and "put-call parity 93.66 on 2014-06-13" in text
    assert "rate 0.04 % (" in text
    alternative = (
        "| AAPL140711P00090000 | 2014-07-11 | 90.00 | 32 | 0.81 / 0.87 | 630 | -0.243 | 0.81 | 80.35 |"
    )
    assert any(line.startswith(alternative) for line in section)
    # no price in the option tables has more than two decimals (delta, ratios and the income per
    # unit of the move are not prices)
    not_prices = ("delta", "IV", "income per unit", "at-the-money IV", "±1σ")
    for line in section:
        if line.startswith("| ") and not line.startswith(("| contract |", "| window |")):
            if any(line.startswith(f"| {label}") for label in not_prices) or "| AAPL14" in line:
                continue
            assert not re.search(r"\d\.\d{3,}", line), line


def test_the_charts_event_labels_print_the_dividend_to_the_cent_and_the_split_ratio_whole() -> None:
    """The real AAPL 2014-06-09 csp record with the factor file's events of its window added as
    get_corporate_events returns them (the 2014-08-07 dividend 0.47 = 3.29 / 7 on today's shares,
    a float that does not print as 0.47; the 7:1 split as 7.0): the chart labels them as the
    reasons do."""
    from pipeline.plans.option.chart import overlay

    record = copy.deepcopy(_record("csp_record_AAPL_2014-06-09"))
    record["events"] = {
        "dividend": "flagged",
        "split": "noticed",
        "events": [
            {"kind": "split", "ex_date": "2014-06-09", "ratio": 7.0},
            {"kind": "dividend", "ex_date": "2014-08-07", "amount": 3.29 / 7},
        ],
    }
    assert str(3.29 / 7) != "0.47"
    state = {"analysis_type": "csp", "plan_result": record}
    labels = [e["label"] for e in overlay(state, "csp")["option"]["events"] if e["label"] != "earnings"]
    assert "split 7:1" in labels and "ex-div 0.47" in labels, labels
