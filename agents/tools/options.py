"""Option tools (docs/design.md, "Option tools"): ``get_option_chain``, ``get_option_greeks``,
``calculate_iv_hv``, ``calculate_roc``, ``filter_options`` (puts), ``filter_calls`` (calls),
``get_option_context`` (HV cone, IV rank, skew, earnings-implied move) and ``get_corporate_events``.

Chains come from the offline snapshots in ``FINAGENT_OPTIONS_DIR`` (:mod:`agents.data.options.chains`:
Lean end-of-day, CBOE delayed quotes, yfinance captures), point in time: the chain quoted on
``ctx.as_of``; none → ``NO_DATA`` naming the dates that exist; folder unset → ``NOT_CONFIGURED``.
Numbers are computed with vollib (:mod:`agents.quant.options.pricing`): IV from the mid, BSM greeks,
POP, yields at the fill (:mod:`agents.quant.options.economics`), at the inputs :func:`market_of`
chooses: r from the 3-month T-bill series (or the setting), q from the settings, and the chain's
own underlying close (the strikes' units; a chain without one uses the provider's close on
``as_of``) unless it is after hours or off the put-call-parity spot of the chain's mids by more
than ``options.spot_tolerance``.
Every output states its spot and where it came from, the rate and its source, and the parity fit
(``parity_spot``); the screens also state the real-world model their probabilities come from
(:func:`agents.quant.options.real_world.real_world_model`). A symbol without price history is
priced at its chain's put-call-parity spot when its chain has no underlying price of its own.
Each output cites the snapshot file (``options-file:<name>``). Chain loading and the pricing
inputs are in :mod:`agents.tools.option_market` (re-exported here).

Without a folder and with the ``yfinance`` data provider, chains come online from Yahoo Finance
(:mod:`agents.data.options.yahoo`), used only when quoted on ``ctx.as_of`` (a quote of now).
"""

from __future__ import annotations

from datetime import date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from agents.data.options.chains import OptionChain
from agents.tools.envelope import ErrorCode
from agents.tools.fields import Symbol
from agents.tools.option_market import (
    _OCC,
    MAX_CONTRACTS,
    MAX_ROWS,
    Contract,
    _chain_header,
    atm_iv,
    atm_term,
    closes_of,
    file_ref,
    hv_of,
    load_chain,
    market_of,
    pricing_market,
)
from agents.tools.option_market import YAHOO_SOURCE as YAHOO_SOURCE
from agents.tools.option_market import MarketInputs as MarketInputs
from agents.tools.option_market import bars_of as bars_of
from agents.tools.option_market import rate_of as rate_of
from agents.tools.registry import ToolContext, ToolInputError, ToolOutput, register

if TYPE_CHECKING:
    from agents.quant.options.economics import OptionRules

