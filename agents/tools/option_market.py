"""Chain loading and pricing inputs of the option tools (:mod:`agents.tools.options`): the chain
quoted on ``ctx.as_of`` and its citation, the spot, rate and dividend yield a chain is priced at
(:func:`market_of`), the real-world model of a screen (:func:`pricing_market`), the provider's
closes and bars, and at-the-money IV and HV (:func:`atm_term`, :func:`atm_iv`, :func:`hv_of`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import pandas as pd
from pydantic import Field

from agents.data.market.base import ProviderError
from agents.data.options.chains import ChainFormatError, ChainNotFoundError, OptionChain, OptionQuote
from agents.data.routing import option_chain_source
from agents.tools.bars import history_window
from agents.tools.envelope import ErrorCode
from agents.tools.registry import ToolContext, ToolInputError
from core.display import percent

if TYPE_CHECKING:
    from agents.quant.options.economics import Market
    from agents.quant.options.parity import ParitySpot

# The pricing modules are imported inside the tools: vollib pulls in scipy (~0.5 s), and every
# worker and CLI process registers all tools (tests/agents/tools/test_catalog.py).

#: The most contracts one ``get_option_greeks`` call takes: keeps the envelope small for an LLM.
MAX_CONTRACTS = 50
#: The most rows a chain or filter envelope lists (a full GOOG put chain in 14–45 DTE has ~300).
MAX_ROWS = 400
#: ``OptionChain.source`` of an online Yahoo chain (agents.data.options.yahoo.SOURCE; not imported: yfinance).
YAHOO_SOURCE = "yahoo_online"
_OCC = re.compile(r"^(?P<root>[A-Z]{1,6})(?P<yymmdd>\d{6})(?P<right>[CP])(?P<strike>\d{8})$")

Contract = Annotated[str, Field(pattern=_OCC.pattern, description="OCC symbol, e.g. GOOG160129P00700000")]


def file_ref(chain: OptionChain) -> str:
    """The citation of a chain's snapshot file(s): ``options-file:<folder>/<name>``; an online
    chain cites its request and quote day: ``yahoo:v7/finance/options/<SYM>@<YYYY-MM-DD>``."""
    if chain.source == YAHOO_SOURCE:
        return f"{chain.path}@{chain.quote_date.isoformat()}"
    return ";".join(f"options-file:{Path(p).parent.name}/{Path(p).name}" for p in chain.path.split(";"))


def load_chain(ctx: ToolContext, symbol: str, *, dte_max: int | None = None) -> OptionChain:
    """The chain of ``symbol`` quoted on ``ctx.as_of``: from ``FINAGENT_OPTIONS_DIR`` when set,
    else online from Yahoo Finance when the data provider is ``yfinance``
    (:mod:`agents.data.options.yahoo`: expiries up to ``max(dte_max, FINAGENT_OPTIONS_DTE_MAX)`` days);
    the choice is the routing table's (:func:`agents.data.routing.option_chain_source`).

    Raises:
        ToolInputError: ``NOT_CONFIGURED`` with neither source; ``NO_DATA`` when no chain was
            quoted on ``as_of`` or the file is malformed.
        ProviderError: the online source's errors (mapped to their codes by the registry).
    """
    source = option_chain_source(ctx.settings, ctx.provider)
    horizon = max(dte_max or 0, ctx.settings.options.dte_max)
    # an online chain holds only the expiries asked for: its horizon is part of the key
    by_horizon = source is not None and source.by_horizon
    key = f"option-chain:{symbol}:{ctx.as_of}" + (f":{horizon}" if by_horizon else "")
    if key in ctx.memo:
        return ctx.memo[key]
    if source is None:
        raise ToolInputError(
            "no option chains configured (set FINAGENT_OPTIONS_DIR, or use the yfinance data provider)",
            code=ErrorCode.NOT_CONFIGURED,
        )
    try:
        chain = source.chain(symbol=symbol, as_of=ctx.as_of, dte_max=horizon)
    except (ChainNotFoundError, ChainFormatError) as exc:
        raise ToolInputError(str(exc), code=ErrorCode.NO_DATA) from None
    ctx.memo[key] = chain
    return chain


@dataclass(frozen=True)
class MarketInputs:
    """What every option number of a chain is priced at: ``spot`` (USD) and where it came from,
    ``r`` and ``q`` (continuous, fraction/year) and theirs, the quoted underlying and the
    put-call-parity spot (``None`` when the chain has no usable pairs)."""

    spot: float
    spot_source: str
    r: float
    r_source: str
    q: float
    quoted: float | None
    parity: ParitySpot | None

    def header(self) -> dict[str, Any]:
        """The fields of these inputs in a tool's data."""
        parity = None
        if self.parity is not None:
            parity = {
                "spot": round(self.parity.spot, 4),
                "expiry": self.parity.expiry.isoformat(),
                "dte": self.parity.dte,
                "strikes": list(self.parity.strikes),
            }
        return {
            "underlying_price": round(self.spot, 4),
            "underlying_source": self.spot_source,
            "underlying_quoted": self.quoted,
            "parity_spot": parity,
            "risk_free_rate": round(self.r, 6),
            "risk_free_rate_source": self.r_source,
            "dividend_yield": self.q,
        }


