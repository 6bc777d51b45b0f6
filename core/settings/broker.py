"""The ``broker`` group of the settings (``Settings.broker``); variables stay ``FINAGENT_<FIELD>``."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, SecretStr


class BrokerSettings(BaseModel):
    """The paper broker (trade_simulate / trade_execute: cash, fees, order limits, risk
    metrics) and Alpaca market data. USD; weights are fractions.
    """

    model_config = ConfigDict(extra="forbid", validate_default=True)

    # Paper broker (trade_simulate / trade_execute). USD; weights are fractions.
    portfolio_default_user: str = Field(default="default", description="user_id when a tool is given none.")
    starting_cash: float = Field(
        default=100_000.0, ge=0, description="USD of a new paper account.", json_schema_extra={"unit": "USD"}
    )
    # Fee model: Interactive Brokers "fixed" US equity pricing (0.005 USD/share, 1 USD minimum,
    # at most 1 % of the trade value), the common retail reference for per-share commissions.
    fee_per_share: float = Field(
        default=0.005, ge=0, description="USD per share.", json_schema_extra={"unit": "USD/share"}
    )
    fee_minimum: float = Field(
        default=1.0, ge=0, description="USD minimum per filled order.", json_schema_extra={"unit": "USD"}
    )
    fee_max_fraction: float = Field(
        default=0.01,
        ge=0,
        le=1,
        description="Fee cap as a fraction of the fill's notional.",
        json_schema_extra={"unit": "fraction"},
    )
    max_position_weight: float = Field(
        default=0.25,
        gt=0,
        le=1,
        description="Max weight of one symbol after a buy (fraction of total).",
        json_schema_extra={"unit": "fraction"},
    )
    max_order_notional: float = Field(
        default=50_000.0,
        gt=0,
        description="Max USD notional (quantity x reference price) of one order.",
        json_schema_extra={"unit": "USD"},
    )
    # zipline's VolumeShareSlippage default volume_limit (2.5 % of the bar's volume).
    max_volume_fraction: float = Field(
        default=0.025,
        gt=0,
        le=1,
        description="Max fill as a fraction of the as_of bar volume.",
        json_schema_extra={"unit": "fraction"},
    )
    risk_window_bars: int = Field(
        default=252,
        ge=5,
        le=2520,
        description="Daily bars of history behind trade_simulate's risk metrics.",
        json_schema_extra={"unit": "bars"},
    )
    risk_free_rate: float = Field(
        default=0.0,
        ge=0,
        lt=1,
        description="Annual risk-free rate (fraction) for the Sharpe ratio.",
        json_schema_extra={"unit": "fraction/year"},
    )
    alpaca_api_key: SecretStr | None = Field(
        default=None, description="Alpaca API key id (header APCA-API-KEY-ID); never logged."
    )
    alpaca_secret_key: SecretStr | None = Field(
        default=None, description="Alpaca API secret (header APCA-API-SECRET-KEY); never logged."
    )
    alpaca_use_sandbox: bool = Field(default=False, description="Use Alpaca's sandbox data URL.")
    alpaca_data_url: str | None = Field(
        default=None,
        description="Override of the Alpaca data base URL ending in /v2 (tests, proxies).",
        json_schema_extra={"unit": "URL"},
    )
    alpaca_retry_base: float = Field(
        default=1.0,
        ge=0,
        description="Seconds; Alpaca timeout retries wait base*2**n (1, 2, 4 s).",
        json_schema_extra={"unit": "s"},
    )
    # Alpaca's own token bucket (agents.data.market.shared, bucket "alpaca"): a second vendor with
    # its own account limit, so not FINAGENT_DATA_PROVIDER_RATE_LIMIT (the bar provider's).
    alpaca_rate_per_min: float = Field(
        default=200.0,
        gt=0,
        description="Alpaca requests per minute, all workers together (free plan: 200/min).",
        json_schema_extra={"unit": "requests/min"},
    )
    alpaca_rate_burst: int = Field(
        default=10,
        ge=1,
        description="Capacity of the Alpaca token bucket (requests sent back to back).",
        json_schema_extra={"unit": "requests"},
    )
