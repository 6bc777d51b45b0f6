"""First ``render_chart`` of a fresh gateway process, against a warm render in the same process.

    .venv/bin/python bench/chart_first_render.py [--runs 5]

Each run is a new process that imports what the HTTP gateway imports (``apps.api.app``),
then, per mode:

- ``cold``: times the first ``render_chart`` call (what the first ``GET
  /analyses/{id}/chart.png`` of a gateway paid before the warm-up), then a second one (warm);
- ``warmed``: runs ``apps.analysis_chart.warm_up_charts()`` first (what the gateway now does in
  a background thread at start-up), then times the first call.

Same symbol (AAPL, the embedded data), ``as_of`` 2012-06-29, default period (6 months), all
annotations. Stdout: median seconds of each and the ratios to the warm render measured in the
same processes; the last line is ``first_render_ratio=X.XX`` (warmed first ÷ warm).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RUN_TIMEOUT_S = 300.0  # one process; a very slow box is still far below this

CHILD = r"""
import json, sys, time
from datetime import date
from pathlib import Path
import apps.api.app  # what the gateway process has imported before the first request
from agents.data.market.embedded import EmbeddedProvider
from agents.tools.catalog import run_tool
from agents.tools.registry import ToolContext
from core.settings import Settings
from apps.analysis_chart import warm_up_charts

mode, state_dir = sys.argv[1], Path(sys.argv[2])
settings = Settings(state_dir=state_dir)
ctx = ToolContext(settings=settings, as_of=date(2012, 6, 29), provider=EmbeddedProvider())
out = {}
if mode == "warmed":
    s = time.perf_counter(); warm_up_charts(); out["warm_up_s"] = time.perf_counter() - s
for label in ("first_s", "warm_s"):
    s = time.perf_counter()
    env = run_tool(name="render_chart", arguments={"symbol": "AAPL"}, ctx=ctx)
    out[label] = time.perf_counter() - s
    assert env.ok, env.error
print(json.dumps(out))
"""


def run_once(mode: str) -> dict[str, float]:
    """One fresh process in ``mode`` (``cold`` or ``warmed``); its timings in seconds."""
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.run(
            [sys.executable, "-c", CHILD, mode, tmp],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT_S,
            check=True,
        )
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    """Alternate the two modes ``--runs`` times; print medians and ratios."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    results: dict[str, list[dict[str, float]]] = {"cold": [], "warmed": []}
    for i in range(args.runs):
        for mode in results:
            results[mode].append(run_once(mode))
            print(f"run {i + 1} {mode}: {results[mode][-1]}", file=sys.stderr)

    def median(mode: str, key: str) -> float:
        return statistics.median(r[key] for r in results[mode])

    warm = statistics.median([r["warm_s"] for rs in results.values() for r in rs])
    cold_first = median("cold", "first_s")
    warmed_first = median("warmed", "first_s")
    print(f"warm render (baseline, same processes): median {warm:.2f} s")
    print(f"first render, cold process:   median {cold_first:.2f} s  ratio {cold_first / warm:.2f}")
    print(f"first render after warm-up:   median {warmed_first:.2f} s  ratio {warmed_first / warm:.2f}")
    print(f"warm-up itself (background thread in the gateway): median {median('warmed', 'warm_up_s'):.2f} s")
    print(f"first_render_ratio={warmed_first / warm:.2f}")


if __name__ == "__main__":
    main()
