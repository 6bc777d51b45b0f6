"""The ``finagent`` command's entry point: ``apps.cli.main`` (the click group) in a process
where importing this package installed the Celery task queue (``tasks/__init__.py``).
``python -m tasks`` runs the same."""

from __future__ import annotations

import tasks  # noqa: F401  # the parent package, imported first anyway: it installs the task queue
from apps.cli import main as main

__all__ = ["main"]
