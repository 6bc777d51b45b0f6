"""Which Redis database a pytest process (or pytest-xdist worker) uses for integration tests."""

from __future__ import annotations

import os
from collections.abc import Mapping


def redis_db_for_process(
    environ: Mapping[str, str] | None = None, pid: int | None = None, ppid: int | None = None
) -> int:
    """The Redis database number this pytest process uses (0-15; Redis' default 16 databases).

    Databases 0-9 are left to developers and benchmarks; tests use 10-15. Each pytest-xdist
    worker (``PYTEST_XDIST_WORKER`` = ``gw0``, ``gw1``, ...) takes its own, because every
    ``service`` fixture flushes the database and the workers run in parallel:

    - ``FINAGENT_TEST_REDIS_DB=N`` pins it (parallel local runs in several worktrees never share
      one): worker ``gwK`` uses ``N + K``, a run without xdist uses ``N``;
    - otherwise ``10 + (run % 6 + K) % 6``, where ``run`` is the pid of the process that started
      the workers (the pytest process itself without xdist), so the workers of one run differ.

    Raises ``ValueError`` when a pinned ``N + K`` falls outside 0-15."""
    env = os.environ if environ is None else environ
    worker = env.get("PYTEST_XDIST_WORKER", "")
    index = int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else 0
    pinned = env.get("FINAGENT_TEST_REDIS_DB")
    if pinned is not None:
        db = int(pinned) + index
        if not 0 <= db <= 15:
            raise ValueError(
                f"FINAGENT_TEST_REDIS_DB={pinned} with xdist worker {worker} gives Redis database {db}, "
                "outside 0-15: pin a lower number or run fewer workers (-n)"
            )
        return db
    own = pid if pid is not None else os.getpid()
    parent = ppid if ppid is not None else os.getppid()
    run = parent if worker else own
    return 10 + (run % 6 + index) % 6