def rate_of(ctx: ToolContext, day: date) -> tuple[float, str]:
    """``(r, source)``: the ``options.risk_free_rate`` setting when set, else the 3-month T-bill
    of ``day`` from the shipped FRED DTB3 series (:mod:`agents.quant.options.rates`); after the
    series' end, its last observation, with its date said. Raises ToolInputError ``NO_DATA``
    before the series starts."""
    from agents.quant.options.rates import RateUnavailableError, risk_free_rate, series_end

    if ctx.settings.options.risk_free_rate is not None:
        return ctx.settings.options.risk_free_rate, "setting FINAGENT_OPTIONS_RISK_FREE_RATE"
    try:
        rate = risk_free_rate(day)
    except RateUnavailableError as exc:
        last = series_end()
        if day <= last:
            raise ToolInputError(str(exc), code=ErrorCode.NO_DATA) from None
        rate = risk_free_rate(last)  # the newest known rate, dated, beats a silent 0
    return rate.rate, f"{rate.source} {rate.discount_yield} % on {rate.observed.isoformat()}"


def market_of(ctx: ToolContext, chain: OptionChain) -> MarketInputs:
    """Spot, rate and dividend yield to price ``chain`` at.

    The spot is the chain's own underlying price (else the provider's close on the quote day)
    unless that print is marked stale (after hours) or differs from the put-call-parity spot of
    the chain's own mids (:mod:`agents.quant.options.parity`) by more than
    ``options.spot_tolerance``: then the parity spot, which is what the option quotes were made
    against. Raises ToolInputError ``NO_DATA`` when there is neither a quote nor a parity spot.
    """
    from agents.quant.options.parity import ParityError, parity_spot

    r, r_source = rate_of(ctx, chain.quote_date)
    q = ctx.settings.options.dividend_yield
    quoted, quoted_source = _quoted_spot(ctx, chain)
    try:
        parity: ParitySpot | None = parity_spot(chain, r=r, q=q)
    except ParityError:
        parity = None
    tolerance = ctx.settings.options.spot_tolerance
    if parity is not None:
        parity_note = (
            f"put-call parity on the {parity.expiry.isoformat()} mids ({len(parity.strikes)} strikes)"
        )
        if quoted is None:
            return MarketInputs(
                parity.spot, f"{parity_note}; no underlying quote", r, r_source, q, None, parity
            )
        if chain.underlying_stale:
            return MarketInputs(
                parity.spot, f"{parity_note}; quote {quoted} not used: {chain.underlying_stale}",
                r, r_source, q, quoted, parity,
            )  # fmt: skip
        gap = abs(quoted / parity.spot - 1.0)
        if gap > tolerance:
            differs = f"differs by {percent(gap)} (> {percent(tolerance)})"
            return MarketInputs(
                parity.spot, f"{parity_note}; quote {quoted} {differs}",
                r, r_source, q, quoted, parity,
            )  # fmt: skip
    if quoted is None:
        raise ToolInputError(
            f"the {chain.source} chain has no underlying price, no {chain.symbol} bar on "
            f"{chain.quote_date} and no call/put pairs to imply one",
            code=ErrorCode.NO_DATA,
        )
    return MarketInputs(quoted, quoted_source, r, r_source, q, quoted, parity)


