"""The ``options`` group of the settings (``Settings.options``); variables stay ``FINAGENT_<FIELD>``."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class OptionsSettings(BaseModel):
    """Option chains and the rules of the option plans (docs/design.md, "Option rules"); the
    ``csp_`` settings apply to every option plan (cash-secured puts, covered calls, put spreads)."""

    model_config = ConfigDict(extra="forbid", validate_default=True)

    # Option plans. Defaults: docs/design.md, "Option rules".
    dir: Path | None = Field(
        default=None,
        description="Folder of offline option-chain snapshots (Lean EOD, CBOE quotedata, yfinance CSV), "
        "e.g. ../shared/data/options; unset → the option tools answer NOT_CONFIGURED.",
        json_schema_extra={"unit": "path"},
    )
    dividends_dir: Path | None = Field(
        default=None,
        description="Folder of Lean equity factor files (<symbol>.csv: date,price_factor,split_factor,"
        "ref_price), e.g. ../shared/data/ohlcv/lean/factor_files: the ex-dividend dates a covered call "
        "checks; unset → dividends are 'not evaluated'.",
        json_schema_extra={"unit": "path"},
    )
    risk_free_rate: float | None = Field(
        default=None,
        ge=-0.05,
        le=0.25,
        description="Continuously compounded risk-free rate for BSM (fraction/year); unset → the "
        "3-month T-bill of the quote day from the shipped FRED DTB3 series (2012 .. 2026-03).",
        json_schema_extra={"unit": "fraction/year"},
    )
    spot_tolerance: float = Field(
        default=0.005,
        gt=0,
        le=0.5,
        description="Largest relative gap between the chain's quoted underlying and its put-call "
        "parity spot; beyond it (or when the quote is an after-hours print) the parity spot is used.",
        json_schema_extra={"unit": "fraction"},
    )
    dividend_yield: float = Field(
        default=0.0,
        ge=0,
        le=0.25,
        description="Continuous dividend yield q for BSM (fraction/year).",
        json_schema_extra={"unit": "fraction/year"},
    )
    delta_min: float = Field(
        default=0.15,
        gt=0,
        lt=1,
        description="Smallest |delta| of a contract an option plan sells.",
        json_schema_extra={"unit": "|delta|"},
    )
    delta_max: float = Field(
        default=0.25,
        gt=0,
        lt=1,
        description="Largest |delta| of a contract an option plan sells (0.25: assigned about one time "
        "in four at most, by the risk-neutral measure).",
        json_schema_extra={"unit": "|delta|"},
    )
    dte_min: int = Field(
        default=14, ge=0, le=3650, description="Fewest days to expiry.", json_schema_extra={"unit": "days"}
    )
    dte_max: int = Field(
        default=45, ge=0, le=3650, description="Most days to expiry.", json_schema_extra={"unit": "days"}
    )
    min_weekly_roc: float = Field(
        default=0.0,
        ge=0,
        description="Optional floor on the weekly income yield (time value at the fill less fees over the "
        "capital; 0 = off). The yield floor that ranks is min_excess_yield.",
        json_schema_extra={"unit": "fraction"},
    )
    min_excess_yield: float = Field(
        default=0.06,
        ge=0,
        le=5,
        description="Annualised income yield over the 3-month T-bill a contract must reach (0.06 = 6 % a "
        "year; about the equity risk premium a seller of stock downside should be paid at least).",
        json_schema_extra={"unit": "fraction/year"},
    )
    min_iv_hv: float = Field(
        default=0.8,
        ge=0,
        description="At-the-money IV over the real-world σ forecast an option plan needs; below it the "
        "premium pays clearly less than the move the model expects (0.8: HV(20)'s own sampling error is "
        "about 16 %, so IV within 20 % below the forecast is not evidence of cheap premium).",
        json_schema_extra={"unit": "ratio"},
    )
    hv_period: int = Field(
        default=20,
        ge=5,
        le=252,
        description="Bars of the HV used against IV.",
        json_schema_extra={"unit": "bars"},
    )
    # Liquidity (docs/design.md, "Option rules"): a desk's floors, ours: a spread within 5 % of the mid
    # (or 0.10 USD for cheap contracts), 500 contracts open and 10 traded on the day: a market a few
    # contracts can be sold into and closed again without paying the spread twice over.
    max_spread_pct: float = Field(
        default=0.05,
        gt=0,
        description="Largest (ask - bid) / mid of a contract an option plan sells (fraction); a spread "
        "within max_spread_abs passes whatever its fraction.",
        json_schema_extra={"unit": "fraction"},
    )
    max_spread_abs: float = Field(
        default=0.10,
        ge=0,
        description="A spread (ask - bid) at or below this passes the spread floor whatever its fraction "
        "of the mid (USD/share; two ticks of a cheap contract).",
        json_schema_extra={"unit": "USD/share"},
    )
    min_open_interest: int = Field(
        default=500,
        ge=0,
        description="Fewest open contracts of a contract an option plan sells (unknown fails).",
        json_schema_extra={"unit": "contracts"},
    )
    fill: Literal["bid", "mid_minus_tick"] = Field(
        default="bid",
        description="What a sold contract fills at, and every yield, breakeven and POP assumes: bid, or "
        "mid_minus_tick (the mid less 0.05 USD at 3 USD and above, 0.01 below; never below the bid).",
    )
    fee_per_contract: float = Field(
        default=0.65,
        ge=0,
        le=100,
        description="Commission and fees per contract sold (USD), taken from the premium before ROC.",
        json_schema_extra={"unit": "USD/contract"},
    )
    max_collateral_pct: float = Field(
        default=0.20,
        gt=0,
        le=1.0,
        description="Per-name cap of the option plans' sizing: the collateral of all contracts (a put's "
        "strike x 100, a spread's width x 100) plus the shares already held in the symbol, at most this "
        "fraction of the account (and never more than its cash).",
        json_schema_extra={"unit": "fraction"},
    )
    max_gap_loss_pct: float = Field(
        default=0.05,
        gt=0,
        le=1.0,
        description="Sizing: the loss of all contracts if the stock gaps 20 % down at most this fraction "
        "of the account.",
        json_schema_extra={"unit": "fraction"},
    )
    min_volume: int = Field(
        default=10,
        ge=0,
        description="Fewest contracts traded on the quote day.",
        json_schema_extra={"unit": "contracts"},
    )