# The pricing modules are imported inside the tools: vollib pulls in scipy (~0.5 s), and every
# worker and CLI process registers all tools (tests/agents/tools/test_catalog.py).

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
        "the analysis date is today's quote): expiries with DTE (calendar days to the last trading "
        "session) in [dte_min, dte_max] and each contract's bid, ask, mid, spread %, volume, open "
        "interest and the source's own IV/delta when it has them."
    ),
    input_model=OptionChainInput,
)
def get_option_chain(params: OptionChainInput, ctx: ToolContext) -> ToolOutput:
    """Returns data ``{symbol, quote_date, source, underlying_price (USD), underlying_source,
    risk_free_rate, dividend_yield, expiries: [{expiry, last_trading_day, dte, contracts}],
    contracts: [{contract, expiry, last_trading_day, dte, right, strike, bid, ask, mid, spread_pct,
    volume, open_interest, source_iv, source_delta}], truncated}``. Raises ToolInputError
    (``NO_DATA``/``NOT_CONFIGURED``/``INVALID_INPUT``).
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
                "last_trading_day": c.last_trading_day.isoformat(),
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
            str(row["expiry"]),
            {
                "expiry": row["expiry"],
                "last_trading_day": row["last_trading_day"],
                "dte": row["dte"],
                "contracts": 0,
            },
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
        "IV solved from the mid price and BSM delta, gamma, theta (USD/day), vega (USD per vol point) of "
        "each contract (vollib), and what selling it earns and risks at the configured fill: time value "
        "(income), yields against the T-bill, breakeven, POP, P(assigned), P(touch) risk-neutral and "
        "real-world; with the source's own IV/delta and the difference."
    ),
    input_model=OptionGreeksInput,
)
def get_option_greeks(params: OptionGreeksInput, ctx: ToolContext) -> ToolOutput:
    """Returns data ``{symbol, quote_date, underlying_price, ..., real_world, contracts:
    [measure_contract row | {contract, error}]}`` (:func:`agents.quant.options.economics.
    measure_contract`). Raises ToolInputError for contracts of several roots or none found in the
    chain of ``as_of``."""
    from agents.quant.options.economics import measure_contract

    roots = {m["root"] for c in params.contracts if (m := _OCC.match(c))}
    if len(roots) != 1:
        raise ToolInputError(f"contracts must share one underlying, got {sorted(roots)}")
    expiries = [
        datetime.strptime(m["yymmdd"], "%y%m%d").date() for c in params.contracts if (m := _OCC.match(c))
    ]
    chain = load_chain(ctx, roots.pop(), dte_max=max((e - ctx.as_of).days for e in expiries))
    inputs = market_of(ctx, chain)
    market, real_world = pricing_market(ctx, chain, inputs)
    listed = chain.by_contract()
    out: list[dict[str, Any]] = []
    for contract in dict.fromkeys(params.contracts):
        quote = listed.get(contract)
        if quote is None:
            out.append({"contract": contract, "error": f"not quoted on {chain.quote_date}"})
            continue
        out.append(measure_contract(quote, market=market, rules=default_rules(ctx, right=quote.right)))
    if all("error" in row and "mid" not in row for row in out):
        raise ToolInputError(f"none of the contracts is quoted on {chain.quote_date}", code=ErrorCode.NO_DATA)
    data = {**_chain_header(chain, inputs), "real_world": real_world, "contracts": out}
    summary = f"{chain.symbol} {chain.quote_date}: greeks of {len(out)} contracts"
    return ToolOutput(data=data, summary=summary, source_refs=(file_ref(chain),), symbol=chain.symbol)


# -- calculate_iv_hv -----------------------------------------------------------------------------


class IvHvInput(BaseModel):
    """``{symbol, hv_period}``."""

    model_config = ConfigDict(extra="forbid")

    symbol: Symbol = Field(description="Underlying ticker")
    hv_period: int = Field(default=20, ge=5, le=252, description="Daily returns in the HV window")


@register(
    name="calculate_iv_hv",
    description=(
        "At-the-money implied volatility (from the mids of the chain quoted on the analysis date) "
        "against historical volatility HV(hv_period) of the adjusted closes and against the real-world "
        "σ forecast (the ratio the option plans' IV rule reads), with their ratios."
    ),
    input_model=IvHvInput,
)
def calculate_iv_hv(params: IvHvInput, ctx: ToolContext) -> ToolOutput:
    """Returns data ``{symbol, quote_date, underlying_price, iv, hv, iv_hv_ratio, sigma_forecast,
    iv_forecast_ratio, real_world, atm: {...}, hv_window: {...}}`` (fractions per year;
    ``sigma_forecast``: the real-world σ to the at-the-money expiry on a yearly scale). Raises
    ToolInputError ``NO_DATA`` (no chain on ``as_of``, no history to measure HV) or
    ``NOT_CONFIGURED``."""
    chain = load_chain(ctx, params.symbol)
    inputs = market_of(ctx, chain)
    market, real_world = pricing_market(ctx, chain, inputs)
    s = ctx.settings
    atm = atm_iv(chain, market=market, dte_min=s.options.dte_min, dte_max=s.options.dte_max)
    hv = hv_of(ctx, params.symbol, params.hv_period)
    ratio = round(atm["iv"] / hv["hv"], 4) if hv["hv"] > 0 else None
    forecast = None
    if market.real_world is not None:  # the forecast's σ to the at-the-money expiry, a year's scale
        from agents.data.market_calendar import sessions_between
        from agents.quant.options.real_world import annual_sigma

        h = sessions_between(chain.quote_date, date.fromisoformat(atm["last_trading_day"]))
        forecast = round(annual_sigma(market.real_world, h), 4)
    data = {
        **_chain_header(chain, inputs),
        "iv": atm["iv"],
        "hv": hv["hv"],
        "iv_hv_ratio": ratio,
        "sigma_forecast": forecast,
        "iv_forecast_ratio": round(atm["iv"] / forecast, 4) if forecast else None,
        "real_world": real_world,
        "atm": atm,
        "hv_window": hv,
    }
    summary = (
        f"{params.symbol} {chain.quote_date}: IV {atm['iv']} vs HV({params.hv_period}) {hv['hv']} → {ratio}, "
        f"vs forecast σ {forecast}"
    )
    return ToolOutput(data=data, summary=summary, source_refs=(file_ref(chain),), symbol=params.symbol)


# -- calculate_roc -------------------------------------------------------------------------------


class RocInput(BaseModel):
    """``{premium, strike, dte, spot?, right?}``: premium, strike and spot in USD per share."""

    model_config = ConfigDict(extra="forbid")

    premium: float = Field(ge=0, le=1e6, description="Premium received, USD per share (e.g. the bid)")
    strike: float = Field(gt=0, le=1e6, description="Strike, USD")
    dte: int = Field(gt=0, le=3650, description="Days to expiry (to the last trading session)")
    spot: float | None = Field(
        default=None, gt=0, le=1e6, description="Underlying price, USD: the ROC is then on the time value"
    )
    right: str = Field(default="put", pattern="^(put|call)$", description="put (on the strike) or call")


@register(
    name="calculate_roc",
    description=(
        "Return on capital of selling an option: income = premium less the intrinsic value (when spot "
        "is given: an in-the-money option's intrinsic value is given back at assignment), ROC = "
        "income/capital (a put's strike, a call's spot), weekly = ROC*7/DTE, annualised = ROC*365/DTE "
        "(fractions); premium and capital per contract (x100), breakeven."
    ),
    input_model=RocInput,
)
def calculate_roc(params: RocInput, _ctx: ToolContext) -> ToolOutput:
    """Returns data ``{premium, strike, dte, spot, right, intrinsic, income, roc, weekly_roc,
    annualized_roc, premium_per_contract, collateral, breakeven}``; without ``spot`` the
    intrinsic value is taken as 0 and a call's capital is its strike."""
    from agents.quant.options.economics import intrinsic_value

    if params.right == "call" and params.spot is None:
        raise ToolInputError("a call's ROC needs spot (the shares' value is the capital)")
    intrinsic = (
        intrinsic_value(
            right="put" if params.right == "put" else "call", spot=params.spot, strike=params.strike
        )
        if params.spot is not None
        else 0.0
    )
    income = max(params.premium - intrinsic, 0.0)
    capital = params.strike if params.right == "put" else float(params.spot or params.strike)
    roc = income / capital
    breakeven = params.strike - params.premium if params.right == "put" else capital - params.premium
    data = {
        "premium": params.premium,
        "strike": params.strike,
        "dte": params.dte,
        "spot": params.spot,
        "right": params.right,
        "intrinsic": round(intrinsic, 4),
        "income": round(income, 4),
        "roc": round(roc, 6),
        "weekly_roc": round(roc * 7.0 / params.dte, 6),
        "annualized_roc": round(roc * 365.0 / params.dte, 6),
        "premium_per_contract": round(params.premium * 100.0, 2),
        "collateral": round(capital * 100.0, 2),
        "breakeven": round(breakeven, 4),
    }
    return ToolOutput(
        data=data, summary=f"weekly ROC {data['weekly_roc']}, annualised {data['annualized_roc']}"
    )