def _quoted_spot(ctx: ToolContext, chain: OptionChain) -> tuple[float | None, str]:
    # the chain's own underlying print, else the provider's close of the quote day; a symbol the
    # bar source does not know (a chain without history) has none: the parity spot then prices it
    if chain.underlying_price:
        return chain.underlying_price, "chain underlying close"
    try:
        bars = history_window(ctx=ctx, symbol=chain.symbol, period="5d", interval="1d")
    except ProviderError as exc:
        if exc.transient:
            raise
        return None, "none"
    except ToolInputError:
        return None, "none"
    if bars.empty or bars.index[-1].date() != chain.quote_date:
        return None, "none"
    return float(bars["close"].iloc[-1]), f"provider close {chain.quote_date}"


def closes_of(ctx: ToolContext, symbol: str, *, period: str = "2y") -> tuple[list[float], str | None]:
    """The adjusted daily closes of ``symbol`` up to ``ctx.as_of`` (oldest first) and ``None``, or
    ``[]`` and why there are none (the symbol has no price history here)."""
    try:
        bars = history_window(ctx=ctx, symbol=symbol, period=period, interval="1d")
    except ProviderError as exc:
        if exc.transient:
            raise
        return [], f"{exc.code}: {exc}"
    except ToolInputError as exc:
        return [], str(exc)
    if bars.empty:
        return [], f"no {symbol} bars up to {ctx.as_of}"
    return bars["adj_close"].astype("float64").tolist(), None


def bars_of(ctx: ToolContext, symbol: str, *, period: str = "2y") -> tuple[pd.DataFrame | None, str | None]:
    """The daily bars of ``symbol`` up to ``ctx.as_of`` (``open..adj_close``, the shares traded on
    ``as_of``) and ``None``, or ``None`` and why there are none (no price history here)."""
    try:
        bars = history_window(ctx=ctx, symbol=symbol, period=period, interval="1d")
    except ProviderError as exc:
        if exc.transient:
            raise
        return None, f"{exc.code}: {exc}"
    except ToolInputError as exc:
        return None, str(exc)
    if bars.empty:
        return None, f"no {symbol} bars up to {ctx.as_of}"
    return bars, None


def pricing_market(
    ctx: ToolContext, chain: OptionChain, inputs: MarketInputs
) -> tuple[Market, dict[str, Any]]:
    """The :class:`~agents.quant.options.economics.Market` a screen prices at, and the header of
    its real-world model (:func:`agents.quant.options.real_world.real_world_model`, built once per
    symbol, day and spot in the stage's memo, for the sessions to each of the chain's expiries):
    ``{source, sigma_annual (20 sessions, a year's scale)}`` or ``{source: null, error}`` without
    history."""
    from agents.data.market_calendar import sessions_between
    from agents.quant.options.economics import Market
    from agents.quant.options.real_world import annual_sigma, real_world_model

    key = f"real-world:{chain.symbol}:{ctx.as_of}:{inputs.spot}"
    if key not in ctx.memo:
        bars, why = bars_of(ctx, chain.symbol)
        model = None
        if bars is not None:
            ends = {c.last_trading_day for c in chain.contracts if c.dte(chain.quote_date) >= 1}
            wanted = {sessions_between(chain.quote_date, e) for e in ends}
            try:
                model = real_world_model(
                    bars=bars, symbol=chain.symbol, as_of=ctx.as_of, spot=inputs.spot,
                    horizons=tuple(sorted(h for h in wanted if 1 <= h <= 250)),
                )  # fmt: skip
            except ValueError as exc:
                why = str(exc)
        ctx.memo[key] = (model, why)
    model, why = ctx.memo[key]
    info: dict[str, Any]
    if model is not None:
        info = {"source": model.source, "sigma_annual": round(annual_sigma(model, 20), 4)}
    else:
        info = {"source": None, "error": f"no real-world probabilities: {why}"}
    market = Market(spot=inputs.spot, r=inputs.r, q=inputs.q, quote_date=chain.quote_date, real_world=model)
    return market, info


