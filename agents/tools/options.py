"""Option tools (docs/design.md, "Option tools"): ``get_option_chain``, ``get_option_greeks``,
``calculate_iv_hv``, ``calculate_roc`` and ``filter_options``.

Chains come from the offline snapshots in ``FINAGENT_OPTIONS_DIR`` (:mod:`agents.data.options.chains`:
Lean end-of-day, CBOE delayed quotes, yfinance captures), point in time: the chain quoted on
``ctx.as_of``; none → ``NO_DATA`` naming the dates that exist; folder unset → ``NOT_CONFIGURED``.
Numbers are computed with vollib (:mod:`agents.quant.options.pricing`): IV from the mid, BSM greeks,
POP, ROC, at the inputs :func:`market_of` chooses: r from the 3-month T-bill series (or the
setting), q from the settings, and the chain's own underlying close (the strikes' units; a chain
without one uses the provider's close on ``as_of``) unless it is after hours or off the
put-call-parity spot of the chain's mids by more than ``options_spot_tolerance``.
Each output cites the snapshot file (``options-file:<name>``).

Without a folder and with the ``yfinance`` data provider, chains come online from Yahoo Finance
(:mod:`agents.data.options.yahoo`), used only when quoted on ``ctx.as_of`` (a quote of now).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from agents.data.options.chains import ChainFormatError, ChainNotFoundError, OptionChain
from agents.data.routing import option_chain_source
from agents.tools.bars import history_window
from agents.tools.envelope import ErrorCode
from agents.tools.fields import Symbol
from agents.tools.registry import ToolContext, ToolInputError, ToolOutput, register

if TYPE_CHECKING:
    from agents.quant.options.parity import ParitySpot
    from agents.quant.options.screen import CspRules

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
    (:mod:`agents.data.options.yahoo`: expiries up to ``max(dte_max, FINAGENT_CSP_DTE_MAX)`` days);
    the choice is the routing table's (:func:`agents.data.routing.option_chain_source`).

    Raises:
        ToolInputError: ``NOT_CONFIGURED`` with neither source; ``NO_DATA`` when no chain was
            quoted on ``as_of`` or the file is malformed.
        ProviderError: the online source's errors (mapped to their codes by the registry).
    """
    source = option_chain_source(ctx.settings, ctx.provider)
    horizon = max(dte_max or 0, ctx.settings.options.csp_dte_max)
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
    """``(r, source)``: the ``options_risk_free_rate`` setting when set, else the 3-month T-bill
    of ``day`` from the shipped FRED DTB3 series (:mod:`agents.quant.options.rates`); after the
    series' end, its last observation, with its date said. Raises ToolInputError ``NO_DATA``
    before the series starts."""
    from agents.quant.options.rates import RateUnavailableError, risk_free_rate, series_end

    if ctx.settings.options.options_risk_free_rate is not None:
        return ctx.settings.options.options_risk_free_rate, "setting FINAGENT_OPTIONS_RISK_FREE_RATE"
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
    ``options_spot_tolerance``: then the parity spot, which is what the option quotes were made
    against. Raises ToolInputError ``NO_DATA`` when there is neither a quote nor a parity spot.
    """
    from agents.quant.options.parity import ParityError, parity_spot

    r, r_source = rate_of(ctx, chain.quote_date)
    q = ctx.settings.options.options_dividend_yield
    quoted, quoted_source = _quoted_spot(ctx, chain)
    try:
        parity: ParitySpot | None = parity_spot(chain, r=r, q=q)
    except ParityError:
        parity = None
    tolerance = ctx.settings.options.options_spot_tolerance
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
            return MarketInputs(
                parity.spot, f"{parity_note}; quote {quoted} differs by {gap:.2%} (> {tolerance:.2%})",
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
    # the chain's own underlying print, else the provider's close of the quote day
    if chain.underlying_price:
        return chain.underlying_price, "chain underlying close"
    bars = history_window(ctx=ctx, symbol=chain.symbol, period="5d", interval="1d")
    if bars.empty or bars.index[-1].date() != chain.quote_date:
        return None, "none"
    return float(bars["close"].iloc[-1]), f"provider close {chain.quote_date}"


def _chain_header(chain: OptionChain, market: MarketInputs) -> dict[str, Any]:
    return {
        "symbol": chain.symbol,
        "quote_date": chain.quote_date.isoformat(),
        "source": chain.source,
        **market.header(),
    }


# -- get_option_chain ----------------------------------------------------------------------------


class OptionChainInput(BaseModel):
    """``{symbol, dte_min, dte_max, right}``."""

    model_config = ConfigDict(extra="forbid")

    symbol: Symbol = Field(description="Underlying ticker, e.g. GOOG")
    dte_min: int = Field(default=14, ge=0, le=3650, description="Fewest days to expiry")
    dte_max: int = Field(default=45, ge=0, le=3650, description="Most days to expiry")
    right: str = Field(default="put", pattern="^(put|call|both)$", description="put, call or both")


@register(
    name="get_option_chain",
    description=(
        "Option chain quoted on the analysis date (offline snapshot, or Yahoo Finance online when "
        "the analysis date is today's quote): expiries with DTE in "
        "[dte_min, dte_max] and each contract's bid, ask, mid, spread %, volume, open interest and "
        "the source's own IV/delta when it has them."
    ),
    input_model=OptionChainInput,
)
def get_option_chain(params: OptionChainInput, ctx: ToolContext) -> ToolOutput:
    """Returns data ``{symbol, quote_date, source, underlying_price (USD), underlying_source,
    risk_free_rate, dividend_yield, expiries: [{expiry, dte, contracts}], contracts: [{contract,
    expiry, dte, right, strike, bid, ask, mid, spread_pct, volume, open_interest, source_iv,
    source_delta}], truncated}``. Raises ToolInputError (``NO_DATA``/``NOT_CONFIGURED``/``INVALID_INPUT``).
    """
    if params.dte_min > params.dte_max:
        raise ToolInputError("dte_min must not exceed dte_max")
    chain = load_chain(ctx, params.symbol, dte_max=params.dte_max)
    market = market_of(ctx, chain)
    rows = []
    for c in chain.contracts:
        dte = c.dte(chain.quote_date)
        if not params.dte_min <= dte <= params.dte_max or (
            params.right != "both" and c.right != params.right
        ):
            continue
        rows.append(
            {
                "contract": c.contract,
                "expiry": c.expiry.isoformat(),
                "dte": dte,
                "right": c.right,
                "strike": c.strike,
                "bid": c.bid,
                "ask": c.ask,
                "mid": round(c.mid, 4),
                "spread_pct": round(c.spread_pct, 4) if c.mid > 0 else None,
                "volume": c.volume,
                "open_interest": c.open_interest,
                "source_iv": c.source_iv,
                "source_delta": c.source_delta,
            }
        )
    if not rows:
        raise ToolInputError(
            f"the {chain.quote_date} chain of {chain.symbol} has no {params.right} quoted with DTE "
            f"{params.dte_min}-{params.dte_max}",
            code=ErrorCode.NO_DATA,
        )
    expiries: dict[str, dict[str, Any]] = {}
    for row in rows:
        entry = expiries.setdefault(
            str(row["expiry"]), {"expiry": row["expiry"], "dte": row["dte"], "contracts": 0}
        )
        entry["contracts"] += 1
    data = {
        **_chain_header(chain, market),
        "expiries": list(expiries.values()),
        "contracts": rows[:MAX_ROWS],
        "truncated": len(rows) > MAX_ROWS,
    }
    summary = (
        f"{chain.symbol} {chain.quote_date} ({chain.source}): {len(rows)} contracts, {len(expiries)} expiries"
    )
    return ToolOutput(data=data, summary=summary, source_refs=(file_ref(chain),), symbol=chain.symbol)


# -- get_option_greeks ---------------------------------------------------------------------------


class OptionGreeksInput(BaseModel):
    """``{contracts}``: OCC symbols of one underlying."""

    model_config = ConfigDict(extra="forbid")

    contracts: list[Contract] = Field(min_length=1, max_length=MAX_CONTRACTS, description="OCC symbols")


@register(
    name="get_option_greeks",
    description=(
        "IV solved from the mid price and BSM delta, gamma, theta (USD/day), vega (USD per vol point), "
        "POP, breakeven and ROC of each contract (vollib), with the source's own IV/delta and the difference."
    ),
    input_model=OptionGreeksInput,
)
def get_option_greeks(params: OptionGreeksInput, ctx: ToolContext) -> ToolOutput:
    """Returns data ``{symbol, quote_date, underlying_price, ..., contracts: [measure_put row |
    {contract, error}]}`` (:func:`agents.quant.options.screen.measure_put`; calls are priced like
    puts' rows without the CSP fields). Raises ToolInputError for contracts of several roots or
    none found in the chain of ``as_of``."""
    from agents.quant.options.screen import measure_put

    roots = {m["root"] for c in params.contracts if (m := _OCC.match(c))}
    if len(roots) != 1:
        raise ToolInputError(f"contracts must share one underlying, got {sorted(roots)}")
    expiries = [
        datetime.strptime(m["yymmdd"], "%y%m%d").date() for c in params.contracts if (m := _OCC.match(c))
    ]
    chain = load_chain(ctx, roots.pop(), dte_max=max((e - ctx.as_of).days for e in expiries))
    market = market_of(ctx, chain)
    listed = chain.by_contract()
    spot, r, q = market.spot, market.r, market.q
    out: list[dict[str, Any]] = []
    for contract in dict.fromkeys(params.contracts):
        quote = listed.get(contract)
        if quote is None:
            out.append({"contract": contract, "error": f"not quoted on {chain.quote_date}"})
            continue
        row = measure_put(quote, quote_date=chain.quote_date, spot=spot, r=r, q=q)
        if quote.right == "call":
            for key in ("pop", "breakeven", "premium", "collateral", "roc", "weekly_roc", "annualized_roc"):
                row.pop(key, None)
        out.append(row)
    if all("error" in row and "mid" not in row for row in out):
        raise ToolInputError(f"none of the contracts is quoted on {chain.quote_date}", code=ErrorCode.NO_DATA)
    data = {**_chain_header(chain, market), "contracts": out}
    summary = f"{chain.symbol} {chain.quote_date}: greeks of {len(out)} contracts"
    return ToolOutput(data=data, summary=summary, source_refs=(file_ref(chain),), symbol=chain.symbol)


# -- calculate_iv_hv -----------------------------------------------------------------------------


class IvHvInput(BaseModel):
    """``{symbol, hv_period}``."""

    model_config = ConfigDict(extra="forbid")

    symbol: Symbol = Field(description="Underlying ticker")
    hv_period: int = Field(default=20, ge=5, le=252, description="Daily returns in the HV window")


def atm_iv(
    chain: OptionChain, *, spot: float, r: float, q: float, dte_min: int, dte_max: int
) -> dict[str, Any]:
    """At-the-money IV: the mean IV (from the mids) of the put and the call at the strike nearest
    ``spot``, on the nearest expiry with DTE in [dte_min, dte_max] (else the nearest with DTE ≥ 1).

    Returns ``{iv, expiry, dte, strike, put_iv, call_iv}``. Raises ToolInputError ``NO_DATA``
    when no expiry or no IV can be solved.
    """
    from agents.quant.options.screen import measure_put

    expiries = sorted({c.expiry for c in chain.contracts if c.dte(chain.quote_date) >= 1})
    inside = [e for e in expiries if dte_min <= (e - chain.quote_date).days <= dte_max]
    for expiry in inside or expiries:
        pairs = [c for c in chain.contracts if c.expiry == expiry]
        if not pairs:
            continue
        strike = min({c.strike for c in pairs}, key=lambda k: abs(k - spot))
        ivs: dict[str, float] = {}
        for c in pairs:
            if c.strike != strike:
                continue
            row = measure_put(c, quote_date=chain.quote_date, spot=spot, r=r, q=q)
            if row.get("iv"):
                ivs[c.right] = row["iv"]
        if ivs:
            return {
                "iv": round(sum(ivs.values()) / len(ivs), 4),
                "expiry": expiry.isoformat(),
                "dte": (expiry - chain.quote_date).days,
                "strike": strike,
                "put_iv": ivs.get("put"),
                "call_iv": ivs.get("call"),
            }
    raise ToolInputError(
        f"no at-the-money IV can be solved from the {chain.quote_date} chain", code=ErrorCode.NO_DATA
    )


def hv_of(ctx: ToolContext, symbol: str, period: int) -> dict[str, Any]:
    """HV(``period``) from the provider's adjusted closes up to ``ctx.as_of`` (point-in-time
    ``adj_close``). Returns ``{hv, period, bars_used, last_bar}``. Raises ToolInputError
    ``NO_DATA`` when there are too few bars or the last bar is not on ``as_of``'s chain day."""
    from agents.quant.options.pricing import historical_volatility

    bars = history_window(ctx=ctx, symbol=symbol, period="1y", interval="1d")
    if len(bars) < period + 1:
        raise ToolInputError(
            f"{len(bars)} daily bars of {symbol} up to {ctx.as_of}; HV({period}) needs {period + 1}",
            code=ErrorCode.NO_DATA,
        )
    closes = bars["adj_close"].to_numpy(dtype="float64")
    return {
        "hv": round(historical_volatility(closes, period=period), 4),
        "period": period,
        "bars_used": period + 1,
        "last_bar": bars.index[-1].date().isoformat(),
    }