# -- filter_options / filter_calls -----------------------------------------------------------------


class FilterInput(BaseModel):
    """``{symbol, delta_min?, delta_max?, dte_min?, dte_max?, min_open_interest?, min_volume?,
    max_spread_pct?, max_spread_abs?, min_excess_yield?, min_weekly_roc?, max_strike?,
    expiry_before?, limit}``; unset thresholds take the settings."""

    model_config = ConfigDict(extra="forbid")

    symbol: Symbol = Field(description="Underlying ticker")
    delta_min: float | None = Field(default=None, gt=0, lt=1, description="Smallest |delta|")
    delta_max: float | None = Field(default=None, gt=0, lt=1, description="Largest |delta|")
    dte_min: int | None = Field(default=None, ge=0, le=3650)
    dte_max: int | None = Field(default=None, ge=0, le=3650)
    min_open_interest: int | None = Field(default=None, ge=0)
    min_volume: int | None = Field(default=None, ge=0)
    max_spread_pct: float | None = Field(default=None, gt=0, description="Largest (ask-bid)/mid, fraction")
    max_spread_abs: float | None = Field(
        default=None, ge=0, description="A spread at or below this (USD) passes whatever its fraction"
    )
    min_excess_yield: float | None = Field(
        default=None, ge=0, description="Annualised income yield over the T-bill to reach, fraction"
    )
    min_weekly_roc: float | None = Field(
        default=None, ge=0, description="Weekly income yield to exceed, fraction (0 = no such floor)"
    )
    max_strike: float | None = Field(default=None, gt=0, description="Highest strike (a support level), USD")
    expiry_before: date | None = Field(
        default=None, description="Only contracts whose last trading day is before this (ISO; earnings)"
    )
    limit: int = Field(default=10, ge=1, le=50, description="Rows of passing and of nearest-miss contracts")


