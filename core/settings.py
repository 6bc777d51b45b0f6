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

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

# LiteLLM fetches a price map over the network at import unless this is set (https://docs.litellm.ai/docs/proxy/model_cost_map).
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

#: LLM calls one checked answer needs at most besides tool rounds: the answer and one repair
#: or correction round (agents.analysts.llm_agents); longer tool loops are cut by the deadline.
LLM_CALLS_PER_ANSWER = 2

DEFAULT_STATE_DIR = Path(os.environ.get("XDG_STATE_HOME", Path.home() / ".local" / "state")) / "finagent"

#: The built-in values of FINAGENT_DATA_PROVIDER (besides 'module:attribute' plug-ins): the rows of
#: the data routing table that serve bars (agents.data.routing; a test checks the two agree).
DATA_PROVIDER_NAMES: tuple[str, ...] = ("embedded", "csv", "yfinance")


class LLMDeploymentSetting(BaseModel):
    """One LiteLLM Router deployment given in settings (``FINAGENT_LLM_DEPLOYMENTS``, JSON).

    ``model_name``: the name agents and fallbacks use; ``model``: the LiteLLM model string;
    ``api_base``: its server; ``api_key``: a secret (masked in ``repr``) or ``os.environ/NAME``;
    ``timeout``: seconds per request (default ``FINAGENT_LLM_TIMEOUT``).
    """

    model_config = ConfigDict(extra="forbid")

    model_name: str = Field(min_length=1, max_length=200)
    model: str = Field(min_length=1, max_length=200)
    api_base: str | None = None
    api_key: SecretStr | None = None
    timeout: float | None = Field(default=None, gt=0)


