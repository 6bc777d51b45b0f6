"""Wall time of ``finagent eval risk`` over the stocknet universe, two processes against one.

    .venv/bin/python bench/risk_eval_time.py [--prices DIR] [--from 2013-07-01] [--to 2015-12-31] [--runs 1]

Each run is a new ``finagent eval risk --json`` process (imports, the earnings calendar and the
NYSE calendar included), timed from outside; ``--processes 2`` (the default) and ``--processes 1``
alternate so machine noise hits both. Stdout: each wall time, the ratio one/two processes, the
load average before and after, and last ``eval_risk_wall_s=X`` (the two-process median).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(args: argparse.Namespace, processes: int) -> float:
    cmd = [
        str(ROOT / ".venv" / "bin" / "finagent"), "eval", "risk", "--from", args.start, "--to", args.end,
        "--prices", str(args.prices), "--json", "--processes", str(processes),
    ]  # fmt: skip
    started = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"eval risk failed ({done.returncode}): {done.stderr[-2000:]}")
    return wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prices", type=Path, default=ROOT / ".." / "shared" / "data" / "ohlcv" / "stocknet")
    parser.add_argument("--from", dest="start", default="2013-07-01")
    parser.add_argument("--to", dest="end", default="2015-12-31")
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    two: list[float] = []
    one: list[float] = []
    for _ in range(args.runs):
        two.append(_run(args, 2))
        print(f"2 processes: {two[-1]:.1f} s", flush=True)
        one.append(_run(args, 1))
        print(f"1 process:   {one[-1]:.1f} s", flush=True)
    load_after = os.getloadavg()[0]
    ratio = statistics.median(one) / statistics.median(two)
    print(
        f"ratio one/two processes: {ratio:.2f}; load average {load_before:.1f} before, {load_after:.1f} after"
    )
    print(f"eval_risk_wall_s={statistics.median(two):.1f}")


if __name__ == "__main__":
    main()
