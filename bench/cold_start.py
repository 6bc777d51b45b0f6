"""Cold start of ``finagent analyze AAPL`` in embedded mode, against ``python -c "import pandas"``.

    .venv/bin/python bench/cold_start.py [--runs 5] [--bytecode as-is|cached] [--profile] [--json]

Each run is a new process, as for a new user: no ``FINAGENT_*`` service variables (embedded
mode: in-process Celery worker, SQLite), a fresh temporary ``FINAGENT_SERVICE_STATE_DIR`` (so the Alembic
migrations run every time) and a fresh temporary working directory (no ``.env``). Timed: the
subprocess wall time. The two commands alternate so machine noise hits both. Stdout: min and
median of each, the ratio of the medians, and last ``cold_start_median_s=X.XX``.

``--bytecode``: ``as-is`` (default) inherits the environment; on a box with
``PYTHONDONTWRITEBYTECODE=1`` and a venv installed without ``--compile-bytecode`` (this one),
every run compiles every imported module from source. ``cached`` points ``PYTHONPYCACHEPREFIX`` at
a private directory (the venv is not touched), lets Python write bytecode there and primes it
with one untimed run: what a ``pip install`` or ``uv sync --compile-bytecode`` user gets.

``--numba-cache``: ``as-is`` (default) uses numba's cache wherever it is (next to pandas-ta's
sources, ``__pycache__``, written by earlier runs); ``fresh`` gives every run an empty
``NUMBA_CACHE_DIR``, i.e. a user's very first analysis after installing (wheels ship no numba cache).

``--profile``: one more run of the same command through a small runner that records the wall
time of each phase (imports in dependency order, worker start, numba warm-up, migration,
analysis, worker stop) plus ``-X importtime`` aggregated by top-level package.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
TARGET_S = 8.0
RUN_TIMEOUT_S = 300.0  # one cold start; a very slow box is still far below this
SERVICE_VARS = (
    "FINAGENT_SERVICE_BROKER_URL",
    "FINAGENT_SERVICE_RESULT_BACKEND",
    "FINAGENT_SERVICE_DATABASE_URL",
    "FINAGENT_SERVICE_STATE_DIR",
)

# The profile runner: imports in the order the CLI needs them, timed one group at a time, then
# `finagent analyze SYMBOL` through click with the runtime phases wrapped. Prints one JSON line.
RUNNER = r"""
import json, sys, time
from contextlib import contextmanager
T0 = time.perf_counter()
phases = []
def timed(label, fn):
    s = time.perf_counter(); fn(); phases.append([label, time.perf_counter() - s])
timed("import click + apps.cli", lambda: __import__("apps.cli"))
timed("import core.settings (pydantic) + logs",
      lambda: (__import__("core.settings"), __import__("core.logs")))
timed("import numpy", lambda: __import__("numpy"))
timed("import pandas", lambda: __import__("pandas"))
timed("import sqlalchemy", lambda: __import__("sqlalchemy.orm"))
timed("import pipeline.service (rest: providers, db models/repo)", lambda: __import__("pipeline.service"))
timed("import celery + tasks.app + embedded", lambda: __import__("tasks.embedded"))
timed("import numba", lambda: __import__("numba"))
timed("import pandas_ta (+ agents.quant.indicators)", lambda: __import__("agents.quant.indicators"))
timed("import tasks.stages (rest)", lambda: __import__("tasks.stages"))
timed("import alembic (command, runtime)",
      lambda: (__import__("alembic.command"), __import__("alembic.runtime.migration")))
import agents.quant.indicators as at, agents.tools.technical  # noqa
import db.migrate as dm, pipeline.service as sv, tasks.embedded as pe
import agents.data.market.embedded as ape
calls = {}
def wrap(mod, name, label):
    fn = getattr(mod, name)
    def w(*a, **k):
        s = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            n = calls.get(label, 0); calls[label] = n + 1
            phases.append([label if n == 0 else f"{label} (call {n + 1})", time.perf_counter() - s])
    setattr(mod, name, w)
