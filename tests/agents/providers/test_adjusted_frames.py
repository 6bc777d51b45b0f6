"""The adjusted frames of ``agents.data.market.base``: the point-in-time adjusted close and the
adjusted OHLC, built from one float64 block, are the frames pandas' own operations give."""

from __future__ import annotations

from datetime import date

import numpy as np
import pandas as pd
import pytest

from agents.data.market.base import adjusted_ohlc, float_frame, point_in_time_adj_close
from agents.data.market.embedded import EmbeddedProvider


@pytest.fixture(scope="module")
def bars() -> pd.DataFrame:
    frame = EmbeddedProvider().bars(symbol="AAPL", start=date(2004, 1, 2), end=date(2012, 6, 29))
    frame.attrs["share_basis"] = "kept"
    return frame


def test_point_in_time_close_is_pandas_own_rescale(bars: pd.DataFrame) -> None:
    got = point_in_time_adj_close(bars)
    factor = float(bars["close"].iloc[-1]) / float(bars["adj_close"].iloc[-1])
    expected = bars.assign(adj_close=bars["adj_close"] * factor)
    pd.testing.assert_frame_equal(got, expected, check_exact=True)
    assert got.attrs == {"share_basis": "kept"}
    assert got["adj_close"].iloc[-1] == bars["close"].iloc[-1]
    assert got["adj_close"].to_numpy().tobytes() == expected["adj_close"].to_numpy().tobytes()
    # the source's frame is untouched, and the new one does not share its values
    assert not np.shares_memory(got["close"].to_numpy(), bars["close"].to_numpy())
    assert bars["adj_close"].iloc[-1] != got["adj_close"].iloc[-1]


def test_point_in_time_close_of_a_frame_with_an_integer_volume(bars: pd.DataFrame) -> None:
    mixed = bars.astype({"volume": "int64"})
    got = point_in_time_adj_close(mixed)
    assert got["volume"].dtype == np.int64
    pd.testing.assert_frame_equal(got.astype({"volume": "float64"}), point_in_time_adj_close(bars))


def test_adjusted_ohlc_is_the_frame_of_its_columns(bars: pd.DataFrame) -> None:
    got = adjusted_ohlc(bars)
    factor = (bars["adj_close"] / bars["close"]) * (bars["close"].iloc[-1] / bars["adj_close"].iloc[-1])
    expected = pd.DataFrame(
        {
            "open": bars["open"] * factor,
            "high": bars["high"] * factor,
            "low": bars["low"] * factor,
            "close": bars["close"] * factor,
            "volume": bars["volume"],
        },
        index=bars.index,
    )
    pd.testing.assert_frame_equal(got, expected, check_exact=True)


def test_float_frame_keeps_a_column_of_another_type() -> None:
    index = pd.date_range("2012-01-02", periods=3, name="date")
    columns = {"close": np.array([1.0, 2.0, 3.0]), "volume": np.array([5, 6, 7])}
    got = float_frame(columns, index=index)
    pd.testing.assert_frame_equal(got, pd.DataFrame(columns, index=index))
    assert got["volume"].dtype == np.int64