@register(
    name="calculate_iv_hv",
    description=(
        "At-the-money implied volatility (from the mids of the chain quoted on the analysis date) "
        "against historical volatility HV(hv_period) of the adjusted closes, and their ratio."
    ),
    input_model=IvHvInput,
)
def calculate_iv_hv(params: IvHvInput, ctx: ToolContext) -> ToolOutput:
    """Returns data ``{symbol, quote_date, underlying_price, iv, hv, iv_hv_ratio, atm: {...},
    hv_window: {...}}`` (fractions per year). Raises ToolInputError ``NO_DATA`` (no chain on
    ``as_of``, no history to measure HV) or ``NOT_CONFIGURED``."""
    chain = load_chain(ctx, params.symbol)
    market = market_of(ctx, chain)
    s = ctx.settings
    atm = atm_iv(
        chain, spot=market.spot, r=market.r, q=market.q,
        dte_min=s.options.csp_dte_min, dte_max=s.options.csp_dte_max,
    )  # fmt: skip
    hv = hv_of(ctx, params.symbol, params.hv_period)
    ratio = round(atm["iv"] / hv["hv"], 4) if hv["hv"] > 0 else None
    data = {
        **_chain_header(chain, market),
        "iv": atm["iv"],
        "hv": hv["hv"],
        "iv_hv_ratio": ratio,
        "atm": atm,
        "hv_window": hv,
    }
    summary = (
        f"{params.symbol} {chain.quote_date}: IV {atm['iv']} vs HV({params.hv_period}) {hv['hv']} → {ratio}"
    )
    return ToolOutput(data=data, summary=summary, source_refs=(file_ref(chain),), symbol=params.symbol)


