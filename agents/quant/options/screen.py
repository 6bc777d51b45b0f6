"""The option screens: every contract of one right in the DTE window measured at its fill
(:func:`agents.quant.options.economics.measure_contract`) and checked against the floors
(:func:`~agents.quant.options.economics.failed_rules`); docs/design.md, "Option rules".

Passing contracts are ranked by score (annualised income yield over the T-bill × income per unit
of the real-world expected move), failing ones listed nearest miss first with the rules they fail.
"""

from __future__ import annotations

from typing import Any

from agents.data.options.chains import OptionChain
from agents.quant.options.economics import (
    Market,
    OptionRules,
    failed_rules,
    measure_contract,
    miss_key,
    rank_key,
)


def screen_contracts(
    chain: OptionChain, *, market: Market, rules: OptionRules
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(passing best first, failing nearest miss first)``: the contracts of ``rules.right`` with
    DTE in the rules' window, each row with ``failed`` (rule names)."""
    passing: list[dict[str, Any]] = []
    failing: list[dict[str, Any]] = []
    quotes = sorted(
        (c for c in chain.contracts if c.right == rules.right), key=lambda c: (c.expiry, c.strike)
    )
    for quote in quotes:
        if not rules.dte_min <= quote.dte(chain.quote_date) <= rules.dte_max:
            continue
        row = measure_contract(quote, market=market, rules=rules)
        row["failed"] = failed_rules(row, rules)
        (failing if row["failed"] else passing).append(row)
    passing.sort(key=rank_key)
    failing.sort(key=lambda row: miss_key(row, rules))
    return passing, failing


def failed_counts(failing: list[dict[str, Any]]) -> dict[str, int]:
    """``{rule: contracts failing it}`` over the failing rows."""
    counts: dict[str, int] = {}
    for row in failing:
        for rule in row["failed"]:
            counts[rule] = counts.get(rule, 0) + 1
    return counts
