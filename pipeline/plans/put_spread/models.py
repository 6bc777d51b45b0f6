"""The put credit spread's own models: its request options (``state.plan_options``) and its
record (``state.plan_result``)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from core.parts import CspContract, CspReason, Record
from pipeline.plans.option.models import OptionPlanOptions

#: The long put's |delta| when the request names neither a width nor a delta: about a 1.3σ move
#: below the spot at expiry, a common wing for a defined-risk spread.
DEFAULT_LONG_DELTA = 0.10


class PutSpreadOptions(OptionPlanOptions):
    """A put spread's options: those of a cash-secured put (floors of the short put, sizing),
    and how the long put is chosen: ``width`` (USD below the short strike; the listed strike
    nearest it) or ``long_delta`` (the |delta| of the long put; default
    :data:`DEFAULT_LONG_DELTA`), not both."""

    width: float | None = Field(default=None, gt=0, lt=10_000, description="Short strike − long strike, USD")
    long_delta: float | None = Field(default=None, gt=0, lt=0.5, description="|delta| of the long put")

    @model_validator(mode="after")
    def _one_rule(self) -> PutSpreadOptions:
        if self.width is not None and self.long_delta is not None:
            raise ValueError("give width or long_delta, not both")
        return self


class PutSpreadResult(Record):
    """``state.plan_result`` of a put spread: the short put's analysts' record (chart, options,
    research) and the spread chosen on it: ``suggestion`` (the short put, with the spread's
    numbers), ``long`` (the bought put), ``spread`` (credit, width, max loss, yields,
    probabilities), ``alternatives`` (other spreads), ``sizing`` and ``reasons``."""

    strategy: str | None = Field(default=None, description='"put credit spread"')
    symbol: str | None = None
    as_of: str | None = None
    right: Literal["put"] | None = None
    chart: dict[str, Any] | None = None
    options: dict[str, Any] | None = None
    research: dict[str, Any] | None = None
    status: Literal["suggested", "rejected"] | None = None
    rejected_by: str | None = Field(default=None, description="chart | options | research | spread | sizing")
    reasons: list[CspReason] = Field(default_factory=list)
    suggestion: CspContract | None = Field(default=None, description="The short put")
    long: CspContract | None = Field(default=None, description="The long put")
    spread: dict[str, Any] | None = Field(default=None, description="The spread's economics")
    alternatives: list[dict[str, Any]] = Field(default_factory=list)
    events: dict[str, Any] | None = None
    context: dict[str, Any] | None = None
    sizing: dict[str, Any] | None = None
    decided_by: dict[str, str] | None = None

    def price_factor(self) -> float:
        """The chain-to-bars price factor (1.0 without one)."""
        scale = (self.options or {}).get("price_scale") or {}
        return float(scale.get("factor") or 1.0)