def default_rules(ctx: ToolContext, *, right: str) -> OptionRules:
    """The option rules of the settings for ``right`` (docs/design.md, "Option rules")."""
    from agents.quant.options.economics import OptionRules

    o = ctx.settings.options
    return OptionRules(
        right="put" if right == "put" else "call",
        delta_min=o.delta_min,
        delta_max=o.delta_max,
        dte_min=o.dte_min,
        dte_max=o.dte_max,
        min_open_interest=o.min_open_interest,
        min_volume=o.min_volume,
        max_spread_pct=o.max_spread_pct,
        max_spread_abs=o.max_spread_abs,
        min_excess_yield=o.min_excess_yield,
        min_weekly_roc=o.min_weekly_roc,
        fill=o.fill,
        fee_per_contract=o.fee_per_contract,
    )


def rules_from(params: FilterInput, ctx: ToolContext, *, right: str = "put") -> OptionRules:
    """The screen's rules: the arguments given, else the settings (docs/design.md, "Option rules")."""
    from dataclasses import replace

    given = {
        k: v
        for k, v in params.model_dump().items()
        if v is not None
        and k
        in {
            "delta_min", "delta_max", "dte_min", "dte_max", "min_open_interest", "min_volume",
            "max_spread_pct", "max_spread_abs", "min_excess_yield", "min_weekly_roc", "max_strike",
            "expiry_before", "min_strike",
        }
    }  # fmt: skip
    return replace(default_rules(ctx, right=right), **given)


def _screen(params: FilterInput, ctx: ToolContext, *, right: str) -> tuple[OptionChain, dict[str, Any]]:
    from agents.quant.options.screen import failed_counts, screen_contracts

    rules = rules_from(params, ctx, right=right)
    if rules.delta_min > rules.delta_max or rules.dte_min > rules.dte_max:
        raise ToolInputError("delta_min/dte_min must not exceed delta_max/dte_max")
    chain = load_chain(ctx, params.symbol, dte_max=rules.dte_max)
    inputs = market_of(ctx, chain)
    market, real_world = pricing_market(ctx, chain, inputs)
    passing, failing = screen_contracts(chain, market=market, rules=rules)
    data = {
        **_chain_header(chain, inputs),
        "tbill_yield": round(market.tbill_yield, 6),
        "real_world": real_world,
        "rules": rules.as_dict(),
        "screened": len(passing) + len(failing),
        "passing_count": len(passing),
        "passing": passing[: params.limit],
        "nearest_misses": failing[: params.limit],
        "failed_counts": failed_counts(failing),
    }
    return chain, data


@register(
    name="filter_options",
    description=(
        "Cash-secured put screen of the chain quoted on the analysis date: puts with |delta|, DTE, "
        "strike at or below max_strike, annualised income yield over the T-bill, spread, volume and open "
        "interest within the floors (defaults: the settings), last trading day before expiry_before "
        "(an earnings date) when given. Income is the time value at the fill (bid by default) less "
        "fees: an in-the-money put's intrinsic value is not income. Ranked by that yield times the "
        "income per unit of the real-world expected move; with P(assigned), P(touch) and POP "
        "risk-neutral and real-world; plus the nearest misses with the rules they fail."
    ),
    input_model=FilterInput,
)
def filter_options(params: FilterInput, ctx: ToolContext) -> ToolOutput:
    """Returns data ``{symbol, quote_date, underlying_price, ..., tbill_yield, real_world, rules,
    screened, passing_count, passing: [row], nearest_misses: [row with failed], failed_counts:
    {rule: n}}`` (rows: :func:`agents.quant.options.economics.measure_contract`). Raises
    ToolInputError (``NO_DATA`` etc.)."""
    chain, data = _screen(params, ctx, right="put")
    summary = f"{chain.symbol} {chain.quote_date}: {data['passing_count']} of {data['screened']} puts pass"
    return ToolOutput(data=data, summary=summary, source_refs=(file_ref(chain),), symbol=chain.symbol)


