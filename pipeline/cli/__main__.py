"""``python -m pipeline.cli``: the ``finagent`` command."""

from pipeline.cli import main

main()
