"""Fault tests: the pipeline against real broker, database and worker failures (``-m fault``)."""
