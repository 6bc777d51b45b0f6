"""The composite plan and its three views (``technical``, ``fundamental``, ``sentiment``): the
full pipeline (indicators, views, a BUY/HOLD/SELL signal) with nothing added; the requested view
is recorded in the state and the report (docs/design.md, "Query parsing")."""

from __future__ import annotations

from core.plans import PLANS as ROWS
from pipeline.plan_hooks import Plan

#: The plan of every row whose package is this one: the shared pipeline's defaults.
PLANS: dict[str, Plan] = {spec.name: Plan(spec=spec) for spec in ROWS if spec.package == "composite"}
