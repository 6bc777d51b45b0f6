"""The observed rate with its interval, one way everywhere the risk record is quoted."""

from __future__ import annotations

import pytest

from core.display import rate_interval


def test_a_rate_prints_with_its_interval_in_percent_to_one_decimal() -> None:
    # 0.80912 → 80.912 % → "80.9 %"; bounds 0.78049 → 78.0, 0.83851 → 83.9
    assert rate_interval({"rate": 0.80912, "low": 0.78049, "high": 0.83851}) == "80.9 % [78.0, 83.9]"


def test_a_rate_without_an_interval_prints_alone() -> None:
    assert rate_interval({"rate": 0.05, "low": None, "high": None}) == "5.0 %"
    assert rate_interval({"rate": 0.05}) == "5.0 %"


def test_a_block_without_a_rate_is_refused() -> None:
    with pytest.raises(KeyError):
        rate_interval({"low": 0.1, "high": 0.2})
