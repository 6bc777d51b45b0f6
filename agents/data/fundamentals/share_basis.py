"""Prices on the share basis traded at ``as_of``: undoing the later splits a source divided out.

The bar contract (``agents.data.market.base``) says ``close`` is as traded, but a source can
carry prices split-adjusted to its own vintage: stocknet's 2012-2017 CSVs (Yahoo downloads of
2017) show AAPL at 75.78 on 2014-03-07, when it traded at 530.44 (the 7-for-1 split of
2014-06-09 divided out), and Yahoo's ``Close`` (yfinance) is split-adjusted to the day of the
download. A report that prints such a price next to a P/E on the traded price, or a stop level
a reader compares with the price of the day, misleads. This module tells, for one symbol and
``as_of``, which later splits the source divided out and by what factor its prices must be
multiplied (volume divided) to stand in the shares of ``as_of``.

Which splits: a source that reports split history itself
(:class:`~agents.data.market.base.SplitHistorySource`: yfinance, from Yahoo's split history) is
asked, for any ticker; otherwise the hand-kept table
:data:`agents.data.fundamentals.splits.SPLIT_HISTORIES` (eight large caps) answers. So online, a
past ``as_of`` of NVDA is on the shares traded then; offline, a ticker outside the table is
served as the source gives it.

How: for each such split with ``as_of < ex_date <= the source's last bar``, the close before
the ex-date is compared with the close on it: a drop by the split's ratio means the series is
as traded there (nothing to undo), no drop means the source divided the split out (multiply by
the ratio). Splits after the source's last bar cannot be in a series that ends before them. A
move that is neither leaves the basis unknown: factor 1 with the reason, and consumers that
need the basis (the P/E) refuse; so does a source whose split history cannot be read (a
network error).

Every bar of a window ending at ``as_of`` is multiplied by the same factor, so every ratio
(returns, RSI, ADX, %b, the scorer's sign comparisons, risk per share as a fraction) is
unchanged; only levels in USD (prices, SMA/Bollinger/ATR levels, support/resistance, stops)
move to the traded basis, and volume to the traded share count.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, timedelta
from fractions import Fraction
from typing import Final

import pandas as pd

from agents.data.fundamentals.earnings import calendar_symbol
from agents.data.fundamentals.splits import SPLIT_HISTORIES, Split
from agents.data.market.base import MarketDataProvider, ProviderError, SplitHistorySource

#: A close-to-close move within this fraction of a split's ratio counts as the split showing in
#: the series (raw prices); within this fraction of 1, as already divided out (adjusted prices).
#: Why 0.25: a large cap's close rarely moves 25 % in a session, and every split in the table is
#: at least 2-for-1 (a 2x jump), so the two cases cannot be confused; a move outside both leaves
#: the basis unknown rather than guessed.
JUMP_TOLERANCE: Final = 0.25

#: ``(symbol, start, end) -> bars`` in the provider contract; lets a caller route the look-ups
#: through its cache and rate limit (``agents.tools.bars``).
BarsFetch = Callable[[str, date, date], pd.DataFrame]

_PRICE_COLUMNS: Final = ("open", "high", "low", "close", "adj_close")


@dataclass(frozen=True)
class ShareBasis:
    """What it takes to put a source's prices at ``as_of`` on the shares traded then.

    Attributes:
        factor: multiply prices by it (divide volume) to get the as-traded basis; 1 = already so.
        undone: the splits the source had divided out (each ex-date after ``as_of``).
        reason: why the basis could not be told (then ``factor`` is 1), else None.
    """

    factor: Fraction = Fraction(1)
    undone: tuple[Split, ...] = field(default=())
    reason: str | None = None

    def as_dict(self) -> dict[str, object]:
        """JSON-safe ``{factor: "7", undone: [{ex_date, ratio, source}], reason}`` (USD unaffected)."""
        return {
            "factor": str(self.factor),
            "undone": [
                {"ex_date": s.ex_date.isoformat(), "ratio": str(s.ratio), "source": s.source}
                for s in self.undone
            ],
            "reason": self.reason,
        }


def split_history_symbol(symbol: str, as_of: date) -> str:
    """The ticker :data:`SPLIT_HISTORIES` files ``symbol``'s splits under at ``as_of`` (the
    earnings calendar's aliases: FB → META; GOOG → GOOGL before 2014-04-03)."""
    return calendar_symbol(symbol, as_of)[0]


