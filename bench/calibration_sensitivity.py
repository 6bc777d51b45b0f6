"""How the walk-forward Brier and ECE of the calibration move with its two choices (the bins and
m of the m-estimate), on the shipped artifact's rows; documentation of the Brier miss, not a
tuning run: the shipped constants stay as in ``agents.quant.calibration``.

Usage: ``uv run python bench/calibration_sensitivity.py`` (a Markdown table on stdout, ~10 s).
Only rows whose outcome ends by 2015-12-31 exist in the artifact (the hold-out is never read).
"""

from __future__ import annotations

from datetime import date

from agents.quant import calibration as cal
from pipeline.calibration import evaluate


def main() -> None:
    """Print one row per (bins, m): Brier / ECE at 5, 20 and 60 sessions."""
    rows = cal.load().rows
    shipped = (cal.BIN_EDGES, cal.m_estimate.__defaults__, cal.m_estimate.__kwdefaults__)
    print("| bins | m | 5d Brier / ECE | 20d Brier / ECE | 60d Brier / ECE |")
    print("|---|---|---|---|---|")
    try:
        for name, edges in (("5 (shipped)", cal.BIN_EDGES), ("1 (base rate)", (-1.0, 1.0))):
            for m in (50.0, 200.0, 1000.0):
                # the module reads these at call time: patched here, restored below
                cal.BIN_EDGES = edges  # type: ignore[misc]
                cal.m_estimate.__kwdefaults__ = {"m": m}
                model = cal.CalibrationModel(rows, benchmark="SPY")
                result = evaluate(model, start=date(2013, 7, 1), end=date(2015, 12, 31))
                cells = " | ".join(
                    f"{result['horizons'][h]['brier']:.4f} / {result['horizons'][h]['ece']:.4f}"
                    for h in cal.HORIZONS
                )
                print(f"| {name} | {m:g} | {cells} |", flush=True)
    finally:
        cal.BIN_EDGES, cal.m_estimate.__defaults__, cal.m_estimate.__kwdefaults__ = shipped  # type: ignore[misc]


if __name__ == "__main__":
    main()