wrap(at, "warm_up", "numba warm-up (worker_init: first compute_indicators, 60 bars)")
wrap(at, "compute_indicators", "compute_indicators")
wrap(dm, "upgrade", "alembic migration (fresh SQLite)")
wrap(ape, "_load_frames", "embedded provider: parse stocks.csv.gz")
wrap(sv, "wait_for", "wait_for: the analysis runs in the worker thread (5 tasks)")
orig_ew = pe.embedded_worker
@contextmanager
def ew(*args, **kwargs):
    s = time.perf_counter(); cm = orig_ew(*args, **kwargs); w = cm.__enter__()
    phases.append(["embedded worker start (incl. warm-up)", time.perf_counter() - s])
    try:
        yield w
    finally:
        s = time.perf_counter(); cm.__exit__(None, None, None)
        phases.append(["embedded worker stop", time.perf_counter() - s])
pe.embedded_worker = ew
import apps.cli as cli
code = 0
s = time.perf_counter()
try:
    cli.main(["analyze", sys.argv[1]])
except SystemExit as exc:
    code = exc.code
phases.append(["cli.main total (after imports)", time.perf_counter() - s])
summary = {"code": code, "runner_s": time.perf_counter() - T0, "phases": phases}
print("COLDSTART_PHASES " + json.dumps(summary), file=sys.stderr, flush=True)
"""


def log(message: str) -> None:
    """Print ``message`` to stderr with an HH:MM:SS stamp (progress, not results)."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def base_env(bytecode: str, pycache: Path | None) -> dict[str, str]:
    """This process's environment without the FINAGENT_* service variables (embedded mode);
    ``bytecode="cached"`` lets Python write ``.pyc`` files under ``pycache``."""
    env = {k: v for k, v in os.environ.items() if k not in SERVICE_VARS}
    if bytecode == "cached":
        assert pycache is not None
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(pycache)
    return env


def run_once(cmd: list[str], env: dict[str, str], *, fresh_numba: bool = False) -> tuple[float, int, str]:
    """Run ``cmd`` in a fresh cwd with a fresh state dir; return (wall s, exit code, stderr)."""
    with tempfile.TemporaryDirectory(prefix="finagent-cold-") as tmp:
        run_env = {**env, "FINAGENT_SERVICE_STATE_DIR": str(Path(tmp) / "state")}
        if fresh_numba:
            run_env["NUMBA_CACHE_DIR"] = str(Path(tmp) / "numba-cache")
        started = time.perf_counter()
        proc = subprocess.run(
            cmd, cwd=tmp, env=run_env, capture_output=True, timeout=RUN_TIMEOUT_S, check=False
        )
        wall = time.perf_counter() - started
    return wall, proc.returncode, proc.stderr.decode(errors="replace")


def importtime_by_package(stderr: str) -> tuple[float, list[tuple[str, float]]]:
    """Total ``-X importtime`` self time and its split by top-level package (seconds)."""
    by_root: Counter[str] = Counter()
    for line in stderr.splitlines():
        m = re.match(r"import time:\s*(\d+) \|\s*(\d+) \| *(\S+)", line)
        if m:
            by_root[m.group(3).split(".")[0]] += int(m.group(1))
    return sum(by_root.values()) / 1e6, [(k, v / 1e6) for k, v in by_root.most_common(15)]


def profile(finagent_python: str, symbol: str, env: dict[str, str], *, fresh_numba: bool) -> dict[str, Any]:
    """One ``-X importtime`` run of the analysis: wall s, exit code and per-phase seconds
    (``COLDSTART_PHASES`` line) plus import self time by package. Raises RuntimeError when the
    run fails."""
    cmd = [finagent_python, "-X", "importtime", "-c", RUNNER, symbol]
    wall, code, stderr = run_once(cmd, env, fresh_numba=fresh_numba)
    line = next((ln for ln in stderr.splitlines() if ln.startswith("COLDSTART_PHASES ")), None)
    if line is None:
        errors = "\n".join(ln for ln in stderr.splitlines() if not ln.startswith("import time:"))
        raise RuntimeError(f"profile run failed (exit {code}):\n{errors[-3000:]}")
    data = json.loads(line.removeprefix("COLDSTART_PHASES "))
    total_import, packages = importtime_by_package(stderr)
    data.update(wall_s=wall, importtime_total_s=total_import, importtime_by_package=packages)
    return data


