"""The composite plan and its three views (``technical``, ``fundamental``, ``sentiment``): the
full pipeline (indicators, views, a BUY/HOLD/SELL signal) with nothing added; the requested view
is recorded in the state and the report (docs/design.md, "Query parsing")."""

from __future__ import annotations

from core.plans import plan_spec
from pipeline.plan_hooks import Plan, register_plan

#: The shared pipeline's defaults, one plan per view.
for _name in ("technical", "fundamental", "sentiment", "composite"):
    register_plan(Plan(spec=plan_spec(_name)))
