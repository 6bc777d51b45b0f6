"""The ``finagent`` command's entry point: the Celery task queue installed (importing ``tasks``
does), then ``pipeline.cli.main``. ``python -m tasks`` runs the same."""

from __future__ import annotations

import tasks  # noqa: F401  # installs the Celery task queue (pipeline.taskqueue)
from pipeline.cli import main as cli_main


def main() -> None:
    """Run the ``finagent`` command line (``pipeline.cli``) with the Celery task queue."""
    cli_main()