# -- calculate_roc -------------------------------------------------------------------------------


class RocInput(BaseModel):
    """``{premium, strike, dte}``: premium and strike in USD per share."""

    model_config = ConfigDict(extra="forbid")

    premium: float = Field(ge=0, le=1e6, description="Premium received, USD per share (e.g. the mid)")
    strike: float = Field(gt=0, le=1e6, description="Strike, USD")
    dte: int = Field(gt=0, le=3650, description="Days to expiry")


@register(
    name="calculate_roc",
    description=(
        "Return on the cash collateral of a cash-secured put: ROC = premium/strike, weekly = ROC*7/DTE, "
        "annualised = ROC*365/DTE (fractions), premium and collateral per contract (x100), breakeven."
    ),
    input_model=RocInput,
)
def calculate_roc(params: RocInput, _ctx: ToolContext) -> ToolOutput:
    """Returns data ``{premium, strike, dte, roc, weekly_roc, annualized_roc, premium_per_contract,
    collateral, breakeven}`` (:func:`agents.quant.options.pricing.csp_roc`)."""
    from agents.quant.options.pricing import csp_roc

    roc = csp_roc(premium=params.premium, strike=params.strike, dte=params.dte)
    data = {
        "premium": params.premium,
        "strike": params.strike,
        "dte": params.dte,
        "roc": round(roc.roc, 6),
        "weekly_roc": round(roc.weekly_roc, 6),
        "annualized_roc": round(roc.annualized_roc, 6),
        "premium_per_contract": round(roc.premium, 2),
        "collateral": round(roc.collateral, 2),
        "breakeven": round(roc.breakeven, 4),
    }
    return ToolOutput(
        data=data, summary=f"weekly ROC {data['weekly_roc']}, annualised {data['annualized_roc']}"
    )


