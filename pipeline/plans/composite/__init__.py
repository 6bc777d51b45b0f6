"""The composite plan and its three views (``technical``, ``fundamental``, ``sentiment``): the
full pipeline (indicators, views, a BUY/HOLD/SELL signal) with nothing added; the requested view
is recorded in the state and the report (docs/design.md, "Query parsing")."""

from __future__ import annotations

from core.plans import plan_spec
from pipeline.plans.base import Plan

#: The shared pipeline's defaults, one plan per view.
PLANS: tuple[Plan, ...] = tuple(
    Plan(spec=plan_spec(name)) for name in ("technical", "fundamental", "sentiment", "composite")
)
