"""The report's formatting helpers, public: the Markdown report (``pipeline.report``) and the
plans' sections (``pipeline/plans/*/report.py``) format numbers and citations the same way, and
a plan's section imports them from here, not from the report that calls the plan."""

from __future__ import annotations

import math
from decimal import ROUND_HALF_UP, Decimal
from typing import Any


def refs(source_refs: list[str] | None) -> str:
    """The citations ``source_refs`` as inline code, space-separated (``[id]`` each); empty
    ids dropped, ``""`` for none."""
    return " ".join(f"`[{r}]`" for r in (source_refs or []) if r)


def fmt(value: Any) -> str:
    """A value for a report cell: ``n/a`` for None; a float to at most 4 decimals without
    trailing zeros (thousands separators; no decimals from 1e6 on); an int with thousands
    separators; anything else as ``str``."""
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:,.4f}".rstrip("0").rstrip(".") if abs(value) < 1e6 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


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


def pct(value: Any, digits: int = 2) -> str:
    """A fraction as a percentage (0.0123 → ``1.23 %``); ``n/a`` for None."""
    return "n/a" if value is None else f"{value * 100:.{digits}f} %"
