"""Latency of the everyday ``finagent`` commands against two baselines measured in the same run.

    .venv/bin/python bench/cli_latency.py [--runs 7] [--bytecode as-is|cached] [--code DIR]
                                          [--only list,show] [--json]

Timed, each as a new process in embedded mode (no ``FINAGENT_*`` service variables, one private
``FINAGENT_SERVICE_STATE_DIR`` prepared with one analysis, so ``list``/``show`` read rows, the schema is
migrated and numba's cache is warm: a user's second command of the day):

* ``python -c pass`` (the interpreter's own start) and ``finagent --help`` (click and the
  command table): the baselines;
* ``finagent list``, ``finagent show ID``, ``finagent tool get_stock_data '{"symbol": "MSFT"}'
  --as-of 2010-06-30``, ``finagent doctor`` and ``finagent analyze AAPL`` (a warm embedded run).

The commands take turns, one run of each per round, so load on the (shared) machine hits them all
alike. Printed per command: median and min wall time, median CPU time (user + system of the child,
which the machine's other work inflates less than the wall time) and both as ratios to
``finagent --help`` of the same rounds. The targets (a second for the reading commands, three
for ``analyze``) are for a quiet machine; on a loaded one read the ratios.

``--bytecode``: ``as-is`` inherits the environment (on a box with ``PYTHONDONTWRITEBYTECODE=1``
and a venv installed without ``--compile-bytecode``, every process compiles every module it
imports); ``cached`` points ``PYTHONPYCACHEPREFIX`` at a private directory primed by one untimed
round: what a user without that variable (or after ``uv sync --compile-bytecode``) gets.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RUN_TIMEOUT_S = 300.0
TARGETS_S = {"list": 1.0, "show": 1.0, "tool": 1.0, "doctor": 1.0, "analyze": 3.0}


def _finagent(code: Path | None) -> list[str]:
    """The command: this venv's ``finagent`` script, or for another checkout (``--code``, put
    first on ``PYTHONPATH``) ``python -m tasks`` (``python -m pipeline.cli`` in a checkout from
    before the command moved to ``tasks.main``)."""
    script = Path(sys.executable).with_name("finagent")
    if script.exists() and code is None:
        return [str(script)]
    module = "tasks" if code is None or (code / "tasks" / "__main__.py").exists() else "pipeline.cli"
    return [sys.executable, "-m", module]


def _run(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float, int, str]:
    """(wall s, CPU s of the child, exit code, stdout) of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(
        argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, proc.returncode, proc.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--bytecode", choices=["as-is", "cached"], default="as-is")
    parser.add_argument("--only", default=None, help="Comma-separated command labels to time (default: all).")
    parser.add_argument(
        "--code",
        type=Path,
        default=None,
        help="Another checkout to time with this venv (e.g. `git archive REV | tar -x -C DIR`).",
    )
    parser.add_argument("--json", action="store_true", help="Print one JSON object instead of the table.")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="finagent-cli-bench-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("FINAGENT_")}
    env["FINAGENT_SERVICE_STATE_DIR"] = str(work / "state")
    if args.bytecode == "cached":
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
    if args.code is not None:
        env["PYTHONPATH"] = str(args.code.resolve())
    finagent = _finagent(args.code)
    try:
        _, _, code, out = _run([*finagent, "analyze", "AAPL", "--json"], env, work)
        if code != 0:
            raise SystemExit(f"preparing the state folder failed (exit {code})")
        analysis_id = json.loads(out)["analysis_id"]
        commands: dict[str, list[str]] = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "--help": [*finagent, "--help"],
            "list": [*finagent, "list"],
            "show": [*finagent, "show", analysis_id],
            "tool": [*finagent, "tool", "get_stock_data", '{"symbol": "MSFT"}', "--as-of", "2010-06-30"],
            "doctor": [*finagent, "doctor"],
            "analyze": [*finagent, "analyze", "AAPL"],
        }
        if args.only:
            keep = {"python -c pass", "--help", *args.only.split(",")}
            commands = {k: v for k, v in commands.items() if k in keep}
        for argv in commands.values():  # prime: bytecode (cached), numba's cache, the SQLite pages
            _run(argv, env, work)
        walls: dict[str, list[float]] = {k: [] for k in commands}
        cpus: dict[str, list[float]] = {k: [] for k in commands}
        codes: dict[str, set[int]] = {k: set() for k in commands}
        load_before = os.getloadavg()
        for _ in range(args.runs):
            for label, argv in commands.items():
                wall, cpu, code, _ = _run(argv, env, work)
                walls[label].append(wall)
                cpus[label].append(cpu)
                codes[label].add(code)
        load_after = os.getloadavg()
    finally:
        shutil.rmtree(work, ignore_errors=True)

    base_wall = statistics.median(walls["--help"])
    base_cpu = statistics.median(cpus["--help"])
    rows = []
    for label in commands:
        median_wall, median_cpu = statistics.median(walls[label]), statistics.median(cpus[label])
        rows.append(
            {
                "command": label,
                "median_s": round(median_wall, 3),
                "min_s": round(min(walls[label]), 3),
                "cpu_median_s": round(median_cpu, 3),
                "wall_ratio_to_help": round(median_wall / base_wall, 2),
                "cpu_ratio_to_help": round(median_cpu / base_cpu, 2),
                "target_s": TARGETS_S.get(label),
                "exit_codes": sorted(codes[label]),
            }
        )
    result = {
        "runs": args.runs,
        "bytecode": args.bytecode,
        "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in load_after],
        "rows": rows,
    }
    if args.json:
        print(json.dumps(result))
        return
    load = f"load {result['load_before']} -> {result['load_after']}"
    print(f"{args.runs} rounds, bytecode {args.bytecode}, {load}")
    print("| command | median s | min s | CPU median s | wall / --help | CPU / --help | target s | exit |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for r in rows:
        print(
            f"| {r['command']} | {r['median_s']:.3f} | {r['min_s']:.3f} | {r['cpu_median_s']:.3f} | "
            f"{r['wall_ratio_to_help']:.1f} | {r['cpu_ratio_to_help']:.1f} | {r['target_s'] or '-'} | "
            f"{','.join(map(str, r['exit_codes']))} |"
        )


if __name__ == "__main__":
    main()