def _chain_header(chain: OptionChain, market: MarketInputs) -> dict[str, Any]:
    return {
        "symbol": chain.symbol,
        "quote_date": chain.quote_date.isoformat(),
        "source": chain.source,
        **market.header(),
    }


def _iv_of(chain: OptionChain, quote: OptionQuote, market: Market) -> float | None:
    from agents.quant.options.pricing import PricingError, greeks_from_price

    try:
        g = greeks_from_price(
            right=quote.right, price=quote.mid, spot=market.spot, strike=quote.strike,
            dte=quote.dte(chain.quote_date), r=market.r, q=market.q,
        )  # fmt: skip
    except PricingError:
        return None
    return g.iv


def atm_term(chain: OptionChain, *, market: Market) -> list[dict[str, Any]]:
    """At-the-money IV of every expiry with DTE ≥ 1: ``{expiry, last_trading_day, dte, strike, iv,
    put_iv, call_iv}`` (the mean IV from the mids of the put and the call at the strike nearest the
    spot; an expiry without one solved is left out), nearest expiry first."""
    out = []
    expiries = sorted({c.expiry for c in chain.contracts if c.dte(chain.quote_date) >= 1})
    for expiry in expiries:
        pairs = [c for c in chain.contracts if c.expiry == expiry]
        strike = min({c.strike for c in pairs}, key=lambda k: abs(k - market.spot))
        ivs: dict[str, float] = {}
        for c in pairs:
            if c.strike == strike and (iv := _iv_of(chain, c, market)) is not None:
                ivs[c.right] = iv
        if ivs:
            first = pairs[0]
            out.append(
                {
                    "expiry": expiry.isoformat(),
                    "last_trading_day": first.last_trading_day.isoformat(),
                    "dte": first.dte(chain.quote_date),
                    "strike": strike,
                    "iv": round(sum(ivs.values()) / len(ivs), 4),
                    "put_iv": round(ivs["put"], 4) if "put" in ivs else None,
                    "call_iv": round(ivs["call"], 4) if "call" in ivs else None,
                }
            )
    return out


def atm_iv(chain: OptionChain, *, market: Market, dte_min: int, dte_max: int) -> dict[str, Any]:
    """At-the-money IV (:func:`atm_term`) of the nearest expiry with DTE in [dte_min, dte_max]
    (else the nearest with DTE ≥ 1). Raises ToolInputError ``NO_DATA`` when none is solved."""
    term = atm_term(chain, market=market)
    inside = [e for e in term if dte_min <= e["dte"] <= dte_max]
    if inside or term:
        return (inside or term)[0]
    raise ToolInputError(
        f"no at-the-money IV can be solved from the {chain.quote_date} chain", code=ErrorCode.NO_DATA
    )


def hv_of(ctx: ToolContext, symbol: str, period: int) -> dict[str, Any]:
    """HV(``period``) from the provider's adjusted closes up to ``ctx.as_of`` (point-in-time
    ``adj_close``). Returns ``{hv, period, bars_used, last_bar}``. Raises ToolInputError
    ``NO_DATA`` when there are too few bars or the symbol has no history."""
    from agents.quant.options.pricing import historical_volatility

    closes, why = closes_of(ctx, symbol, period="1y")
    if len(closes) < period + 1:
        raise ToolInputError(
            why or f"{len(closes)} daily bars of {symbol} up to {ctx.as_of}; HV({period}) needs {period + 1}",
            code=ErrorCode.NO_DATA,
        )
    bars = history_window(ctx=ctx, symbol=symbol, period="1y", interval="1d")
    return {
        "hv": round(historical_volatility(closes, period=period), 4),
        "period": period,
        "bars_used": period + 1,
        "last_bar": bars.index[-1].date().isoformat(),
    }
