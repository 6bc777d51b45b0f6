"""The ``watchlists`` group of the settings (``Settings.watchlists``); variables stay ``FINAGENT_<FIELD>``."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class WatchlistSettings(BaseModel):
    """Watchlists and their beat schedule, and the per-tenant watchlist quotas
    (docs/security.md, "Quotas").
    """

    model_config = ConfigDict(extra="forbid", validate_default=True)

    schedule: str = Field(
        default="30 21 * * 1-5",
        description="Default cron of a new watchlist (after the US close).",
        json_schema_extra={"unit": "cron"},
    )
    timezone: str = Field(
        default="America/New_York",
        description="Default watchlist zone.",
        json_schema_extra={"unit": "IANA zone"},
    )
    tick_seconds: int = Field(
        default=60,
        ge=1,
        description="How often beat checks for due watchlists (the cron resolution).",
        json_schema_extra={"unit": "s"},
    )
    finalize_countdown: int = Field(
        default=30,
        ge=1,
        le=600,
        description="Seconds between checks whether a run's analyses finished.",
        json_schema_extra={"unit": "s"},
    )
    run_timeout: int = Field(
        default=7200,
        ge=60,
        description="Seconds after which a run's unfinished analyses are reported as failed in its digest.",
        json_schema_extra={"unit": "s"},
    )
    # Watchlists cost worker time every night they run: caps per tenant (docs/security.md,
    # "Quotas"). 20 lists of at most 200 tickers and 500 tickers in all is a large team's
    # coverage (the S&P 500); the daily allowance of scheduled analyses equals the ticker cap,
    # so one run per watchlist a day always fits and churn (delete, re-create) does not.
    tenant_max_watchlists: int = Field(
        default=20,
        ge=1,
        description="Watchlists one tenant may hold; one more → 409.",
        json_schema_extra={"unit": "watchlists"},
    )
    max_tickers: int = Field(
        default=200,
        ge=1,
        le=200,
        description="Tickers of one watchlist (at most 200, the API's own bound); more → 422.",
        json_schema_extra={"unit": "tickers"},
    )
    tenant_max_tickers: int = Field(
        default=500,
        ge=1,
        description="Tickers of all of a tenant's watchlists together (a ticker in two lists counts "
        "twice: each is analysed); more → 409.",
        json_schema_extra={"unit": "tickers"},
    )
    tenant_scheduled_analyses_per_day: int = Field(
        default=500,
        ge=0,
        description="Analyses one tenant's scheduled (beat) watchlist runs may start per UTC day; the "
        "rest of a run's tickers are refused and listed in its digest.",
        json_schema_extra={"unit": "analyses/day"},
    )
