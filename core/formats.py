"""How money prints for people, one rule for every layer: the option plans' reasons (written by
the analysts in ``agents``), their Markdown sections (``pipeline.report_format`` re-exports it) and
the console print a price or an amount in USD the same way."""

from __future__ import annotations

import math
from decimal import ROUND_HALF_UP, Decimal
from typing import Any


def money(value: Any, *, missing: str = "n/a") -> str:
    """A price or an amount in USD to cents with thousands separators, the unit left to the
    sentence or the column (``1330.3`` → ``"1,330.30"``, ``-4477.2`` → ``"-4,477.20"``, ``670`` →
    ``"670.00"``, ``0.565`` → ``"0.57"``: half a cent up, on the decimal as printed); ``missing``
    for None, a bool, NaN, an infinity or anything not a number. The option plans' premiums,
    credits, strikes, breakevens, losses and prices, in the Markdown report and in the console
    alike: options trade in cents."""
    if value is None or isinstance(value, bool):
        return missing
    try:
        number = float(value)
    except (TypeError, ValueError):
        return missing
    if not math.isfinite(number):
        return missing
    # half a cent rounds up as written (a 0.565 mid is 0.57), not as the binary float lies
    cents = Decimal(repr(number)).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
    text = f"{cents:,.2f}"
    return "0.00" if text == "-0.00" else text  # a loss rounded to nothing is no loss