# -- filter_options ------------------------------------------------------------------------------


class FilterInput(BaseModel):
    """``{symbol, delta_min?, delta_max?, dte_min?, dte_max?, min_open_interest?, min_volume?,
    max_spread_pct?, min_weekly_roc?, max_strike?, expiry_before?}``; unset thresholds take the
    CSP settings."""

    model_config = ConfigDict(extra="forbid")

    symbol: Symbol = Field(description="Underlying ticker")
    delta_min: float | None = Field(default=None, gt=0, lt=1, description="Smallest |delta|")
    delta_max: float | None = Field(default=None, gt=0, lt=1, description="Largest |delta|")
    dte_min: int | None = Field(default=None, ge=0, le=3650)
    dte_max: int | None = Field(default=None, ge=0, le=3650)
    min_open_interest: int | None = Field(default=None, ge=0)
    min_volume: int | None = Field(default=None, ge=0)
    max_spread_pct: float | None = Field(default=None, gt=0, description="Largest (ask-bid)/mid, fraction")
    min_weekly_roc: float | None = Field(default=None, ge=0, description="Weekly ROC to exceed, fraction")
    max_strike: float | None = Field(default=None, gt=0, description="Highest strike (a support level), USD")
    expiry_before: date | None = Field(
        default=None, description="Only expiries before this day (ISO; the next earnings date)"
    )
    limit: int = Field(default=10, ge=1, le=50, description="Rows of passing and of nearest-miss contracts")