def provider_splits(provider: SplitHistorySource, symbol: str) -> tuple[Split, ...]:
    """Every split of ``symbol`` the provider reports, as :class:`Split` rows citing the
    provider's history (oldest first). Raises the provider's errors."""
    ref = provider.split_source_ref(symbol=symbol)
    return tuple(
        Split(event.ex_date, event.ratio, f"{ref}: {_ratio_text(event.ratio)} split")
        for event in provider.split_events(symbol=symbol)
    )


def _ratio_text(ratio: Fraction) -> str:
    """``4-for-1``, ``3-for-2``, ``1-for-10`` (a reverse split)."""
    return f"{ratio.numerator}-for-{ratio.denominator}"


def source_share_basis(
    provider: MarketDataProvider,
    symbol: str,
    as_of: date,
    *,
    bars: BarsFetch | None = None,
    last: date | None = None,
) -> ShareBasis:
    """The later splits ``provider``'s prices at ``as_of`` already divide out (module docstring):
    the provider's own split history when it reports one, else the table's.

    Args:
        provider: the market-data provider whose bars are checked.
        symbol: ticker as the provider knows it.
        as_of: the analysis date; only splits with ``as_of < ex_date`` matter.
        bars: how to read bars around an ex-date (default ``provider.bars``).
        last: the provider's last bar (default ``provider.latest_date``; an online source passes
            today, since its series reaches today).
    Returns:
        :class:`ShareBasis`; never raises for a provider error (it becomes the ``reason``).
    """
    if isinstance(provider, SplitHistorySource):
        try:
            later = [s for s in provider_splits(provider, symbol) if s.ex_date > as_of]
        except ProviderError as exc:
            return ShareBasis(reason=f"cannot read {symbol}'s split history to check its split basis: {exc}")
    else:
        history = SPLIT_HISTORIES.get(split_history_symbol(symbol, as_of))
        later = [s for s in history.splits if s.ex_date > as_of] if history is not None else []
    if not later:
        return ShareBasis()
    read = bars or (lambda sym, start, end: provider.bars(symbol=sym, start=start, end=end))
    try:
        last = last or provider.latest_date(symbol=symbol)
    except ProviderError as exc:
        return ShareBasis(reason=f"cannot read {symbol}'s bars to check its split basis: {exc}")
    factor, undone = Fraction(1), []
    for split in later:
        if split.ex_date > last:
            continue
        try:
            frame = read(symbol, split.ex_date - timedelta(days=10), split.ex_date + timedelta(days=5))
        except ProviderError as exc:
            return ShareBasis(reason=f"cannot read {symbol}'s bars around {split.ex_date}: {exc}")
        before = frame[frame.index < pd.Timestamp(split.ex_date)]["close"]
        on = frame[frame.index >= pd.Timestamp(split.ex_date)]["close"]
        if before.empty or on.empty:
            return ShareBasis(reason=f"{symbol}'s bars lack the sessions around the split of {split.ex_date}")
        jump = float(before.iloc[-1]) / float(on.iloc[0])
        if abs(jump / float(split.ratio) - 1) < JUMP_TOLERANCE:
            continue  # the split shows: as traded
        if abs(jump - 1) < JUMP_TOLERANCE:
            factor *= split.ratio
            undone.append(split)
            continue
        return ShareBasis(
            reason=(
                f"{symbol}'s close moved by {jump:.2f}x across the {split.ratio} split of {split.ex_date}: "
                "its split basis cannot be told"
            )
        )
    return ShareBasis(factor=factor, undone=tuple(undone))


def rebase(frame: pd.DataFrame, basis: ShareBasis) -> pd.DataFrame:
    """``frame`` (provider-contract bars) with prices × ``basis.factor`` and volume ÷ it: the
    shares traded at ``as_of``. Returns ``frame`` itself when the factor is 1 (no copy)."""
    if basis.factor == 1:
        return frame
    f = float(basis.factor)
    out = frame.copy()
    for column in _PRICE_COLUMNS:
        if column in out.columns:
            out[column] = out[column] * f
    if "volume" in out.columns:
        out["volume"] = out["volume"] / f
    return out
