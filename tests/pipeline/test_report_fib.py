"""The report's Fibonacci line names a swing in the order it ran: a swing down goes from its
high (the earlier extreme) to its low, a swing up from its low to its high."""

from __future__ import annotations

from core.parts import ChartLevels
from pipeline.report_sections import chart_markdown


def _fib(direction: str, low: tuple[float, str], high: tuple[float, str]) -> ChartLevels:
    levels = {"0%": low[0], "50%": (low[0] + high[0]) / 2, "100%": high[0]}
    return ChartLevels(
        fib={
            "direction": direction,
            "swing_low": low[0],
            "swing_low_date": low[1],
            "swing_high": high[0],
            "swing_high_date": high[1],
            "levels": levels,
        },
        fib_ref="calculate_fib_levels_x",
    )


def test_a_swing_down_runs_from_its_high_to_its_low() -> None:
    # AAPL's fall from 2012-09-21 to 2013-04-19 (StockNet closes, USD)
    lines = chart_markdown(_fib("down", low=(373.52, "2013-04-19"), high=(676.81, "2012-09-21")))
    assert "Swing down from 676.81 (2012-09-21) to 373.52 (2013-04-19):" in lines


def test_a_swing_up_runs_from_its_low_to_its_high() -> None:
    lines = chart_markdown(_fib("up", low=(235.56, "2010-08-27"), high=(644.0, "2012-04-10")))
    assert "Swing up from 235.56 (2010-08-27) to 644.00 (2012-04-10):" in lines