def rules_from(params: FilterInput, ctx: ToolContext) -> CspRules:
    """The screen's rules: the arguments given, else the CSP settings (docs/design.md, "CSP rules")."""
    from agents.quant.options.screen import CspRules

    s = ctx.settings

    def pick[T](value: T | None, default: T) -> T:
        return default if value is None else value

    return CspRules(
        delta_min=pick(params.delta_min, s.options.csp_delta_min),
        delta_max=pick(params.delta_max, s.options.csp_delta_max),
        dte_min=pick(params.dte_min, s.options.csp_dte_min),
        dte_max=pick(params.dte_max, s.options.csp_dte_max),
        min_weekly_roc=pick(params.min_weekly_roc, s.options.csp_min_weekly_roc),
        max_spread_pct=pick(params.max_spread_pct, s.options.csp_max_spread_pct),
        min_volume=pick(params.min_volume, s.options.csp_min_volume),
        min_open_interest=pick(params.min_open_interest, s.options.csp_min_open_interest),
        max_strike=params.max_strike,
        expiry_before=params.expiry_before,
        fill_slippage=s.options.csp_fill_slippage,
        fee_per_contract=s.options.csp_fee_per_contract,
        full_open_interest=s.options.csp_full_open_interest,
    )


@register(
    name="filter_options",
    description=(
        "Cash-secured put screen of the chain quoted on the analysis date: puts with |delta| in range, "
        "DTE in range, strike at or below max_strike, weekly ROC above the minimum, spread, volume and "
        "open interest within limits (defaults: the CSP settings), expiry before expiry_before "
        "(an earnings date) when given; ranked by the weekly ROC of the premium at a realistic fill "
        "(bid by default) less fees, penalised for wide spreads and thin open interest; plus the "
        "nearest misses with the rules they fail."
    ),
    input_model=FilterInput,
)
def filter_options(params: FilterInput, ctx: ToolContext) -> ToolOutput:
    """Returns data ``{symbol, quote_date, underlying_price, ..., rules, screened, passing: [row],
    nearest_misses: [row with failed], failed_counts: {rule: n}}`` (rows as
    :func:`agents.quant.options.screen.measure_put`). Raises ToolInputError (``NO_DATA`` etc.)."""
    from agents.quant.options.screen import screen_puts

    rules = rules_from(params, ctx)
    if rules.delta_min > rules.delta_max or rules.dte_min > rules.dte_max:
        raise ToolInputError("delta_min/dte_min must not exceed delta_max/dte_max")
    chain = load_chain(ctx, params.symbol, dte_max=rules.dte_max)
    market = market_of(ctx, chain)
    passing, failing = screen_puts(chain, spot=market.spot, r=market.r, q=market.q, rules=rules)
    counts: dict[str, int] = {}
    for row in failing:
        for rule in row["failed"]:
            counts[rule] = counts.get(rule, 0) + 1
    data = {
        **_chain_header(chain, market),
        "rules": rules.as_dict(),
        "screened": len(passing) + len(failing),
        "passing_count": len(passing),
        "passing": passing[: params.limit],
        "nearest_misses": failing[: params.limit],
        "failed_counts": counts,
    }
    summary = (
        f"{chain.symbol} {chain.quote_date}: {len(passing)} of {data['screened']} puts pass the CSP rules"
    )
    return ToolOutput(data=data, summary=summary, source_refs=(file_ref(chain),), symbol=chain.symbol)


