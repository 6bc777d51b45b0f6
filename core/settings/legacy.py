"""The settings' old flat names, still read with one warning per process.

Before the settings were named ``<group>_<field>`` (``FINAGENT_OPTIONS_MIN_WEEKLY_ROC``,
``Settings(durability_task_time_limit=...)``) each had a flat name that often repeated its
group inside it (``FINAGENT_CSP_MIN_WEEKLY_ROC`` for ``settings.options.min_weekly_roc``) or
left it out (``FINAGENT_TASK_TIME_LIMIT``). :data:`OLD_NAMES` maps every old flat name that
differs to its new one; environment variables and ``.env`` lines are the upper-case form with
``FINAGENT_`` in front, keyword arguments the lower-case form. Names that did not change
(``llm_model``, ``api_port``, ``data_dir``, ``options_dir``, ...) are not listed.
"""

from __future__ import annotations

import warnings

#: Old flat name -> new flat name (``<group>_<field>``), in group then field order.
OLD_NAMES: dict[str, str] = {
    "broker_url": "service_broker_url",
    "result_backend": "service_result_backend",
    "database_url": "service_database_url",
    "state_dir": "service_state_dir",
    "log_level": "service_log_level",
    "wait_poll_interval": "service_wait_poll_interval",
    "wait_timeout": "service_wait_timeout",
    "flower_port": "service_flower_port",
    "beat_lock_timeout": "service_beat_lock_timeout",
    "visibility_timeout": "durability_visibility_timeout",
    "task_soft_time_limit": "durability_task_soft_time_limit",
    "task_time_limit": "durability_task_time_limit",
    "task_max_retries": "durability_task_max_retries",
    "task_retry_backoff_max": "durability_task_retry_backoff_max",
    "max_redeliveries": "durability_max_redeliveries",
    "rabbitmq_queue_type": "durability_rabbitmq_queue_type",
    "lease_seconds": "durability_lease_seconds",
    "max_recoveries": "durability_max_recoveries",
    "sweep_seconds": "durability_sweep_seconds",
    "worker_heartbeat_seconds": "durability_worker_heartbeat_seconds",
    "worker_dead_seconds": "durability_worker_dead_seconds",
    "backlog_wait_seconds": "durability_backlog_wait_seconds",
    "archive_after_seconds": "durability_archive_after_seconds",
    "csv_cache_files": "data_csv_cache_files",
    "fundamentals_dir": "data_fundamentals_dir",
    "news_provider": "data_news_provider",
    "news_dir": "data_news_dir",
    "social_dir": "data_social_dir",
    "news_rss_urls": "data_news_rss_urls",
    "tavily_api_key": "data_tavily_api_key",
    "tavily_url": "data_tavily_url",
    "tool_max_retries": "data_tool_max_retries",
    "tool_backoff_base": "data_tool_backoff_base",
    "tool_timeout": "data_tool_timeout",
    "provider_rate_limit": "data_provider_rate_limit",
    "provider_rate_burst": "data_provider_rate_burst",
    "bars_cache_ttl": "data_bars_cache_ttl",
    "symbol_directory_file": "data_symbol_directory_file",
    "max_iterations": "analysis_max_iterations",
    "sandbox_timeout": "analysis_sandbox_timeout",
    "sandbox_memory_mb": "analysis_sandbox_memory_mb",
    "sandbox_startup_timeout": "analysis_sandbox_startup_timeout",
    "social_weight": "analysis_social_weight",
    "learned_weight": "analysis_learned_weight",
    "benchmark_symbol": "analysis_benchmark_symbol",
    "benchmark_data_dir": "analysis_benchmark_data_dir",
    "scorecard_seconds": "analysis_scorecard_seconds",
    "health_timeout": "api_health_timeout",
    "session_ttl": "api_session_ttl",
    "session_redis_url": "api_session_redis_url",
    "idempotency_ttl": "api_idempotency_ttl",
    "audit_anonymous_window_seconds": "api_audit_anonymous_window_seconds",
    "url_signing_key": "api_url_signing_key",
    "console_secret": "api_console_secret",
    "console_session_ttl": "api_console_session_ttl",
    "console_idle_timeout": "api_console_idle_timeout",
    "console_allowed_origins": "api_console_allowed_origins",
    "signed_url_ttl": "api_signed_url_ttl",
    "watchlist_schedule": "watchlists_schedule",
    "watchlist_timezone": "watchlists_timezone",
    "watchlist_tick_seconds": "watchlists_tick_seconds",
    "watchlist_finalize_countdown": "watchlists_finalize_countdown",
    "watchlist_run_timeout": "watchlists_run_timeout",
    "tenant_max_watchlists": "watchlists_tenant_max_watchlists",
    "watchlist_max_tickers": "watchlists_max_tickers",
    "tenant_max_tickers": "watchlists_tenant_max_tickers",
    "tenant_scheduled_analyses_per_day": "watchlists_tenant_scheduled_analyses_per_day",
    "portfolio_default_user": "broker_portfolio_default_user",
    "risk_window_bars": "broker_risk_window_bars",
    "risk_free_rate": "broker_risk_free_rate",
    "alpaca_api_key": "broker_alpaca_api_key",
    "alpaca_secret_key": "broker_alpaca_secret_key",
    "alpaca_use_sandbox": "broker_alpaca_use_sandbox",
    "alpaca_data_url": "broker_alpaca_data_url",
    "alpaca_retry_base": "broker_alpaca_retry_base",
    "alpaca_rate_per_min": "broker_alpaca_rate_per_min",
    "alpaca_rate_burst": "broker_alpaca_rate_burst",
    "dividends_dir": "options_dividends_dir",
    "csp_delta_min": "options_delta_min",
    "csp_delta_max": "options_delta_max",
    "csp_dte_min": "options_dte_min",
    "csp_dte_max": "options_dte_max",
    "csp_min_weekly_roc": "options_min_weekly_roc",
    "csp_min_excess_yield": "options_min_excess_yield",
    "csp_min_iv_hv": "options_min_iv_hv",
    "csp_hv_period": "options_hv_period",
    "csp_max_spread_pct": "options_max_spread_pct",
    "csp_max_spread_abs": "options_max_spread_abs",
    "csp_min_open_interest": "options_min_open_interest",
    "csp_fill": "options_fill",
    "csp_fee_per_contract": "options_fee_per_contract",
    "csp_max_collateral_pct": "options_max_collateral_pct",
    "csp_max_gap_loss_pct": "options_max_gap_loss_pct",
    "csp_min_volume": "options_min_volume",
    "tenant_daily_llm_budget_usd": "llm_tenant_daily_budget_usd",
}

_warned: set[str] = set()


def warn_old_names(used: list[str]) -> None:
    """Warn once per process (a ``FutureWarning``) naming each old name in ``used`` as
    ``FINAGENT_OLD -> FINAGENT_NEW``; names already warned about in this process are not
    repeated, so a process that builds its settings many times warns once. Raises nothing."""
    fresh = [name for name in used if name not in _warned]
    if not fresh:
        return
    _warned.update(fresh)
    pairs = ", ".join(f"FINAGENT_{old.upper()} -> FINAGENT_{OLD_NAMES[old].upper()}" for old in fresh)
    warnings.warn(
        f"old setting names still read, rename them (keyword arguments: the same in lower case "
        f"without FINAGENT_): {pairs}",
        FutureWarning,
        stacklevel=2,
    )
