"""Cited histories: the bars of an earlier ``get_history`` call, and the digest that lets a later
stage rebuild them from the provider instead of reloading the stored result (docs/benchmarks.md,
recommendation 2).

Not a tool module: ``technical_indicators``, the chart tools and the pipeline stages (research
writes :func:`history_check` into the state, review reads :func:`history_values`) share it.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

import numpy as np
import pandas as pd

from agents.data.market.base import float_frame
from agents.tools.bars import history_window
from agents.tools.registry import ToolContext

logger = logging.getLogger("finagent.tools")


def history_frame(data: dict[str, Any]) -> pd.DataFrame:
    """Rebuild a provider-contract bar frame from a ``get_history`` result ``data``.

    Raises:
        ValueError: ``data`` has no bars.
    """
    rows = data.get("history") or []
    if not rows:
        raise ValueError("history result has no bars")
    frame = pd.DataFrame(rows)
    frame.index = pd.DatetimeIndex(pd.to_datetime(frame.pop("timestamp")), name="date")
    frame = frame.rename(columns={"adjusted_close": "adj_close"})
    return frame[["open", "high", "low", "close", "adj_close", "volume"]].astype("float64")


_HISTORY_KEYS = ("open", "high", "low", "close", "adjusted_close", "volume")
_FRAME_COLUMNS = ("open", "high", "low", "close", "adj_close", "volume")
#: The index unit ``history_frame`` gets from ``pd.to_datetime`` of ISO dates.
_STAMP_UNIT = pd.DatetimeIndex(pd.to_datetime(["2000-01-03"])).unit


def _digest(days: np.ndarray, columns: list[np.ndarray]) -> str:
    """sha256 over the bar dates (days since the epoch) and the six value columns (float64)."""
    h = hashlib.sha256(np.ascontiguousarray(days, dtype="int64").tobytes())
    for column in columns:
        h.update(np.ascontiguousarray(column, dtype="float64").tobytes())
    return h.hexdigest()[:32]


def history_check(data: dict[str, Any]) -> dict[str, Any]:
    """What a later stage needs to rebuild the bars of a ``get_history`` result ``data`` from the
    provider and prove they are the same: ``{symbol, period, interval, digest}``.

    The digest covers every bar's date and its six values exactly as stored (~0.3 ms for 500
    bars); see :func:`cited_history`.
    """
    rows = data.get("history") or []
    # map(itemgetter) and fromiter: the values float(row[key]) per row gave, in half the time;
    # unlike float(), a null (a missing volume) reads as NaN here instead of raising TypeError
    days = np.array(list(map(itemgetter("timestamp"), rows)), dtype="datetime64[D]").astype("int64")
    columns = [np.fromiter(map(itemgetter(k), rows), dtype="float64", count=len(rows)) for k in _HISTORY_KEYS]
    return {
        "symbol": data.get("symbol"),
        "period": data.get("period"),
        "interval": data.get("interval", "1d"),
        "digest": _digest(days, columns),
    }


def _as_history_frame(bars: pd.DataFrame) -> pd.DataFrame:
    """Provider bars in exactly the form :func:`history_frame` rebuilds from the stored result:
    dates at midnight (``pd.to_datetime`` unit), float64 columns, volume truncated like the
    ``int(volume)`` of ``get_history``."""
    index = pd.DatetimeIndex(bars.index)
    if index.tz is not None:
        index = index.tz_localize(None)
    index = pd.DatetimeIndex(index.normalize(), name="date").as_unit(_STAMP_UNIT)
    values = {name: bars[name].to_numpy(dtype="float64") for name in _FRAME_COLUMNS}
    values["volume"] = np.trunc(values["volume"])
    return float_frame(values, index=index)  # one float64 block, copied from the columns


def _frame_digest(frame: pd.DataFrame) -> str:
    days = frame.index.to_numpy().astype("datetime64[D]").astype("int64")
    return _digest(days, [frame[name].to_numpy() for name in _FRAME_COLUMNS])


@dataclass(frozen=True)
class CitedHistory:
    """The bars of a cited ``get_history`` call: its ``symbol``, ``interval`` and ``bars`` (the
    :func:`history_frame` form; ``None`` when the call returned no bars). ``rebuilt`` tells
    whether they came from the provider (digest checked) rather than the stored result."""

    symbol: str | None
    interval: str
    bars: pd.DataFrame | None
    rebuilt: bool = False


def _rebuild(ctx: ToolContext, history_ref: str) -> CitedHistory | None:
    """The bars of ``history_ref`` rebuilt through :func:`agents.tools.bars.fetch_bars` when the
    context holds its check (``ctx.history_checks``) and the rebuilt bars have the same digest;
    else ``None``.

    Only for local providers (embedded, csv): for a remote one (``provider.remote``) a rebuild
    could cost a network fetch and a rate-limit token, which a database read never does.
    """
    check = ctx.history_checks.get(history_ref)
    if not check or getattr(ctx.provider, "remote", False) or check.get("interval", "1d") != "1d":
        return None
    try:
        bars = history_window(
            ctx=ctx, symbol=str(check["symbol"]), period=str(check["period"]), interval="1d"
        )
        frame = _as_history_frame(bars)
    except Exception as exc:  # any doubt: the stored result is the truth
        logger.debug("history %s: rebuild failed (%s); loading the stored result", history_ref, exc)
        return None
    if frame.empty or _frame_digest(frame) != check.get("digest"):
        logger.info("history %s: rebuilt bars differ from the stored result; loading it", history_ref)
        return None
    return CitedHistory(symbol=check["symbol"], interval="1d", bars=frame, rebuilt=True)


def cited_history(ctx: ToolContext, history_ref: str) -> CitedHistory | None:
    """The bars of the ``get_history`` call ``history_ref``, or ``None`` when it is not a
    successful ``get_history`` call.

    Looked up once per context (``ctx.memo``): a call made in this context; else the bars
    rebuilt from the provider when ``ctx.history_checks`` proves them identical to the stored
    result (no 70 KB reload from the database); else the stored result (``ctx.result_data``).
    Callers must not modify ``bars``.
    """
    key = f"history:{history_ref}"
    if key in ctx.memo:
        return ctx.memo[key]
    found = None if history_ref in ctx.results else _rebuild(ctx, history_ref)
    if found is None:
        data = ctx.result_data(history_ref)
        if data is not None and "history" in data:
            found = CitedHistory(
                symbol=data.get("symbol"),
                interval=str(data.get("interval", "1d")),
                bars=history_frame(data) if data.get("history") else None,
            )
    ctx.memo[key] = found
    return found


def history_values(ctx: ToolContext, history_ref: str) -> list[float] | None:
    """Every numeric value of the stored ``get_history`` result ``history_ref`` (what
    ``agents.analysts.grounding.numeric_values`` yields for it: ``count`` and each bar's six values)
    from bars rebuilt and digest-checked by :func:`cited_history`; ``None`` when they were not
    rebuilt (the caller then indexes the stored result itself)."""
    found = cited_history(ctx, history_ref)
    if found is None or not found.rebuilt or found.bars is None:
        return None
    values = found.bars.to_numpy(dtype="float64").ravel()
    return [float(len(found.bars)), *values[np.isfinite(values)].tolist()]