def main(argv: list[str] | None = None) -> int:
    """CLI entry: alternate ``finagent analyze`` and ``import pandas`` runs, print min/median
    seconds and their ratio; returns 0. Raises RuntimeError when a run exits non-zero."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--symbol", default="AAPL")
    parser.add_argument("--bytecode", choices=("as-is", "cached"), default="as-is")
    parser.add_argument("--numba-cache", choices=("as-is", "fresh"), default="as-is")
    parser.add_argument("--profile", action="store_true", help="also profile one run (phases, imports)")
    parser.add_argument("--json", action="store_true", help="also print a JSON summary")
    args = parser.parse_args(argv)

    venv_bin = Path(sys.executable).parent
    finagent = venv_bin / "finagent"
    analyze = (
        [str(finagent), "analyze", args.symbol]
        if finagent.exists()
        else [sys.executable, "-m", "tasks", "analyze", args.symbol]
    )
    baseline = [sys.executable, "-c", "import pandas"]
    pycache = Path(tempfile.mkdtemp(prefix="finagent-pycache-")) if args.bytecode == "cached" else None
    env = base_env(args.bytecode, pycache)
    fresh_numba = args.numba_cache == "fresh"
    log(
        f"bytecode={args.bytecode} numba-cache={args.numba_cache} "
        f"PYTHONDONTWRITEBYTECODE={env.get('PYTHONDONTWRITEBYTECODE', '')!r}; "
        f"{args.runs} runs each; cpu count {os.cpu_count()}; load {os.getloadavg()[0]:.2f}"
    )
    try:
        if pycache is not None:
            log("priming the bytecode cache (untimed)")
            run_once(analyze, env)
            run_once(baseline, env)
        times: dict[str, list[float]] = {"analyze": [], "import pandas": []}
        for i in range(args.runs):
            for name, cmd in (("import pandas", baseline), ("analyze", analyze)):
                wall, code, stderr = run_once(cmd, env, fresh_numba=fresh_numba)
                if code != 0:
                    raise RuntimeError(f"{' '.join(cmd)} exited {code}:\n{stderr[-3000:]}")
                times[name].append(wall)
                log(f"run {i + 1}/{args.runs} {name}: {wall:.2f} s")
        prof = profile(sys.executable, args.symbol, env, fresh_numba=fresh_numba) if args.profile else None
    finally:
        if pycache is not None:
            shutil.rmtree(pycache, ignore_errors=True)

    summary: dict[str, Any] = {
        "bytecode": args.bytecode,
        "numba_cache": args.numba_cache,
        "runs": args.runs,
        "target_s": TARGET_S,
        "cpu_count": os.cpu_count(),
    }
    for name, values in times.items():
        summary[name] = {"min_s": min(values), "median_s": statistics.median(values), "all_s": values}
        print(
            f"{name:14s} min {min(values):6.2f} s  median {statistics.median(values):6.2f} s  "
            f"(runs: {', '.join(f'{v:.2f}' for v in values)})"
        )
    ratio = summary["analyze"]["median_s"] / summary["import pandas"]["median_s"]
    summary["ratio_median"] = ratio
    verdict = "meets" if summary["analyze"]["median_s"] <= TARGET_S else "MISSES"
    print(f"analyze / import pandas (medians): {ratio:.2f}x; target <= {TARGET_S:g} s: {verdict}")
    if prof is not None:
        summary["profile"] = prof
        print(
            f"profile run: wall {prof['wall_s']:.2f} s (with -X importtime overhead), exit {prof['code']}; "
            f"interpreter start + shutdown {prof['wall_s'] - prof['runner_s']:.2f} s"
        )
        for label, seconds in prof["phases"]:
            print(f"  {seconds:7.3f} s  {label}")
        print(
            f"  imports, -X importtime self time {prof['importtime_total_s']:.2f} s, by package: "
            + ", ".join(f"{k} {v:.2f}" for k, v in prof["importtime_by_package"])
        )
    if args.json:
        print(json.dumps(summary, default=str))
    print(f"cold_start_median_s={summary['analyze']['median_s']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
