"""The ``analysis`` group of the settings (``Settings.analysis``); variables stay ``FINAGENT_<FIELD>``."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field


class AnalysisSettings(BaseModel):
    """One analysis: its passes, the indicator sandbox and the forward scorecard's benchmark."""

    model_config = ConfigDict(extra="forbid", validate_default=True)

    max_iterations: int = Field(
        default=3,
        ge=1,
        le=10,
        description="Most passes of one analysis.",
        json_schema_extra={"unit": "passes"},
    )
    # Indicator sandbox and Alpaca market data.
    sandbox_timeout: float = Field(
        default=3.0,
        gt=0,
        le=60,
        description="Seconds of wall clock an indicator script may run.",
        json_schema_extra={"unit": "s"},
    )
    sandbox_memory_mb: int = Field(
        default=512,
        ge=64,
        le=8192,
        description="Address space an indicator script may add, MiB.",
        json_schema_extra={"unit": "MiB"},
    )
    sandbox_startup_timeout: float = Field(
        default=30.0,
        gt=0,
        description="Seconds the sandbox child may take to import pandas/pandas-ta.",
        json_schema_extra={"unit": "s"},
    )
    # The social-sentiment analyst (agents.analysts.social): shown and recorded, weight 0 in the
    # composite score until it has out-of-sample evidence (docs/data-and-tools.md, "Social posts").
    social_weight: float = Field(
        default=0.0,
        ge=0.0,
        le=1.0,
        description="Share of the social analyst's score in the composite score (0 = reported only); "
        "score = (1 - w) x scorer + w x social, signal by the scorer's thresholds.",
        json_schema_extra={"unit": "fraction"},
    )
    # The learned analyst (agents.analysts.learned): shown and recorded when social posts exist for
    # the window; weight 0 in the composite score by default (docs/benchmarks.md, ACL18).
    learned_weight: float = Field(
        default=0.0,
        ge=0.0,
        le=1.0,
        description="Share of the learned analyst's score (2 p(up) - 1) in the composite score, applied "
        "after the social blend (0 = reported only); signal by the scorer's thresholds.",
        json_schema_extra={"unit": "fraction"},
    )
    # Evaluation: the forward scorecard of stored recommendations (apps.scorecard).
    benchmark_symbol: str = Field(
        default="SPY",
        description="Benchmark of the scorecard's excess returns, read through the data provider (or "
        "benchmark_data_dir); where its data does not cover a window, the equal-weighted universe of the run",
    )
    benchmark_data_dir: Path | None = Field(
        default=None,
        description="Folder holding the benchmark's file: Yahoo-format CSVs, or a Lean daily folder with "
        "factor_files/ (e.g. ../shared/data/ohlcv/lean); default: the data provider.",
        json_schema_extra={"unit": "path"},
    )
    scorecard_seconds: int = Field(
        default=3600,
        ge=10,
        description="How often beat scores recommendations whose horizons matured.",
        json_schema_extra={"unit": "s"},
    )
