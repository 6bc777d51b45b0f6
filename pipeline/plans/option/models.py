"""The option plan's own models: the request options it accepts (``state.plan_options``) and the
record it answers with (``state.plan_result``), validated here when the request is made and when
the plan writes its result."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from core.parts import CspContract, CspReason, Record

#: Screen floors a request may set instead of the settings (the tools' argument names).
SCREEN_FIELDS = (
    "delta_min",
    "delta_max",
    "dte_min",
    "dte_max",
    "min_open_interest",
    "min_volume",
    "max_spread_pct",
    "max_spread_abs",
    "min_excess_yield",
)


class OptionPlanOptions(BaseModel):
    """Options of a cash-secured put request (every one optional: unset → the settings,
    docs/design.md "Option rules"). Floors as the screen tools take them; sizing: a what-if
    account (USD, all cash) instead of the paper portfolio, the per-name cap and the gap-loss cap
    (fractions of the account)."""

    model_config = ConfigDict(extra="forbid")

    delta_min: float | None = Field(default=None, gt=0, lt=1, description="Smallest |delta|")
    delta_max: float | None = Field(default=None, gt=0, lt=1, description="Largest |delta|")
    dte_min: int | None = Field(default=None, ge=1, le=3650, description="Fewest days to expiry")
    dte_max: int | None = Field(default=None, ge=1, le=3650, description="Most days to expiry")
    min_open_interest: int | None = Field(default=None, ge=0, description="Fewest open contracts")
    min_volume: int | None = Field(default=None, ge=0, description="Fewest contracts traded that day")
    max_spread_pct: float | None = Field(default=None, gt=0, le=1, description="Largest spread / mid")
    max_spread_abs: float | None = Field(
        default=None, ge=0, le=100, description="A spread this small passes, USD"
    )
    min_excess_yield: float | None = Field(
        default=None, ge=0, le=5, description="Annual income yield over the T-bill to reach (fraction)"
    )
    account_value: float | None = Field(
        default=None, gt=0, lt=1e10, description="Size against an all-cash account of this value, USD"
    )
    max_name_pct: float | None = Field(default=None, gt=0, le=1, description="Per-name cap, fraction")
    max_gap_loss_pct: float | None = Field(
        default=None, gt=0, le=1, description="Largest loss on a 20 % gap, fraction of the account"
    )

    @model_validator(mode="after")
    def _ordered(self) -> OptionPlanOptions:
        if self.delta_min is not None and self.delta_max is not None and self.delta_min > self.delta_max:
            raise ValueError(f"delta_min {self.delta_min} exceeds delta_max {self.delta_max}")
        if self.dte_min is not None and self.dte_max is not None and self.dte_min > self.dte_max:
            raise ValueError(f"dte_min {self.dte_min} exceeds dte_max {self.dte_max}")
        return self

    def screen(self) -> dict[str, Any]:
        """The floors the request sets, as screen-tool arguments."""
        return {k: getattr(self, k) for k in SCREEN_FIELDS if getattr(self, k) is not None}


class CoveredCallOptions(OptionPlanOptions):
    """A covered call's options: those of a put, and the shares it covers: ``cost_basis``
    (USD/share; a basis on shares before a later split is recognised and converted) and
    ``shares`` (default 100 with a cost basis; without one, the paper portfolio's position)."""

    cost_basis: float | None = Field(default=None, gt=0, lt=10_000_000, description="USD/share of the shares")
    shares: int | None = Field(default=None, ge=100, le=10_000_000, description="Shares held (default 100)")

    @model_validator(mode="after")
    def _shares_need_basis(self) -> CoveredCallOptions:
        if self.shares is not None and self.cost_basis is None:
            raise ValueError("shares needs cost_basis (without one the paper portfolio's position is used)")
        return self


class OptionPlanResult(Record):
    """``state.plan_result`` of an option plan (docs/design.md, "Option plan output"): the record
    its analysts wrote, in their key order. ``status`` ``suggested`` with ``suggestion``, up to
    three ``alternatives`` and ``sizing`` (contracts, ladder, risk), or ``rejected`` by the analyst
    ``rejected_by`` (position, chart, options, research, sizing); ``reasons`` cite their tool calls.
    The views are the analysts' own dicts (their shapes: ``agents.analysts.option_plan``)."""

    strategy: str | None = Field(default=None, description='"cash-secured put" | "covered call"')
    symbol: str | None = None
    as_of: str | None = Field(default=None, description="ISO date")
    right: Literal["put", "call"] | None = None
    position: dict[str, Any] | None = Field(default=None, description="The shares a covered call covers")
    chart: dict[str, Any] | None = Field(default=None, description="The chart analyst's view")
    options: dict[str, Any] | None = Field(default=None, description="The options analyst's view")
    research: dict[str, Any] | None = Field(default=None, description="The research analyst's view")
    status: Literal["suggested", "rejected"] | None = None
    rejected_by: str | None = Field(
        default=None, description="position | chart | options | research | sizing"
    )
    reasons: list[CspReason] = Field(default_factory=list)
    suggestion: CspContract | None = None
    alternatives: list[CspContract] = Field(default_factory=list)
    decided_by: dict[str, str] | None = Field(default=None, description="step → llm | deterministic")
    events: dict[str, Any] | None = Field(default=None, description="Dividends, splits, early assignment")
    context: dict[str, Any] | None = Field(default=None, description="HV cone, IV rank, skew, earnings move")
    sizing: dict[str, Any] | None = Field(default=None, description="Contracts, ladder, risk in USD")

    def price_factor(self) -> float:
        """The chain-to-bars price factor of the options view (a chain quoted before a split has
        strikes ``factor`` times the bars' prices); 1.0 when the view has none."""
        scale = (self.options or {}).get("price_scale") or {}
        return float(scale.get("factor") or 1.0)
