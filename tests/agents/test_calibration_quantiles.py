"""The calibration's t quantiles come from ``scipy.special`` (lighter to import than
``scipy.stats``): they must be scipy.stats' own values to the bit, at the degrees of freedom
the record and the evidence gate use (fractional ones included)."""

from __future__ import annotations

import math

import pytest
from scipy.stats import norm, t  # type: ignore[import-untyped]

from agents.quant import calibration


@pytest.mark.parametrize("blocks", [2.0, 2.5, 3.0, 4.75, 8.0, 17.3, 60.0, 400.0, 5000.0])
def test_the_gate_critical_value_is_scipy_stats_own(blocks: float) -> None:
    assert calibration.critical_value(blocks) == float(t.isf(norm.sf(calibration.GATE_T), blocks - 1))


def test_many_blocks_give_the_normal_gate() -> None:
    assert math.isclose(calibration.critical_value(1e7), calibration.GATE_T, rel_tol=1e-5)