class Settings(BaseSettings):
    """Runtime configuration, read from ``FINAGENT_*`` environment variables (and ``.env``).

    Units: seconds for every timeout and countdown. Invariants between them (time limits and
    retry backoff below the Redis visibility timeout) are checked in ``tests/test_settings.py``
    (docs/design.md, "Celery configuration").
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
    # Fundamentals and news. Unset folders → those tools answer NOT_CONFIGURED.
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

    max_iterations: int = Field(default=3, ge=1, le=10, description="Most passes of one analysis.")

    # Tool-level retry (docs/design.md, "Tool retries"): only timeouts, after 0.5 * 2**attempt s.
    tool_max_retries: int = Field(
        default=3, ge=0, le=6, description="Retries of a tool call that timed out (exponential backoff)."
    )
    tool_backoff_base: float = Field(default=0.5, gt=0, description="Seconds; attempt n waits base*2**n.")
    tool_timeout: float = Field(default=10.0, gt=0, description="Seconds per provider request.")

    # Celery task-level policy and durability (docs/architecture.md, "Durability: the arithmetic").
    # The Redis visibility timeout must exceed the longest time a message is legitimately held
    # unacked: a running stage (task_time_limit) or a retry waiting for its countdown
    # (task_retry_backoff_max); past it Redis redelivers (celery#2599, #4400).
    # 180 + 120 < 420: a message of a worker killed with SIGKILL returns within 7 minutes.
    visibility_timeout: int = Field(
        default=420, ge=10, description="Redis visibility timeout, seconds (> task_time_limit + backoff max)."
    )
    task_soft_time_limit: int = Field(
        default=120, ge=1, description="Seconds; a stage task's soft time limit (it may still checkpoint)."
    )
    task_time_limit: int = Field(
        default=180, ge=1, description="Seconds; a stage task's hard time limit (the process is killed)."
    )
    task_max_retries: int = Field(
        default=5, ge=0, description="Celery retries of a stage task (exponential backoff)."
    )
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
        default=60, ge=1, description="Seconds between recovery sweeps (`finagent sweeper`)."
    )

    wait_poll_interval: float = Field(
        default=0.05, gt=0, description="Seconds between status polls of --wait."
    )
    wait_timeout: float = Field(
        default=600.0, gt=0, description="Seconds `finagent analyze` waits for a report."
    )

    log_level: str = Field(default="INFO", description="Level of the JSON logs (DEBUG, INFO, WARNING).")

    # Shared across workers for remote market-data providers (a shared bar cache and rate limit).
    provider_rate_limit: float | None = Field(
        default=None, gt=0, description="Requests/s allowed to a remote provider, all workers together."
    )
    provider_rate_burst: int = Field(default=5, ge=1, description="Token-bucket capacity of that limit.")
    bars_cache_ttl: int = Field(
        default=6 * 3600, ge=1, description="Seconds a remote provider's bars stay in the shared cache."
    )

    # Operations: HTTP gateway, sessions, watchlists, beat.
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
    # Evaluation: the forward scorecard of stored recommendations (pipeline.scorecard).
    benchmark_symbol: str = Field(
        default="SPY",
        description="Benchmark of the scorecard's excess returns, read through the data provider (or "
        "benchmark_data_dir); where its data does not cover a window, the equal-weighted universe of the run",
    )
    benchmark_data_dir: Path | None = Field(
        default=None,
        description="Folder holding the benchmark's file: Yahoo-format CSVs, or a Lean daily folder with "
        "factor_files/ (e.g. ../shared/data/ohlcv/lean); default: the data provider.",
    )
    scorecard_seconds: int = Field(
        default=3600, ge=10, description="How often beat scores recommendations whose horizons matured."
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

    # LLM agents (docs/design.md, "LLM agents"). No model → deterministic analysts, no litellm import.
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
    llm_model_options: str | None = Field(
        default=None, description="Override for the options analyst of a csp analysis."
    )
    llm_model_chart: str | None = Field(
        default=None, description="Override for the chart analyst of a csp analysis."
    )
    llm_model_research: str | None = Field(
        default=None, description="Override for the research analyst of a csp analysis."
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
    # 15 s: three attempts of two calls (an answer and its repair or correction) plus backoff
    # must fit the LLM time budget of a stage (soft limit 120 s - reserve 20 s), see
    # _llm_time_arithmetic; a slower model needs a higher FINAGENT_TASK_SOFT_TIME_LIMIT.
    llm_timeout: float = Field(default=15.0, gt=0, description="Seconds per LLM request (at most).")
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
    # LiteLLM Router deployments (fallbacks may reach another server). Each deployment
    # has its own api_base/api_key; FINAGENT_LLM_MODEL and the fallbacks may name them.
    llm_router_file: Path | None = Field(
        default=None,
        description="YAML or TOML file in LiteLLM's proxy-config shape: model_list (model_name, "
        "litellm_params {model, api_base, api_key}) and router_settings (fallbacks, allowed_fails, "
        "cooldown_time). api_key may be 'os.environ/NAME'.",
    )
    llm_deployments: list[LLMDeploymentSetting] = Field(
        default_factory=list,
        description="Deployments as JSON: [{model_name, model, api_base?, api_key?, timeout?}]; "
        "api_key may be 'os.environ/NAME'.",
    )
    # LiteLLM's Router default is 3 allowed fails per minute; one is enough here: a dead local
    # server costs a connect error per attempt, and an analysis makes only a handful of calls.
    llm_allowed_fails: int = Field(
        default=1, ge=0, le=100, description="Failed attempts of a deployment before its cooldown."
    )
    llm_cooldown_time: float = Field(
        default=60.0, ge=0, description="Seconds a failed deployment is skipped (Retry-After if longer)."
    )
    llm_cooldown_redis_url: str | None = Field(
        default=None,
        description="Redis for the Router's cooldowns, shared by every worker process and host "
        "(e.g. the broker's Redis); unset: each process keeps its own.",
    )
    llm_response_format: Literal["json_schema", "json_object", "off"] = Field(
        default="json_schema",
        description="How a JSON answer is asked for: a JSON schema (constrained decoding on "
        "llama.cpp, vLLM, Ollama, OpenAI; a server that rejects it gets json_object), JSON mode, or "
        "nothing (prompt only).",
    )
    symbol_directory_file: Path | None = Field(
        default=None,
        description="CSV with Symbol and Name columns adding company names to parse_query's directory "
        "(e.g. ../shared/data/fundamentals/sp500/constituents-financials.csv).",
    )
    llm_run_budget_tokens: int | None = Field(
        default=None,
        ge=0,
        description="Max LLM tokens of one watchlist run (all its analyses); None: no limit.",
    )
    llm_run_budget_usd: float | None = Field(
        default=None, ge=0, description="Max USD of one watchlist run (known prices only); None: no limit."
    )
    # A stage's tools (indicators, chart levels, calculator: ~1-3 s) and its checkpoint write
    # need time besides the model; 20 s of the 120 s soft limit leaves a wide margin for a slow
    # database.
    llm_time_reserve: float = Field(
        default=20.0,
        ge=0,
        description="Seconds of a stage's soft time limit kept for its tools and checkpoint; the "
        "rest is the stage's LLM time budget.",
    )
    # 25 analyses at the full per-analysis budget: a day of heavy interactive use by one team;
    # an operator raises it per deployment (0 refuses every analysis of the HTTP API).
    tenant_daily_llm_budget_usd: float | None = Field(
        default=25.0,
        ge=0,
        description=(
            "Max USD of LLM calls per tenant and UTC day (known prices only); POST /analyze answers "
            "429 once it is spent. Unset: no daily cap."
        ),
    )

    # HTTP API quotas per key (pipeline/api/quotas.py). A deterministic analysis costs about a
    # CPU-second of a worker and an LLM one up to llm_budget_usd: 30 a minute keeps one key from
    # filling the queues, and 10 in flight is more than a person or a script waits on at once.
    api_analyses_per_minute: int = Field(
        default=30,
        ge=1,
        description="Analyses one API key may start a minute (token bucket; burst = rate).",
    )
    api_max_in_flight: int = Field(
        default=10, ge=1, description="Unfinished analyses one API key may have at once; more → 429."
    )
    # Watchlists cost worker time every night they run: caps per tenant (docs/security.md,
    # "Quotas"). 20 lists of at most 200 tickers and 500 tickers in all is a large team's
    # coverage (the S&P 500); the daily allowance of scheduled analyses equals the ticker cap,
    # so one run per watchlist a day always fits and churn (delete, re-create) does not.
    tenant_max_watchlists: int = Field(
        default=20, ge=1, description="Watchlists one tenant may hold; one more → 409."
    )
    watchlist_max_tickers: int = Field(
        default=200,
        ge=1,
        le=200,
        description="Tickers of one watchlist (at most 200, the API's own bound); more → 422.",
    )
    tenant_max_tickers: int = Field(
        default=500,
        ge=1,
        description="Tickers of all of a tenant's watchlists together (a ticker in two lists counts "
        "twice: each is analysed); more → 409.",
    )
    tenant_scheduled_analyses_per_day: int = Field(
        default=500,
        ge=0,
        description="Analyses one tenant's scheduled (beat) watchlist runs may start per UTC day; the "
        "rest of a run's tickers are refused and listed in its digest.",
    )
    # Requests whose key is missing, malformed, unknown or revoked, per client address: a
    # client that mistyped its key needs a few; a scanner gets 429 and costs one audit row a
    # window (pipeline/api/abuse.py).
    api_failed_auth_per_minute: int = Field(
        default=10,
        ge=1,
        description="Requests with a missing or invalid key one client address may make a minute "
        "(token bucket; burst = rate); more → 429.",
    )
    audit_anonymous_window_seconds: int = Field(
        default=60,
        ge=1,
        le=86_400,
        description="Mutating requests without a valid key are audited as one row per client "
        "address, status and window of this many seconds, with a count.",
    )
    llm_cache: bool = Field(
        default=False,
        description="Serve an LLM request identical to an earlier one (model, messages, tools, params) "
        "from the response cache (table llm_cache) instead of the provider: re-runs cost no tokens.",
    )

    # Paper broker (trade_simulate / trade_execute). USD; weights are fractions.
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

    # Indicator sandbox and Alpaca market data.
    sandbox_timeout: float = Field(
        default=3.0, gt=0, le=60, description="Seconds of wall clock an indicator script may run."
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
    alpaca_use_sandbox: bool = Field(default=False, description="Use Alpaca's sandbox data URL.")
    alpaca_data_url: str | None = Field(
        default=None, description="Override of the Alpaca data base URL ending in /v2 (tests, proxies)."
    )
    alpaca_retry_base: float = Field(
        default=1.0, ge=0, description="Seconds; Alpaca timeout retries wait base*2**n (1, 2, 4 s)."
    )
    # Alpaca's own token bucket (agents.data.market.shared, bucket "alpaca"): a second vendor with
    # its own account limit, so not FINAGENT_PROVIDER_RATE_LIMIT (the bar provider's).
    alpaca_rate_per_min: float = Field(
        default=200.0,
        gt=0,
        description="Alpaca requests per minute, all workers together (free plan: 200/min).",
    )
    alpaca_rate_burst: int = Field(
        default=10, ge=1, description="Capacity of the Alpaca token bucket (requests sent back to back)."
    )

    # Options and cash-secured puts. Defaults: docs/design.md, "CSP rules".
    options_dir: Path | None = Field(
        default=None,
        description="Folder of offline option-chain snapshots (Lean EOD, CBOE quotedata, yfinance CSV), "
        "e.g. ../shared/data/options; unset → the option tools answer NOT_CONFIGURED.",
    )
    options_risk_free_rate: float = Field(
        default=0.0,
        ge=-0.05,
        le=0.25,
        description="Continuously compounded risk-free rate for BSM (fraction/year); no rate series "
        "ships offline, so set it for the date (e.g. 0.043 for May 2025).",
    )
    options_dividend_yield: float = Field(
        default=0.0, ge=0, le=0.25, description="Continuous dividend yield q for BSM (fraction/year)."
    )
    csp_delta_min: float = Field(default=0.15, gt=0, lt=1, description="Smallest |delta| of a CSP.")
    csp_delta_max: float = Field(default=0.30, gt=0, lt=1, description="Largest |delta| of a CSP.")
    csp_dte_min: int = Field(default=14, ge=0, le=3650, description="Fewest days to expiry.")
    csp_dte_max: int = Field(default=45, ge=0, le=3650, description="Most days to expiry.")
    csp_min_weekly_roc: float = Field(
        default=0.005,
        ge=0,
        description="Weekly return on collateral a CSP must exceed (0.005 = 0.5 %).",
    )
    csp_min_iv_hv: float = Field(
        default=1.0, ge=0, description="IV/HV a CSP needs (IV >= HV: rich premiums)."
    )
    csp_hv_period: int = Field(default=20, ge=5, le=252, description="Bars of the HV used against IV.")
    # Liquidity (tight spreads, traded volume; docs/design.md, "CSP rules"): our numbers; 10 % of the mid,
    # 100 contracts open and one trade on the day are common retail screens for listed equity options.
    csp_max_spread_pct: float = Field(
        default=0.10, gt=0, description="Largest (ask - bid) / mid of a CSP contract (fraction)."
    )
    csp_min_open_interest: int = Field(default=100, ge=0, description="Fewest open contracts of a CSP.")
    csp_min_volume: int = Field(default=1, ge=0, description="Fewest contracts traded on the quote day.")

    @field_validator("data_provider")
    @classmethod
    def _provider_name(cls, value: str) -> str:
        value = value.strip()
        if value in DATA_PROVIDER_NAMES or ":" in value:
            return value
        raise ValueError(
            f"FINAGENT_DATA_PROVIDER must be {', '.join(DATA_PROVIDER_NAMES)} or 'module:attribute'"
        )

    @model_validator(mode="after")
    def _durability_arithmetic(self) -> Settings:
        """The time limits, the visibility timeout and the lease must nest (docs/architecture.md,
        "Durability: the arithmetic"): soft limit < hard limit; a running stage or a retry's
        countdown never outlives the visibility timeout (else Redis redelivers a live message:
        docs/design.md, "Celery configuration"); a lease outlives a stage (else the sweep
        re-drives a live stage)."""
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

    @model_validator(mode="after")
    def _llm_time_arithmetic(self) -> Settings:
        """One LLM answer must fit a stage's LLM time budget (:attr:`llm_stage_time_budget`):
        ``LLM_CALLS_PER_ANSWER`` calls (the answer and its repair or correction round), each
        up to ``num_retries + 1`` attempts of ``llm_timeout`` s plus the backoff between them,
        on every model of the chain (primary + ``llm_fallbacks``). Else a slow model would
        exceed the soft time limit and fail the stage instead of falling back; so every process
        (the worker first) refuses these settings when a model is configured (``llm_model``,
        ``llm_deployments`` or ``llm_router_file``). Without one the deterministic analysts need
        no LLM time (a short soft limit is legitimate there), and a per-analysis ``--llm`` is
        still bounded by its stage session's deadline (``llm_stage_time_budget``; ≤ 0: no call)."""
        if not (self.llm_model or self.llm_deployments or self.llm_router_file):
            return self
        needed = self.llm_worst_answer_seconds
        budget = self.llm_stage_time_budget
        if needed > budget:
            models = self._llm_chain_length
            attempts = self.llm_num_retries + 1
            raise ValueError(
                f"LLM time arithmetic: one answer may take {LLM_CALLS_PER_ANSWER} calls x {models} "
                f"model(s) x ({attempts} attempts x FINAGENT_LLM_TIMEOUT {self.llm_timeout:g} s + "
                f"backoff) = {needed:g} s, more than the stage's LLM time budget "
                f"FINAGENT_TASK_SOFT_TIME_LIMIT - FINAGENT_LLM_TIME_RESERVE = "
                f"{self.task_soft_time_limit} - {self.llm_time_reserve:g} = {budget:g} s; lower "
                "FINAGENT_LLM_TIMEOUT, FINAGENT_LLM_NUM_RETRIES or FINAGENT_LLM_FALLBACKS, or raise "
                "FINAGENT_TASK_SOFT_TIME_LIMIT (with FINAGENT_TASK_TIME_LIMIT, "
                "FINAGENT_VISIBILITY_TIMEOUT and FINAGENT_LEASE_SECONDS)"
            )
        return self

    @property
    def llm_stage_time_budget(self) -> float:
        """Seconds of LLM calls one stage run may spend: ``task_soft_time_limit -
        llm_time_reserve`` (the deadline of the stage's LLM session). ≤ 0: no LLM call."""
        return float(self.task_soft_time_limit) - self.llm_time_reserve

    @property
    def _llm_chain_length(self) -> int:
        """Longest model chain of a role: the primary plus the distinct fallbacks."""
        return 1 + len(dict.fromkeys(m.strip() for m in self.llm_fallbacks.split(",") if m.strip()))

    @property
    def llm_worst_answer_seconds(self) -> float:
        """Longest time one checked LLM answer may take (:meth:`_llm_time_arithmetic`), s."""
        models = self._llm_chain_length
        attempts = self.llm_num_retries + 1
        backoff = self.llm_retry_backoff * (2**self.llm_num_retries - 1)
        return round(LLM_CALLS_PER_ANSWER * models * (attempts * self.llm_timeout + backoff), 3)

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
