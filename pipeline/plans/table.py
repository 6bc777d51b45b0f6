"""The plan packages, each imported in code: one import and one entry per package.

``pipeline.plan_hooks`` reads :data:`PLANS` at its first lookup and checks it against the plan
table (``core.plans``): a row whose package is not listed here fails that lookup, naming the row.
"""

from __future__ import annotations

from typing import Final

from pipeline.plans import composite, option, put_spread
from pipeline.plans.base import Plan

#: Every plan of every package, in package order.
PLANS: Final[tuple[Plan, ...]] = (
    *composite.PLANS,
    *option.PLANS,
    *put_spread.PLANS,
)

__all__ = ["PLANS"]