def quote_day(data: dict[str, Any]) -> date:
    """The ``quote_date`` of an option tool's data as a date."""
    return date.fromisoformat(str(data["quote_date"]))


# -- covered calls ---------------------------------------------------------------------------------


class CallFilterInput(FilterInput):
    """``filter_options``' arguments for calls, with ``min_strike`` (the lowest strike to sell:
    the resistance zone's top and the cost basis) in place of ``max_strike``."""

    min_strike: float | None = Field(
        default=None,
        gt=0,
        description="Lowest strike (resistance zone, cost basis), USD in the chain's units",
    )


@register(
    name="filter_calls",
    description=(
        "Covered-call screen of the chain quoted on the analysis date: calls with |delta|, DTE, weekly "
        "ROC on the shares' value, spread, volume and open interest within the CSP settings (or the "
        "arguments), strike at or above min_strike, expiry before expiry_before; ranked by the net "
        "weekly ROC at the bid less fees with the spread and open-interest penalties; plus the nearest "
        "misses."
    ),
    input_model=CallFilterInput,
)
def filter_calls(params: CallFilterInput, ctx: ToolContext) -> ToolOutput:
    """Returns data ``{symbol, quote_date, underlying_price, ..., rules (with min_strike),
    screened, passing_count, passing: [row], nearest_misses, failed_counts}``; a row is
    :func:`agents.quant.options.screen.measure_put`'s of the call with
    :func:`~agents.quant.options.screen.call_fill_metrics` (``capital``, ``called_away_return``).
    Raises ToolInputError (``NO_DATA`` etc.)."""
    from agents.quant.options.screen import screen_calls

    rules = rules_from(params, ctx)
    if rules.delta_min > rules.delta_max or rules.dte_min > rules.dte_max:
        raise ToolInputError("delta_min/dte_min must not exceed delta_max/dte_max")
    chain = load_chain(ctx, params.symbol, dte_max=rules.dte_max)
    market = market_of(ctx, chain)
    passing, failing = screen_calls(
        chain, spot=market.spot, r=market.r, q=market.q, rules=rules, min_strike=params.min_strike
    )
    counts: dict[str, int] = {}
    for row in failing:
        for rule in row["failed"]:
            counts[rule] = counts.get(rule, 0) + 1
    data = {
        **_chain_header(chain, market),
        "rules": {**rules.as_dict(), "min_strike": params.min_strike},
        "screened": len(passing) + len(failing),
        "passing_count": len(passing),
        "passing": passing[: params.limit],
        "nearest_misses": failing[: params.limit],
        "failed_counts": counts,
    }
    summary = f"{chain.symbol} {chain.quote_date}: {len(passing)} of {data['screened']} calls pass the rules"
    return ToolOutput(data=data, summary=summary, source_refs=(file_ref(chain),), symbol=chain.symbol)


