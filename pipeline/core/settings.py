"""One pydantic-settings ``Settings`` for the whole product (env prefix ``FINAGENT_``).

Every tunable has a safe default and an environment variable. The embedded default needs no
variable at all: no broker URL means an in-process Celery worker on kombu's in-memory transport
and a SQLite file, so ``finagent analyze AAPL`` works on a fresh machine.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

# LiteLLM fetches a price map over the network at import unless this is set (guide/LLM.md).
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

DEFAULT_STATE_DIR = Path(os.environ.get("XDG_STATE_HOME", Path.home() / ".local" / "state")) / "finagent"


class Settings(BaseSettings):
    """Runtime configuration, read from ``FINAGENT_*`` environment variables (and ``.env``).

    Units: seconds for every timeout and countdown. Invariants between them (time limits and
    retry backoff below the Redis visibility timeout) are checked in ``tests/test_settings.py``
    against ``shared/guide/CELERY.md``.
    """

    model_config = SettingsConfigDict(env_prefix="FINAGENT_", env_file=".env", extra="ignore")

    broker_url: str | None = Field(
        default=None, description="Celery broker URL (redis://..., amqp://...). Unset: embedded mode."
    )
    result_backend: str | None = Field(
        default=None, description="Celery result backend URL. Unset: the broker URL if Redis, else none."
    )
    database_url: str | None = Field(
        default=None,
        description="SQLAlchemy URL (postgresql+psycopg://...). Unset: a SQLite file in the state dir.",
    )
    state_dir: Path = Field(
        default=DEFAULT_STATE_DIR, description="Where embedded mode keeps its SQLite file."
    )

    data_provider: str = Field(
        default="embedded",
        description="embedded | csv | yfinance, or 'module:attribute' naming a provider factory.",
    )
    data_dir: Path | None = Field(
        default=None, description="Folder of Yahoo-format CSVs for the csv provider."
    )
    # Fundamentals and news (seed 002). Unset folders → those tools answer NOT_CONFIGURED.
    fundamentals_dir: Path | None = Field(
        default=None,
        description="Folder with sp500/, alphavantage/, sec_companyfacts/ (../shared/data/fundamentals).",
    )
    news_provider: Literal["files", "rss", "tavily", "yfinance"] = Field(
        default="files",
        description="files (FINAGENT_NEWS_DIR) | rss (FINAGENT_NEWS_RSS_URLS) | tavily | yfinance (online).",
    )
    news_dir: Path | None = Field(
        default=None, description="Folder of headline CSVs (title|headline, date, stock), e.g. Benzinga's."
    )
    news_rss_urls: str = Field(default="", description="Comma-separated RSS/Atom feed URLs or file paths.")
    tavily_api_key: SecretStr | None = Field(default=None, description="Tavily API key; never logged.")
    tavily_url: str = Field(default="https://api.tavily.com/search", description="Tavily search endpoint.")

    max_iterations: int = Field(default=3, ge=1, le=10, description="Seed 001: max_iterations of a run.")

    # Tool-level retry (seed 001: sleep 0.5 * 2**attempt; seed 000: only timeouts are retried).
    tool_max_retries: int = Field(default=3, ge=0, le=6)
    tool_backoff_base: float = Field(default=0.5, gt=0, description="Seconds; attempt n waits base*2**n.")
    tool_timeout: float = Field(
        default=10.0, gt=0, description="Seconds per provider request (seed 000: 10 s)."
    )

    # Celery task-level policy and durability (docs/architecture.md, "Durability: the arithmetic").
    # The Redis visibility timeout must exceed the longest time a message is legitimately held
    # unacked: a running stage (task_time_limit) or a retry waiting for its countdown
    # (task_retry_backoff_max); past it Redis redelivers (guide CELERY.md; celery#2599, #4400).
    # 180 + 120 < 420: a message of a worker killed with SIGKILL returns within 7 minutes.
    visibility_timeout: int = Field(
        default=420, ge=10, description="Redis visibility timeout, seconds (> task_time_limit + backoff max)."
    )
    task_soft_time_limit: int = Field(default=120, ge=1)
    task_time_limit: int = Field(default=180, ge=1)
    task_max_retries: int = Field(default=5, ge=0)
    task_retry_backoff_max: int = Field(
        default=120, ge=1, description="Cap of the exponential task backoff, seconds."
    )
    max_redeliveries: int = Field(
        default=3, ge=0, description="Redelivered copies of one stage message (a killed worker) allowed."
    )
    rabbitmq_queue_type: Literal["quorum", "classic"] = Field(
        default="quorum",
        description=(
            "RabbitMQ only: queue type of the finagent queues. Quorum queues are replicated and "
            "durable (a queued message survives a broker restart); classic ones are durable too."
        ),
    )
    lease_seconds: int = Field(
        default=300,
        ge=5,
        description=(
            "Lease of an analysis on its current step: a stage that holds it longer (above "
            "task_time_limit) or a step nobody started within it is stalled and re-driven."
        ),
    )
    max_recoveries: int = Field(
        default=3,
        ge=0,
        description="Re-drives of one analysis by the recovery sweep before it fails STALLED.",
    )
    sweep_seconds: int = Field(
        default=60, ge=1, description="Seconds between recovery sweeps (a beat entry)."
    )

    wait_poll_interval: float = Field(
        default=0.05, gt=0, description="Seconds between status polls of --wait."
    )
    wait_timeout: float = Field(
        default=600.0, gt=0, description="Seconds `finagent analyze` waits for a report."
    )

    log_level: str = Field(default="INFO")

    # Shared across workers for remote market-data providers (a shared bar cache and rate limit).
    provider_rate_limit: float | None = Field(
        default=None, gt=0, description="Requests/s allowed to a remote provider, all workers together."
    )
    provider_rate_burst: int = Field(default=5, ge=1, description="Token-bucket capacity of that limit.")
    bars_cache_ttl: int = Field(
        default=6 * 3600, ge=1, description="Seconds a remote provider's bars stay in the shared cache."
    )

    # Operations (seed 003): HTTP gateway, sessions, watchlists, beat.
    api_host: str = Field(default="127.0.0.1", description="`finagent serve` bind address.")
    api_port: int = Field(default=8000, ge=1, le=65535, description="`finagent serve` port.")
    api_max_body_bytes: int = Field(
        default=1_000_000,
        ge=1024,
        description="Largest request body the gateway reads (bytes); larger → 413.",
    )
    health_timeout: float = Field(
        default=2.0, gt=0, description="Seconds GET /health waits for workers' replies and its echo task."
    )
    session_ttl: int = Field(
        default=3600, ge=1, description="Seconds a conversation session lives after its last request."
    )
    session_redis_url: str | None = Field(
        default=None, description="Redis for sessions. Unset: the broker if Redis, else in memory."
    )
    watchlist_schedule: str = Field(
        default="30 21 * * 1-5", description="Default cron of a new watchlist (after the US close)."
    )
    watchlist_timezone: str = Field(default="America/New_York", description="Default watchlist zone.")
    watchlist_tick_seconds: int = Field(
        default=60, ge=1, description="How often beat checks for due watchlists (the cron resolution)."
    )
    watchlist_finalize_countdown: int = Field(
        default=30, ge=1, le=600, description="Seconds between checks whether a run's analyses finished."
    )
    watchlist_run_timeout: int = Field(
        default=7200,
        ge=60,
        description="Seconds after which a run's unfinished analyses are reported as failed in its digest.",
    )
    idempotency_ttl: int = Field(
        default=86400,
        ge=60,
        description="Seconds an Idempotency-Key stays bound to its analysis (24 h, as Stripe's); after "
        "that the same key starts a new analysis.",
    )
    beat_lock_timeout: int = Field(
        default=30, ge=5, description="redbeat lock TTL (s): a dead beat's standby takes over after it."
    )
    flower_port: int = Field(default=5555, ge=1, le=65535, description="`finagent flower` port.")

    # LLM agents (guide LLM.md). No model → the deterministic analysts, litellm never imported.
    llm_model: str | None = Field(
        default=None, description="LiteLLM model string for every agent role, e.g. openai/gpt-4o."
    )
    llm_model_query: str | None = Field(default=None, description="Override for parse_query.")
    llm_model_technical: str | None = Field(default=None, description="Override for the technical analyst.")
    llm_model_fundamental: str | None = Field(
        default=None, description="Override for the fundamental analyst."
    )
    llm_model_sentiment: str | None = Field(default=None, description="Override for the sentiment analyst.")
    llm_model_synthesis: str | None = Field(
        default=None, description="Override for synthesis and the grounding correction."
    )
    llm_fallbacks: str = Field(
        default="", description="Comma-separated LiteLLM model strings tried in order after the primary."
    )
    llm_api_base: str | None = Field(
        default=None, description="Base URL of an OpenAI-compatible server (Ollama, llama.cpp, vLLM)."
    )
    llm_api_key: SecretStr | None = Field(default=None, description="API key for llm_api_base; never logged.")
    llm_num_retries: int = Field(
        default=2, ge=0, le=5, description="Retries of one model on 429/5xx/timeouts before the fallback."
    )
    llm_retry_backoff: float = Field(
        default=1.0, ge=0, description="Seconds; retry n of a model waits backoff*2**(n-1)."
    )
    llm_timeout: float = Field(default=60.0, gt=0, description="Seconds per LLM request.")
    llm_max_tokens: int = Field(default=1024, ge=16, description="Completion tokens per LLM request.")
    llm_max_iterations: int = Field(
        default=3, ge=1, le=20, description="Tool-calling rounds per agent before the final answer is forced."
    )
    llm_input_cost_per_token: float | None = Field(
        default=None, ge=0, description="USD per prompt token for models missing in LiteLLM's price map."
    )
    llm_output_cost_per_token: float | None = Field(
        default=None, ge=0, description="USD per completion token for models missing in LiteLLM's price map."
    )
    llm_budget_tokens: int = Field(
        default=60_000, ge=0, description="Max prompt+completion tokens per analysis (all passes)."
    )
    llm_budget_usd: float = Field(default=1.0, ge=0, description="Max USD per analysis (known prices only).")
    llm_cache: bool = Field(
        default=False,
        description="Serve an LLM request identical to an earlier one (model, messages, tools, params) "
        "from the response cache (table llm_cache) instead of the provider: re-runs cost no tokens.",
    )

    # Paper broker (seed 002 trade_simulate / trade_execute). USD; weights are fractions.
    portfolio_default_user: str = Field(default="default", description="user_id when a tool is given none.")
    broker_starting_cash: float = Field(default=100_000.0, ge=0, description="USD of a new paper account.")
    # Fee model: Interactive Brokers "fixed" US equity pricing (0.005 USD/share, 1 USD minimum,
    # at most 1 % of the trade value), the common retail reference for per-share commissions.
    broker_fee_per_share: float = Field(default=0.005, ge=0, description="USD per share.")
    broker_fee_minimum: float = Field(default=1.0, ge=0, description="USD minimum per filled order.")
    broker_fee_max_fraction: float = Field(
        default=0.01, ge=0, le=1, description="Fee cap as a fraction of the fill's notional."
    )
    broker_max_position_weight: float = Field(
        default=0.25, gt=0, le=1, description="Max weight of one symbol after a buy (fraction of total)."
    )
    broker_max_order_notional: float = Field(
        default=50_000.0, gt=0, description="Max USD notional (quantity x reference price) of one order."
    )
    # zipline's VolumeShareSlippage default volume_limit (2.5 % of the bar's volume).
    broker_max_volume_fraction: float = Field(
        default=0.025, gt=0, le=1, description="Max fill as a fraction of the as_of bar volume."
    )
    risk_window_bars: int = Field(
        default=252, ge=5, le=2520, description="Daily bars of history behind trade_simulate's risk metrics."
    )
    risk_free_rate: float = Field(
        default=0.0, ge=0, lt=1, description="Annual risk-free rate (fraction) for the Sharpe ratio."
    )

    # Indicator sandbox (seed 003) and Alpaca market data (seed 000).
    sandbox_timeout: float = Field(
        default=3.0, gt=0, le=60, description="Seconds of wall clock an indicator script may run (seed 003)."
    )
    sandbox_memory_mb: int = Field(
        default=512, ge=64, le=8192, description="Address space an indicator script may add, MiB."
    )
    sandbox_startup_timeout: float = Field(
        default=30.0, gt=0, description="Seconds the sandbox child may take to import pandas/pandas-ta."
    )
    url_signing_key: SecretStr | None = Field(
        default=None,
        description="Secret (≥ 32 characters) that signs chart links in digests served by the gateway, "
        "so a browser can load them as <img> without X-API-Key; unset → links need the header. Never logged.",
    )
    # A signed link is a bearer credential for one chart: a week covers a digest read late, and
    # 90 days caps how long a leaked link works.
    signed_url_ttl: int = Field(
        default=7 * 86400, ge=60, le=90 * 86400, description="Seconds a signed chart link stays valid."
    )
    alpaca_api_key: SecretStr | None = Field(
        default=None, description="Alpaca API key id (header APCA-API-KEY-ID); never logged."
    )
    alpaca_secret_key: SecretStr | None = Field(
        default=None, description="Alpaca API secret (header APCA-API-SECRET-KEY); never logged."
    )
    alpaca_use_sandbox: bool = Field(default=False, description="Use Alpaca's sandbox data URL (seed 000).")
    alpaca_data_url: str | None = Field(
        default=None, description="Override of the Alpaca data base URL ending in /v2 (tests, proxies)."
    )
    alpaca_retry_base: float = Field(
        default=1.0, ge=0, description="Seconds; Alpaca timeout retries wait base*2**n (1, 2, 4 s; seed 000)."
    )
    # Alpaca's own token bucket (agents.providers.shared, bucket "alpaca"): a second vendor with
    # its own account limit, so not FINAGENT_PROVIDER_RATE_LIMIT (the bar provider's).
    alpaca_rate_per_min: float = Field(
        default=200.0,
        gt=0,
        description="Alpaca requests per minute, all workers together (free plan: 200/min).",
    )
    alpaca_rate_burst: int = Field(
        default=10, ge=1, description="Capacity of the Alpaca token bucket (requests sent back to back)."
    )

    @field_validator("data_provider")
    @classmethod
    def _provider_name(cls, value: str) -> str:
        value = value.strip()
        if value in {"embedded", "csv", "yfinance"} or ":" in value:
            return value
        raise ValueError("FINAGENT_DATA_PROVIDER must be embedded, csv, yfinance or 'module:attribute'")

    @model_validator(mode="after")
    def _durability_arithmetic(self) -> Settings:
        """The time limits, the visibility timeout and the lease must nest (docs/architecture.md,
        "Durability: the arithmetic"): soft limit < hard limit; a running stage or a retry's
        countdown never outlives the visibility timeout (else Redis redelivers a live message,
        guide CELERY.md); a lease outlives a stage (else the sweep re-drives a live stage)."""
        if not self.task_soft_time_limit < self.task_time_limit:
            raise ValueError("FINAGENT_TASK_SOFT_TIME_LIMIT must be below FINAGENT_TASK_TIME_LIMIT")
        if not self.task_time_limit + self.task_retry_backoff_max < self.visibility_timeout:
            raise ValueError(
                "FINAGENT_VISIBILITY_TIMEOUT must exceed FINAGENT_TASK_TIME_LIMIT + "
                "FINAGENT_TASK_RETRY_BACKOFF_MAX (a live message would be redelivered)"
            )
        if not self.task_time_limit < self.lease_seconds:
            raise ValueError("FINAGENT_LEASE_SECONDS must exceed FINAGENT_TASK_TIME_LIMIT")
        return self

    @property
    def mode(self) -> Literal["embedded", "service"]:
        """``service`` when a broker URL is configured, else ``embedded``."""
        return "service" if self.broker_url else "embedded"

    @property
    def effective_database_url(self) -> str:
        """The configured database URL, or the embedded SQLite file under ``state_dir``."""
        if self.database_url:
            return self.database_url
        return f"sqlite:///{self.state_dir / 'finagent.sqlite3'}"

    @property
    def shared_redis_url(self) -> str | None:
        """Redis for state shared by workers (bar cache, rate limits): the broker if it is Redis."""
        if self.broker_url and self.broker_url.startswith(("redis://", "rediss://")):
            return self.broker_url
        return None

    @property
    def effective_result_backend(self) -> str | None:
        """Result backend: explicit setting, else the broker when it is Redis, else none."""
        if self.result_backend:
            return self.result_backend
        if self.broker_url and self.broker_url.startswith(("redis://", "rediss://")):
            return self.broker_url
        return None


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, read once. Tests call ``get_settings.cache_clear()`` after
    changing the environment."""
    return Settings()
