"""The ``data`` group of the settings (``Settings.data``); variables stay ``FINAGENT_<FIELD>``."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

#: The built-in values of FINAGENT_DATA_PROVIDER (besides 'module:attribute' plug-ins): the rows of
#: the data routing table that serve bars (agents.data.routing; a test checks the two agree).
DATA_PROVIDER_NAMES: tuple[str, ...] = ("embedded", "csv", "yfinance")


class DataSettings(BaseModel):
    """Market data, fundamentals and news sources, the tool-level retry and the shared
    provider rate limit and bar cache.
    """

    model_config = ConfigDict(extra="forbid", validate_default=True)

    provider: str = Field(
        default="embedded",
        description="embedded | csv | yfinance, or 'module:attribute' naming a provider factory.",
    )
    dir: Path | None = Field(
        default=None,
        description="Folder of Yahoo-format CSVs for the csv provider.",
        json_schema_extra={"unit": "path"},
    )
    csv_cache_files: int = Field(
        default=256,
        ge=1,
        le=100_000,
        description=(
            "Parsed CSV files the csv provider keeps per process (least recently used out; a "
            "5-year daily file is ~0.2 MB parsed). More: fewer re-parses on a night of thousands "
            "of tickers; fewer: less memory per worker child."
        ),
        json_schema_extra={"unit": "files"},
    )
    # Fundamentals and news. Unset folders → those tools answer NOT_CONFIGURED.
    fundamentals_dir: Path | None = Field(
        default=None,
        description="Folder with sp500/, alphavantage/, sec_companyfacts/ (../shared/data/fundamentals).",
        json_schema_extra={"unit": "path"},
    )
    news_provider: Literal["files", "rss", "tavily", "yfinance"] = Field(
        default="files",
        description="files (FINAGENT_DATA_NEWS_DIR) | rss (FINAGENT_DATA_NEWS_RSS_URLS) |"
        " tavily | yfinance (online).",
    )
    news_dir: Path | None = Field(
        default=None,
        description="Folder of headline CSVs (title|headline, date, stock), e.g. Benzinga's.",
        json_schema_extra={"unit": "path"},
    )
    social_dir: Path | None = Field(
        default=None,
        description="Folder of {TICKER}.jsonl tweet files (stocknet format) for get_social_posts.",
        json_schema_extra={"unit": "path"},
    )
    news_rss_urls: str = Field(
        default="",
        description="Comma-separated RSS/Atom feed URLs or file paths.",
        json_schema_extra={"unit": "URLs"},
    )
    tavily_api_key: SecretStr | None = Field(default=None, description="Tavily API key; never logged.")
    tavily_url: str = Field(
        default="https://api.tavily.com/search",
        description="Tavily search endpoint.",
        json_schema_extra={"unit": "URL"},
    )
    # Tool-level retry (docs/design.md, "Tool retries"): only timeouts, after 0.5 * 2**attempt s.
    tool_max_retries: int = Field(
        default=3,
        ge=0,
        le=6,
        description="Retries of a tool call that timed out (exponential backoff).",
        json_schema_extra={"unit": "retries"},
    )
    tool_backoff_base: float = Field(
        default=0.5, gt=0, description="Seconds; attempt n waits base*2**n.", json_schema_extra={"unit": "s"}
    )
    tool_timeout: float = Field(
        default=10.0, gt=0, description="Seconds per provider request.", json_schema_extra={"unit": "s"}
    )
    # Shared across workers for remote market-data providers (a shared bar cache and rate limit).
    provider_rate_limit: float | None = Field(
        default=None,
        gt=0,
        description="Requests/s allowed to a remote provider, all workers together.",
        json_schema_extra={"unit": "requests/s"},
    )
    provider_rate_burst: int = Field(
        default=5,
        ge=1,
        description="Token-bucket capacity of that limit.",
        json_schema_extra={"unit": "requests"},
    )
    bars_cache_ttl: int = Field(
        default=6 * 3600,
        ge=1,
        description="Seconds a remote provider's bars stay in the shared cache.",
        json_schema_extra={"unit": "s"},
    )
    symbol_directory_file: Path | None = Field(
        default=None,
        description="CSV with Symbol and Name columns adding company names to parse_query's directory "
        "(e.g. ../shared/data/fundamentals/sp500/constituents-financials.csv).",
        json_schema_extra={"unit": "path"},
    )

    @field_validator("provider")
    @classmethod
    def _provider_name(cls, value: str) -> str:
        value = value.strip()
        if value in DATA_PROVIDER_NAMES or ":" in value:
            return value
        raise ValueError(
            f"FINAGENT_DATA_PROVIDER must be {', '.join(DATA_PROVIDER_NAMES)} or 'module:attribute'"
        )