def quote_day(data: dict[str, Any]) -> date:
    """The ``quote_date`` of an option tool's data as a date."""
    return date.fromisoformat(str(data["quote_date"]))


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
        "Covered-call screen of the chain quoted on the analysis date: calls with |delta|, DTE, "
        "annualised income yield on the shares' value over the T-bill, spread, volume and open interest "
        "within the floors (or the arguments), strike at or above min_strike, last trading day before "
        "expiry_before. Income is the time value at the fill less fees (an in-the-money call's intrinsic "
        "value is not income); ranked as filter_options; with P(called), P(touch) and POP risk-neutral "
        "and real-world; plus the nearest misses."
    ),
    input_model=CallFilterInput,
)
def filter_calls(params: CallFilterInput, ctx: ToolContext) -> ToolOutput:
    """Returns data as :func:`filter_options` (``rules`` with ``min_strike``); a row is
    :func:`agents.quant.options.economics.measure_contract`'s of the call (``capital`` = spot ×
    100, ``p_assigned_*`` = P(called)). Raises ToolInputError (``NO_DATA`` etc.)."""
    chain, data = _screen(params, ctx, right="call")
    summary = f"{chain.symbol} {chain.quote_date}: {data['passing_count']} of {data['screened']} calls pass"
    return ToolOutput(data=data, summary=summary, source_refs=(file_ref(chain),), symbol=chain.symbol)


# -- get_option_context ----------------------------------------------------------------------------


class OptionContextInput(BaseModel):
    """``{symbol, expiry?, earnings_date?}``."""

    model_config = ConfigDict(extra="forbid")

    symbol: Symbol = Field(description="Underlying ticker")
    expiry: date | None = Field(
        default=None, description="Expiry whose put skew to read (default: the nearest with DTE 14-45)"
    )
    earnings_date: date | None = Field(
        default=None, description="The next earnings report day (ISO), for the move the chain prices for it"
    )


@register(
    name="get_option_context",
    description=(
        "What a desk reads before selling an option: the HV cone (HV 10/20/60/252 now and their two-year "
        "ranges), at-the-money IV by expiry, IV rank and percentile over the stored daily IVs (with how "
        "many days that is), the put skew (25-delta put IV minus at-the-money IV) of an expiry, and the "
        "move the chain prices for the next earnings report."
    ),
    input_model=OptionContextInput,
)
def get_option_context(params: OptionContextInput, ctx: ToolContext) -> ToolOutput:
    """Returns data ``{symbol, quote_date, underlying_price, ..., hv_cone: {window: {...}} | null,
    hv_cone_error?, term: [{expiry, last_trading_day, dte, strike, iv, ...}], iv_rank: {iv, rank,
    percentile, sessions, first, last, meaningful} | null, iv_rank_note, skew: {expiry, iv_25d,
    iv_50d, skew} | null, earnings_move: {...} | null}`` (fractions; USD). Raises ToolInputError
    ``NO_DATA`` without a chain on ``as_of``."""
    from agents.data.options.universes import universe_days
    from agents.quant.options.context import earnings_implied_move, hv_cone, iv_rank, put_skew
    from agents.quant.options.economics import measure_contract

    chain = load_chain(ctx, params.symbol)
    inputs = market_of(ctx, chain)
    market, _ = pricing_market(ctx, chain, inputs)
    closes, why = closes_of(ctx, params.symbol, period="5y")
    cone = hv_cone(closes) if len(closes) > 11 else None
    term = atm_term(chain, market=market)
    # IV rank over the stored days' 30-day at-the-money IV (nearest expiry to 30 days)
    history: list[tuple[date, float]] = []
    folder = ctx.settings.options.dir
    if folder is not None and Path(folder).is_dir():
        for day in universe_days(options_dir=Path(folder), symbol=params.symbol, as_of=ctx.as_of):
            if (iv := _atm30(day)) is not None:
                history.append((day.day, iv))
    rank = iv_rank(history)
    if params.expiry is not None:
        expiry = params.expiry
    else:
        window = ctx.settings.options
        inside = [e for e in term if window.dte_min <= e["dte"] <= window.dte_max]
        expiry = date.fromisoformat((inside or term)[0]["expiry"]) if (inside or term) else ctx.as_of
    puts = [
        measure_contract(c, market=market, rules=default_rules(ctx, right="put"))
        for c in chain.puts()
        if c.expiry == expiry
    ]
    skew = put_skew([p for p in puts if p.get("iv")]) if puts else None
    move = (
        earnings_implied_move(term=term, earnings_day=params.earnings_date, spot=market.spot)
        if params.earnings_date is not None
        else None
    )
    data = {
        **_chain_header(chain, inputs),
        "hv_cone": cone,
        "term": term,
        "iv_rank": rank,
        "iv_rank_note": (
            "no stored daily IVs for this symbol (only Lean chains carry them)"
            if rank is None
            else f"over {rank['sessions']} stored sessions {rank['first']}..{rank['last']} (Lean's own "
            "at-the-money IVs nearest 30 days, solved from trade prices)"
            + ("" if rank["meaningful"] else ": too few to mean much (a rank wants a month or more)")
        ),
        "skew": skew,
        "earnings_move": move,
    }
    if cone is None:
        data["hv_cone_error"] = why or f"{len(closes)} closes"
    summary = f"{params.symbol} {chain.quote_date}: option context ({len(term)} expiries)"
    return ToolOutput(data=data, summary=summary, source_refs=(file_ref(chain),), symbol=params.symbol)


