"""The ``finagent`` command's entry point: ``apps.cli.main`` (the click group) in a process
where importing this package installed the Celery task queue (``tasks/__init__.py``).
``python -m tasks`` runs the same."""

from __future__ import annotations

from collections.abc import Sequence

import tasks  # noqa: F401  # the parent package, imported first anyway: it installs the task queue
from apps.cli import main as cli
from apps.cli.lazy import settle_imports

__all__ = ["main"]


def main(args: Sequence[str] | None = None) -> None:
    """Run ``finagent`` with ``args`` (default: the process's command line) as this process's
    program: what the command imports is settled for the garbage collector
    (:func:`apps.cli.lazy.settle_imports`), then the click group runs and exits the process
    with the command's exit code (click's standalone mode)."""
    settle_imports()
    cli.main(args=args)
