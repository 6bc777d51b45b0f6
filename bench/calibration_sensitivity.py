"""How the walk-forward Brier and ECE of the calibration move with its choices (the bins, m of
the m-estimate, and the evidence gate), on the shipped artifact's rows; documentation of the
Brier target, not a tuning run: the shipped constants stay as in ``agents.quant.calibration``.

Usage: ``uv run python bench/calibration_sensitivity.py`` (a Markdown table on stdout, ~30 s).
Only rows whose outcome ends by 2015-12-31 exist in the artifact (the hold-out is never read).

Gates: ``none`` (every bin speaks: the method before the gate), ``normal 95 %`` (clustered
variance, overlap factor, z = 1.96), ``Bonferroni`` (the same at 99 %, z = 2.576: five bins
tested), ``t(G/L-1) 95 %`` (Student's t on the number of non-overlapping date blocks, the gate
until the hurdle was raised), ``t >= 3 in absolute value`` (shipped: the same t distribution at the tail of a
normal |z| = 3, the hurdle of Harvey, Liu and Zhu 2016 for a signal among many tried).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date

from agents.quant import calibration as cal
from apps.calibration import evaluate

Gate = Callable[..., tuple[bool, float]]
Critical = Callable[[float], float]


def _normal_quantile(z: float) -> Callable[[float], float]:
    """The gate's critical value replaced by a fixed normal quantile ``z`` (same variance)."""
    return lambda blocks: z


def _t95(blocks: float) -> float:
    """The gate's critical value before the hurdle was raised: t(0.975, blocks - 1)."""
    from scipy.stats import t as student_t  # type: ignore[import-untyped]

    return float(student_t.ppf(0.975, blocks - 1))


def main() -> None:
    """Print one row per (gate, bins, m): Brier / ECE at 5, 20 and 60 sessions."""
    rows = cal.load().rows
    shipped = (
        cal.BIN_EDGES,
        cal.m_estimate.__kwdefaults__,
        cal.CalibrationModel.separates,
        cal.critical_value,
    )
    gates: list[tuple[str, Gate, Critical]] = [
        ("none", lambda self, **kw: (True, 0.0), shipped[3]),
        ("normal 95 %", shipped[2], _normal_quantile(1.96)),
        ("Bonferroni 99 %", shipped[2], _normal_quantile(2.576)),
        ("t(G/L-1) 95 %", shipped[2], _t95),
        ("t >= 3 in absolute value, on t(G/L-1) (shipped)", shipped[2], shipped[3]),
    ]
    print("| gate | bins | m | 5d Brier / ECE | 20d Brier / ECE | 60d Brier / ECE |")
    print("|---|---|---|---|---|---|")
    try:
        for gate_name, gate, critical in gates:
            for name, edges in (("5 (shipped)", shipped[0]), ("1 (base rate)", (-1.0, 1.0))):
                for m in (50.0, 200.0, 1000.0):
                    # the module reads these at call time: patched here, restored below
                    cal.BIN_EDGES = edges  # type: ignore[misc]
                    cal.m_estimate.__kwdefaults__ = {"m": m}
                    cal.CalibrationModel.separates = gate  # type: ignore[method-assign]
                    cal.critical_value = critical
                    model = cal.CalibrationModel(rows, benchmark="SPY")
                    result = evaluate(model, start=date(2013, 7, 1), end=date(2015, 12, 31))
                    cells = " | ".join(
                        f"{result['horizons'][h]['brier']:.5f} / {result['horizons'][h]['ece']:.4f}"
                        for h in cal.HORIZONS
                    )
                    print(f"| {gate_name} | {name} | {m:g} | {cells} |", flush=True)
    finally:
        cal.BIN_EDGES, cal.m_estimate.__kwdefaults__ = shipped[0], shipped[1]  # type: ignore[misc]
        cal.CalibrationModel.separates = shipped[2]  # type: ignore[method-assign]
        cal.critical_value = shipped[3]


if __name__ == "__main__":
    main()