def _atm30(day: Any) -> float | None:
    """The stored day's at-the-money IV of the expiry nearest 30 calendar days (mean of the put
    and the call at the strike nearest its close)."""
    expiries = sorted({c[0] for c in day.contracts if (c[0] - day.day).days >= 7})
    if not expiries:
        return None
    expiry = min(expiries, key=lambda e: abs((e - day.day).days - 30))
    rows = [c for c in day.contracts if c[0] == expiry]
    strike = min({c[2] for c in rows}, key=lambda k: abs(k - day.underlying_close))
    ivs = [c[3] for c in rows if c[2] == strike]
    return sum(ivs) / len(ivs) if ivs else None


# -- get_corporate_events --------------------------------------------------------------------------


class CorporateEventsInput(BaseModel):
    """``{symbol, days}``."""

    model_config = ConfigDict(extra="forbid")

    symbol: Symbol = Field(description="Ticker")
    days: int = Field(default=45, ge=1, le=400, description="Calendar days after as_of to look at")
    contract: Contract | None = Field(
        default=None,
        description="A call sold on the shares (OCC symbol): check each ex-dividend date before its last "
        "trading day for early assignment",
    )


@register(
    name="get_corporate_events",
    description=(
        "Ex-dividend dates (amount USD/share) and splits (ratio) of a symbol after the analysis date, "
        "from the Lean factor files (FINAGENT_OPTIONS_DIVIDENDS_DIR); says through which day"
        " the file vouches "
        "there are no others. With a call contract: for each ex-dividend date before its last trading "
        "day, the price above which its time value falls below the dividend (early assignment the day "
        "before) and the probability of being above it then, risk-neutral and real-world."
    ),
    input_model=CorporateEventsInput,
)
def get_corporate_events(params: CorporateEventsInput, ctx: ToolContext) -> ToolOutput:
    """Returns data ``{symbol, as_of, until (ISO), events: [{kind: dividend|split, ex_date,
    amount?, ratio?}], covered_through (ISO), evaluated (bool: the file vouches through
    ``until``), early_assignment?: [...]}``; ``early_assignment`` (with a call ``contract``) has
    one entry per ex-dividend date before the contract's last trading day: ``{ex_date, eve,
    dividend (USD/share in the chain's units), time_value_now, threshold (USD: the price on the
    eve above which the call's time value is below the dividend; null: never), p_above_rn,
    p_above_rw, likely}`` (:func:`agents.quant.options.economics.early_exercise_threshold`).
    Raises ToolInputError ``NOT_CONFIGURED`` without ``FINAGENT_OPTIONS_DIVIDENDS_DIR``, ``NO_DATA``
    without a factor file of the symbol (or, with a contract, without its chain)."""
    from agents.data.options.dividends import DividendDataError, read_factor_file

    folder = ctx.settings.options.dividends_dir
    if folder is None:
        raise ToolInputError("FINAGENT_OPTIONS_DIVIDENDS_DIR is not set", code=ErrorCode.NOT_CONFIGURED)
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
    refs: tuple[str, ...] = (f"lean:factor_files/{found.path.name}",)
    if params.contract is not None:
        data["early_assignment"], chain_ref = _early_assignment(ctx, params.symbol, params.contract, found)
        refs = (*refs, chain_ref)
    summary = f"{params.symbol} {ctx.as_of}..{until}: {len(events)} corporate events"
    return ToolOutput(data=data, summary=summary, source_refs=refs, symbol=params.symbol)


