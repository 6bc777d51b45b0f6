"""The ``options`` group of the settings (``Settings.options``); variables stay ``FINAGENT_<FIELD>``."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field


class OptionsSettings(BaseModel):
    """Option chains and the cash-secured-put rules (docs/design.md, "CSP rules")."""

    model_config = ConfigDict(extra="forbid", validate_default=True)

    # Options and cash-secured puts. Defaults: docs/design.md, "CSP rules".
    options_dir: Path | None = Field(
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
    options_risk_free_rate: float | None = Field(
        default=None,
        ge=-0.05,
        le=0.25,
        description="Continuously compounded risk-free rate for BSM (fraction/year); unset → the "
        "3-month T-bill of the quote day from the shipped FRED DTB3 series (2012 .. 2026-03).",
        json_schema_extra={"unit": "fraction/year"},
    )
    options_spot_tolerance: float = Field(
        default=0.005,
        gt=0,
        le=0.5,
        description="Largest relative gap between the chain's quoted underlying and its put-call "
        "parity spot; beyond it (or when the quote is an after-hours print) the parity spot is used.",
        json_schema_extra={"unit": "fraction"},
    )
    options_dividend_yield: float = Field(
        default=0.0,
        ge=0,
        le=0.25,
        description="Continuous dividend yield q for BSM (fraction/year).",
        json_schema_extra={"unit": "fraction/year"},
    )
    csp_delta_min: float = Field(
        default=0.15,
        gt=0,
        lt=1,
        description="Smallest |delta| of a CSP.",
        json_schema_extra={"unit": "|delta|"},
    )
    csp_delta_max: float = Field(
        default=0.30,
        gt=0,
        lt=1,
        description="Largest |delta| of a CSP.",
        json_schema_extra={"unit": "|delta|"},
    )
    csp_dte_min: int = Field(
        default=14, ge=0, le=3650, description="Fewest days to expiry.", json_schema_extra={"unit": "days"}
    )
    csp_dte_max: int = Field(
        default=45, ge=0, le=3650, description="Most days to expiry.", json_schema_extra={"unit": "days"}
    )
    csp_min_weekly_roc: float = Field(
        default=0.005,
        ge=0,
        description="Weekly return on collateral a CSP must exceed (0.005 = 0.5 %).",
        json_schema_extra={"unit": "fraction"},
    )
    csp_min_iv_hv: float = Field(
        default=1.0,
        ge=0,
        description="IV/HV a CSP needs (IV >= HV: rich premiums).",
        json_schema_extra={"unit": "ratio"},
    )
    csp_hv_period: int = Field(
        default=20,
        ge=5,
        le=252,
        description="Bars of the HV used against IV.",
        json_schema_extra={"unit": "bars"},
    )
    # Liquidity (tight spreads, traded volume; docs/design.md, "CSP rules"): our numbers; 10 % of the mid,
    # 100 contracts open and one trade on the day are common retail screens for listed equity options.
    csp_max_spread_pct: float = Field(
        default=0.10,
        gt=0,
        description="Largest (ask - bid) / mid of a CSP contract (fraction).",
        json_schema_extra={"unit": "fraction"},
    )
    csp_min_open_interest: int = Field(
        default=100,
        ge=0,
        description="Fewest open contracts of a CSP.",
        json_schema_extra={"unit": "contracts"},
    )
    csp_fill_slippage: float = Field(
        default=1.0,
        ge=0,
        le=1,
        description="Where a sold put fills between mid and bid, as a fraction of the half-spread "
        "given up: 1 = at the bid (default), 0 = at the mid; never above the mid.",
        json_schema_extra={"unit": "fraction of (mid - bid)"},
    )
    csp_fee_per_contract: float = Field(
        default=0.65,
        ge=0,
        le=100,
        description="Commission and fees per contract sold (USD), taken from the premium before ROC.",
        json_schema_extra={"unit": "USD/contract"},
    )
    csp_max_collateral_pct: float = Field(
        default=1.0,
        gt=0,
        le=1.0,
        description="Sizing of a suggested put against the paper portfolio: the collateral of all its "
        "contracts, plus the shares already held in the symbol, at most this fraction of the account "
        "(and never more than its cash); 1.0 = the cash check alone.",
        json_schema_extra={"unit": "fraction"},
    )
    csp_full_open_interest: int = Field(
        default=1000,
        ge=10,
        description="Open interest at or above which a put's ranking carries no open-interest penalty "
        "(below it the score is scaled by log10(OI)/log10(this)).",
        json_schema_extra={"unit": "contracts"},
    )
    csp_min_volume: int = Field(
        default=1,
        ge=0,
        description="Fewest contracts traded on the quote day.",
        json_schema_extra={"unit": "contracts"},
    )
