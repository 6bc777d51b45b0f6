"""``python -m tasks``: the ``finagent`` command."""

from tasks.main import main

main()