def _early_assignment(
    ctx: ToolContext, symbol: str, contract: str, found: Any
) -> tuple[list[dict[str, Any]], str]:
    """The early-assignment check of a call (``get_corporate_events``' docstring) and the chain's
    citation. Raises ToolInputError ``INVALID_INPUT`` for a put or a contract not quoted."""
    from agents.data.market_calendar import last_session_on_or_before, sessions_between
    from agents.quant.options.economics import call_time_value, early_exercise_threshold
    from agents.quant.options.pricing import PricingError, greeks_from_price
    from agents.quant.options.probabilities import rn_prob_below

    match = _OCC.match(contract)
    if match is None or match["right"] != "C":
        raise ToolInputError(f"early assignment is checked for a call, got {contract}")
    chain = load_chain(ctx, symbol, dte_max=400)
    quote = chain.by_contract().get(contract)
    if quote is None:
        raise ToolInputError(f"{contract} is not quoted on {chain.quote_date}", code=ErrorCode.NO_DATA)
    inputs = market_of(ctx, chain)
    market, _ = pricing_market(ctx, chain, inputs)
    try:
        iv = greeks_from_price(
            right="call", price=quote.mid, spot=market.spot, strike=quote.strike,
            dte=quote.dte(chain.quote_date), r=market.r, q=market.q,
        ).iv  # fmt: skip
    except PricingError as exc:
        raise ToolInputError(f"{contract}: {exc}", code=ErrorCode.NO_DATA) from None
    last = quote.last_trading_day
    out: list[dict[str, Any]] = []
    splits = [e for e in found.events if e.kind == "split"]
    for event in found.between(ctx.as_of, last):
        if event.kind != "dividend" or event.amount is None:
            continue
        # a split between as_of and the ex-date: the dividend is per new share; in the chain's
        # (pre-split) units it is the amount times the ratio
        ratio = 1.0
        for sp in splits:
            if ctx.as_of < sp.ex_date <= event.ex_date and sp.ratio:
                ratio *= float(sp.ratio)
        dividend = float(event.amount) * ratio
        eve = last_session_on_or_before(event.ex_date - timedelta(days=1))
        tau = max((last - eve).days, 1) / 365.0
        t_eve = max((eve - chain.quote_date).days, 1) / 365.0
        threshold = early_exercise_threshold(
            strike=quote.strike, dividend=dividend, tau=tau, r=market.r, q=market.q, sigma=iv
        )
        now_tv = call_time_value(
            spot=market.spot, strike=quote.strike, tau=quote.dte(chain.quote_date) / 365.0, r=market.r,
            q=market.q, sigma=iv,
        )  # fmt: skip
        entry: dict[str, Any] = {
            "ex_date": event.ex_date.isoformat(),
            "eve": eve.isoformat(),
            "dividend": round(dividend, 4),
            "time_value_now": round(now_tv, 4),
            "threshold": round(threshold, 2) if threshold is not None else None,
            "p_above_rn": None,
            "p_above_rw": None,
        }
        if threshold is not None:
            entry["p_above_rn"] = round(
                1.0
                - rn_prob_below(spot=market.spot, level=threshold, t=t_eve, r=market.r, q=market.q, sigma=iv),
                4,
            )
            rw = market.real_world
            if rw is not None:
                h = sessions_between(chain.quote_date, eve)
                entry["p_above_rw"] = round(1.0 - rw.prob_below(threshold, h), 4) if h > 0 else None
        p = entry["p_above_rw"] if entry["p_above_rw"] is not None else entry["p_above_rn"]
        entry["likely"] = bool(p is not None and p >= 0.5)
        out.append(entry)
    return out, file_ref(chain)
