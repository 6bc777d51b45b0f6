"""The pooled earnings-move table: fitting-period data only, read walk-forward."""

from __future__ import annotations

import json
from datetime import date

import numpy as np

from agents.quant.risk import pooled


def test_the_table_holds_no_hold_out_data_and_is_read_as_of_a_date() -> None:
    raw = json.loads(pooled.POOLED_FILE.read_text(encoding="utf-8"))
    days = [m[0] for m in raw["moves"]]
    assert raw["until"] == "2015-12-31"
    assert max(days) <= "2015-12-31"
    assert len(days) >= 400 and raw["names"] >= 40
    # a forecast sees the moves dated on or before its as_of only
    early = pooled.pooled_abs_moves(date(2013, 7, 1))
    late = pooled.pooled_abs_moves(date(2015, 12, 31))
    assert len(early) == sum(d <= "2013-07-01" for d in days)
    assert len(late) == len(days)
    assert np.all(early >= 0)
    assert "moves of" in pooled.pooled_description(date(2015, 1, 2))