class CorporateEventsInput(BaseModel):
    """``{symbol, days}``."""

    model_config = ConfigDict(extra="forbid")

    symbol: Symbol = Field(description="Ticker")
    days: int = Field(default=45, ge=1, le=400, description="Calendar days after as_of to look at")


@register(
    name="get_corporate_events",
    description=(
        "Ex-dividend dates (amount USD/share) and splits (ratio) of a symbol after the analysis date, "
        "from the Lean factor files (FINAGENT_DIVIDENDS_DIR); says through which day the file vouches "
        "there are no others."
    ),
    input_model=CorporateEventsInput,
)
def get_corporate_events(params: CorporateEventsInput, ctx: ToolContext) -> ToolOutput:
    """Returns data ``{symbol, as_of, until (ISO), events: [{kind: dividend|split, ex_date,
    amount?, ratio?}], covered_through (ISO), evaluated (bool: the file vouches through
    ``until``)}``. Raises ToolInputError ``NOT_CONFIGURED`` without ``FINAGENT_DIVIDENDS_DIR``,
    ``NO_DATA`` without a factor file of the symbol."""
    from datetime import timedelta

    from agents.data.options.dividends import DividendDataError, read_factor_file

    folder = ctx.settings.options.dividends_dir
    if folder is None:
        raise ToolInputError("FINAGENT_DIVIDENDS_DIR is not set", code=ErrorCode.NOT_CONFIGURED)
    try:
        found = read_factor_file(Path(folder), params.symbol)
    except DividendDataError as exc:
        raise ToolInputError(str(exc), code=ErrorCode.NO_DATA) from None
    until = ctx.as_of + timedelta(days=params.days)
    events = [
        {k: v for k, v in (("kind", e.kind), ("ex_date", e.ex_date.isoformat()), ("amount", e.amount),
                           ("ratio", e.ratio)) if v is not None}
        for e in found.between(ctx.as_of, until)
    ]  # fmt: skip
    data = {
        "symbol": params.symbol,
        "as_of": ctx.as_of.isoformat(),
        "until": until.isoformat(),
        "events": events,
        "covered_through": found.covered_through.isoformat(),
        "evaluated": found.covered_through >= until,
    }
    summary = f"{params.symbol} {ctx.as_of}..{until}: {len(events)} corporate events"
    ref = f"lean:factor_files/{found.path.name}"
    return ToolOutput(data=data, summary=summary, source_refs=(ref,), symbol=params.symbol)
