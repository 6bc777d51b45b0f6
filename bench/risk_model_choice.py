"""The walk-forward comparison that chose the risk model's constants (agents/quant/risk/constants.py).

    .venv/bin/python bench/risk_model_choice.py [--prices DIR] [--only NAME,NAME] [--write-pooled] [--json]

For each candidate below, the whole stocknet universe (the names with prices in the period) is
forecast from every session of 2013-07-01 .. 2015-12-31 and scored on the windows that end by
2015-12-31 (``apps.risk_eval``, two processes): nothing from 2016 on is read. Stdout: one
line per candidate with the 1-day VaR(95 %)/(99 %) exception rates, the share of names passing
Christoffersen's conditional-coverage test at 5 %, the 1-day σ² QLIKE against HV20 (%) with its
Diebold–Mariano t, and the 20- and 60-session 80 / 95 % range coverage, also for windows that span
a report. The chosen model is ``chosen`` (the defaults of ``RiskSpec``).

``--write-pooled`` first rebuilds the pooled earnings-move table
(``agents/quant/risk/pooled_earnings_moves.json``) with the chosen variance model, from reports up
to 2015-12-31: needed after changing the variance model.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from datetime import date
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agents.quant.risk.engine import RiskSpec  # noqa: E402
from apps import risk_eval  # noqa: E402

START, END = date(2013, 7, 1), date(2015, 12, 31)
CHOSEN = RiskSpec()
CANDIDATES: dict[str, RiskSpec] = {
    "chosen": CHOSEN,
    "ewma": replace(CHOSEN, volatility="ewma"),
    "garch_t": replace(CHOSEN, volatility="garch_t"),
    "har_level": replace(CHOSEN, volatility="har_level"),
    "ewma+har_log": replace(CHOSEN, volatility="ewma+har_log"),
    "no_variance_ratio": replace(CHOSEN, vr_prior=None),
    "variance_ratio_30": replace(CHOSEN, vr_prior=30.0),
    "normal_sums": replace(CHOSEN, aggregation="normal"),
    "pool_500": replace(CHOSEN, pool_window=500),
    "raw_jumps": replace(CHOSEN, jump_mode="raw"),
    "own_moves_4": replace(CHOSEN, min_own_moves=4),
    "projected_jumps": replace(CHOSEN, project=True),
    "no_earnings_handling": replace(CHOSEN, add_earnings=False, exclude_earnings=False),
}


def _line(name: str, s: dict[str, Any], seconds: float) -> dict[str, Any]:
    h1, h20, h60 = s["horizons"]["1"], s["horizons"]["20"], s["horizons"]["60"]

    def cov(block: dict[str, Any] | None, level: str) -> float | None:
        return None if not block else round(100 * block[level]["pooled"], 1)

    return {
        "candidate": name,
        "seconds": round(seconds),
        "var95": round(100 * h1["var"]["95"]["pooled"], 2),
        "var99": round(100 * h1["var"]["99"]["pooled"], 2),
        "cc95": round(100 * h1["var"]["95"]["christoffersen_pass_share"]),
        "cc99": round(100 * h1["var"]["99"]["christoffersen_pass_share"]),
        "qlike_vs_hv20": round(100 * h1["variance"]["qlike"]["vs_hv20"], 1),
        "dm_t": round(h1["variance"]["qlike"]["dm_t_hv20"], 1),
        "c80_20": cov(h20["ranges"], "80"),
        "c95_20": cov(h20["ranges"], "95"),
        "c80_20_earnings": cov(h20["ranges_by_earnings"]["spans_a_report"], "80"),
        "c95_20_earnings": cov(h20["ranges_by_earnings"]["spans_a_report"], "95"),
        "c80_60": cov(h60["ranges"], "80"),
        "c95_60": cov(h60["ranges"], "95"),
        "c80_60_earnings": cov(h60["ranges_by_earnings"]["spans_a_report"], "80"),
        **{
            f"var{level}_{h}": round(100 * s["horizons"][h]["var"][level]["pooled"], 2)
            for h in ("5", "20", "60")
            for level in ("95", "99")
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prices", type=Path, default=ROOT / ".." / "shared" / "data" / "ohlcv" / "stocknet")
    parser.add_argument("--only", default=None, help="comma-separated candidate names")
    parser.add_argument("--write-pooled", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    symbols = sorted(p.stem for p in args.prices.glob("*.csv"))
    if args.write_pooled:
        from agents.quant.risk.pooled import write_table

        rows, meta = risk_eval.build_pooled_moves(args.prices, symbols, until=END, spec=CHOSEN)
        write_table(rows, meta=meta)
        print(f"pooled table: {len(rows)} moves of {meta['names']} names", file=sys.stderr)
    names = args.only.split(",") if args.only else list(CANDIDATES)
    for name in names:
        started = time.perf_counter()
        results = risk_eval.run_symbols(
            args.prices, symbols, start=START, end=END, spec=CANDIDATES[name], levels=False
        )
        summary = risk_eval.summarise(results, start=START, end=END, spec=CANDIDATES[name])
        line = _line(name, summary, time.perf_counter() - started)
        print(json.dumps(line) if args.json else "  ".join(f"{k}={v}" for k, v in line.items()), flush=True)


if __name__ == "__main__":
    main()
