"""The report's formatting helpers, public: the Markdown report (``pipeline.report``) and the
plans' sections (``pipeline/plans/*/report.py``) format numbers and citations the same way, and
a plan's section imports them from here, not from the report that calls the plan."""

from __future__ import annotations

from typing import Any

from core.display import money, percent, ratio

__all__ = ["fmt", "money", "pct", "refs"]


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
        return ratio(value) if abs(value) < 1e6 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def pct(value: Any, digits: int = 2) -> str:
    """A fraction as a percentage to ``digits`` decimals (0.0123 → ``1.23 %``); ``n/a`` for None
    (``core.display.percent``, positional ``digits`` for the plans' sections)."""
    return percent(value, digits=digits)
